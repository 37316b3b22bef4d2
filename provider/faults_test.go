package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// putPlan sets key's fault plan and returns the answer.
func putPlan(s *Server, key string, p results.APIFaultPlan) *httptest.ResponseRecorder {
	raw, _ := json.Marshal(p)
	r := httptest.NewRequest(http.MethodPut, "/faults?key="+key, bytes.NewReader(raw))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// TestFaultPlan fails every second request with each kind in turn, and
// checks each answer, what the stats say the client did with it, and that
// a failed request is charged nothing.
func TestFaultPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 6000
		s := newServer(t, c)
		require.Equal(t, 200, putPlan(s, "k", results.APIFaultPlan{Every: 2, RetryAfterSeconds: 2}).Code)
		assert.Equal(t, 400, putPlan(s, "other", results.APIFaultPlan{Every: 1}).Code, "every 1 fails everything")
		assert.Equal(t, 400, putPlan(s, "other", results.APIFaultPlan{Every: 2, Kinds: []string{"nope"}}).Code)

		// Request 1 passes; request 2 (body b) gets a 429 with retry-after 2.
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(1, 5)).Code)
		b := params(2, 5)
		w := post(s, "k", "/v1/messages", b)
		e := apiError(w)
		require.Equal(t, 429, e.StatusCode)
		assert.Equal(t, "2", w.Header().Get(HeaderRetryAfter))
		assert.Equal(t, "true", w.Header().Get(HeaderShouldRetry))
		// b again too soon (3, passes), then request 4 gets the bare 429.
		time.Sleep(time.Second)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", b).Code)
		w = post(s, "k", "/v1/messages", params(4, 5))
		assert.Equal(t, 429, w.Code)
		assert.Empty(t, w.Header().Get(HeaderRetryAfter), "the bare 429 has no retry-after")
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(5, 5)).Code)
		assert.Equal(t, StatusOverloaded, post(s, "k", "/v1/messages", params(6, 5)).Code)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(7, 5)).Code)
		assert.Equal(t, 500, post(s, "k", "/v1/messages", params(8, 5)).Code)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(9, 5)).Code)
		// Request 10 is held until its client gives up.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() { done <- postCtx(ctx, s, "k", "/v1/messages", params(10, 5)).Code }()
		synctest.Wait()
		assert.Equal(t, int64(1), s.KeyStats("k").Faults.Stalled, "held")
		time.Sleep(time.Hour)
		cancel()
		<-done
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(10, 5)).Code, "request 11: the retry")

		st := s.KeyStats("k")
		f := st.Faults
		require.NotNil(t, f)
		for _, k := range results.FaultKinds {
			assert.Equal(t, int64(1), f.Injected[k], "injected %s", k)
		}
		assert.Equal(t, map[string]int64{results.FaultRateLimit: 1, results.FaultTimeout: 1}, f.Retried)
		assert.Equal(t, int64(1), f.RetryAfterSent)
		assert.Equal(t, int64(1), f.RetriedEarly, "b came back after 1 s of 2")
		assert.InDelta(t, 1000, f.MinRetryAfterGapMS, 1e-9)
		assert.Equal(t, int64(0), f.Stalled)
		assert.Equal(t, int64(1), f.MaxStalled)
		assert.Equal(t, int64(6), st.Completed)
		assert.Equal(t, int64(0), st.RateLimited, "a fault is not a bucket's 429")
		assert.Equal(t, int64(1+2+5+7+9+10), st.InputTokens, "a failed request is charged nothing")
		assert.Equal(t, int64(0), s.KeyStats("other").Requests)
		assert.Nil(t, s.KeyStats("nobody").Faults)
	})
}
