package provider

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get sends GET path with key to s.
func get(s *Server, key, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set(HeaderVersion, "2023-06-01")
	r.Header.Set(HeaderAPIKey, key)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// batchOf returns n requests of 10 input tokens, custom IDs tag-0 to tag-(n−1).
func batchOf(n int, tag string) BatchCreateParams {
	var p BatchCreateParams
	for i := range n {
		p.Requests = append(p.Requests, BatchRequest{CustomID: fmt.Sprintf("%s-%d", tag, i), Params: params(10, 5)})
	}
	return p
}

func decodeBatch(t *testing.T, w *httptest.ResponseRecorder) Batch {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var b Batch
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b))
	return b
}

func batchResults(t *testing.T, s *Server, key, id string) []BatchResponse {
	t.Helper()
	w := get(s, key, "/v1/messages/batches/"+id+"/results")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var out []BatchResponse
	sc := bufio.NewScanner(w.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r BatchResponse
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	return out
}

// TestBatchSchedule checks the lazy processing to the nanosecond: 10
// requests a second, one after another, batch after batch.
func TestBatchSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.BatchRequestsPerSecond = 10
		s := newServer(t, c)
		t0 := time.Now()
		a := decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(10, "a")))
		assert.Equal(t, BatchInProgress, a.ProcessingStatus)
		assert.Equal(t, BatchRequestCounts{Processing: 10}, a.RequestCounts)
		assert.Nil(t, a.EndedAt)
		assert.Nil(t, a.ResultsURL)
		assert.Equal(t, t0.Add(24*time.Hour).UTC(), a.ExpiresAt)
		b := decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(5, "b")))

		time.Sleep(time.Second - time.Nanosecond)
		assert.Equal(t, BatchInProgress, decodeBatch(t, get(s, "k", "/v1/messages/batches/"+a.ID)).ProcessingStatus, "1 s − 1 ns: the tenth request is not done")
		assert.Equal(t, int64(9), s.KeyStats("k").BatchSucceeded)
		time.Sleep(time.Nanosecond)
		a = decodeBatch(t, get(s, "k", "/v1/messages/batches/"+a.ID))
		assert.Equal(t, BatchEnded, a.ProcessingStatus, "10 requests at 10/s take 1 s")
		assert.Equal(t, BatchRequestCounts{Succeeded: 10}, a.RequestCounts)
		require.NotNil(t, a.EndedAt)
		assert.Equal(t, t0.Add(time.Second).UTC(), *a.EndedAt)
		require.NotNil(t, a.ResultsURL)
		assert.Equal(t, BatchInProgress, decodeBatch(t, get(s, "k", "/v1/messages/batches/"+b.ID)).ProcessingStatus, "b waited for a")

		res := batchResults(t, s, "k", a.ID)
		require.Len(t, res, 10)
		p := params(10, 5)
		for i, r := range res {
			assert.Equal(t, fmt.Sprintf("a-%d", i), r.CustomID)
			assert.Equal(t, BatchSucceeded, r.Result.Type)
			require.NotNil(t, r.Result.Message)
			assert.Equal(t, Usage{InputTokens: 10, OutputTokens: ReplyTokens(p)}, r.Result.Message.Usage)
		}
		w := get(s, "k", "/v1/messages/batches/"+b.ID+"/results")
		assert.Equal(t, http.StatusBadRequest, w.Code, "no results before the batch ends")

		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, BatchEnded, decodeBatch(t, get(s, "k", "/v1/messages/batches/"+b.ID)).ProcessingStatus, "5 more at 10/s: 1.5 s")

		// Half price, and nothing charged to the rate limits.
		st := s.KeyStats("k")
		assert.Equal(t, int64(2), st.Batches)
		assert.Equal(t, int64(15), st.BatchRequests)
		assert.Equal(t, int64(15), st.BatchSucceeded)
		assert.Equal(t, int64(150), st.BatchInputTokens)
		assert.Equal(t, int64(15*ReplyTokens(p)), st.BatchOutputTokens)
		assert.Equal(t, 0.5*c.Prices.Cost(150, 0, 0, st.BatchOutputTokens), st.BatchCostUSD)
		assert.Zero(t, st.Requests)
		assert.Zero(t, st.CostUSD)
	})
}

func TestBatchCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.BatchRequestsPerSecond = 10
		s := newServer(t, c)
		t0 := time.Now()
		a := decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(10, "a")))
		b := decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(10, "b")))
		time.Sleep(350 * time.Millisecond)
		a = decodeBatch(t, post(s, "k", "/v1/messages/batches/"+a.ID+"/cancel", nil))
		assert.Equal(t, BatchCanceling, a.ProcessingStatus)
		require.NotNil(t, a.CancelInitiatedAt)
		assert.Equal(t, t0.Add(350*time.Millisecond).UTC(), *a.CancelInitiatedAt)
		time.Sleep(100 * time.Millisecond)
		a = decodeBatch(t, get(s, "k", "/v1/messages/batches/"+a.ID))
		assert.Equal(t, BatchEnded, a.ProcessingStatus, "one request's time after the cancel")
		assert.Equal(t, BatchRequestCounts{Succeeded: 3, Canceled: 7}, a.RequestCounts)
		res := batchResults(t, s, "k", a.ID)
		require.Len(t, res, 10)
		assert.Equal(t, BatchSucceeded, res[2].Result.Type)
		assert.Equal(t, BatchCanceled, res[3].Result.Type)
		assert.Nil(t, res[3].Result.Message)

		// b starts when a has ended, at 450 ms, and takes 1 s.
		time.Sleep(time.Second - time.Nanosecond)
		assert.Equal(t, BatchInProgress, decodeBatch(t, get(s, "k", "/v1/messages/batches/"+b.ID)).ProcessingStatus)
		time.Sleep(time.Nanosecond)
		assert.Equal(t, BatchEnded, decodeBatch(t, get(s, "k", "/v1/messages/batches/"+b.ID)).ProcessingStatus)
		again := decodeBatch(t, post(s, "k", "/v1/messages/batches/"+b.ID+"/cancel", nil))
		assert.Equal(t, BatchRequestCounts{Succeeded: 10}, again.RequestCounts, "cancelling an ended batch changes nothing")
		assert.Nil(t, again.CancelInitiatedAt)
		st := s.KeyStats("k")
		assert.Equal(t, int64(13), st.BatchSucceeded)
		assert.Equal(t, int64(7), st.BatchCanceled)
	})
}

func TestBatchLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.BatchRequestsPerSecond = 10
		c.MaxBatchRequests = 5
		c.MaxBatchQueue = 8
		s := newServer(t, c)
		e := apiError(post(s, "k", "/v1/messages/batches", batchOf(6, "a")))
		assert.Equal(t, http.StatusBadRequest, e.StatusCode)
		assert.Equal(t, ErrorInvalidRequest, e.Type)
		assert.Contains(t, e.Message, "at most 5 requests")
		assert.Equal(t, http.StatusBadRequest, post(s, "k", "/v1/messages/batches", batchOf(0, "a")).Code)
		dup := batchOf(2, "a")
		dup.Requests[1].CustomID = "a-0"
		assert.Equal(t, http.StatusBadRequest, post(s, "k", "/v1/messages/batches", dup).Code)

		decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(5, "a")))
		e = apiError(post(s, "k", "/v1/messages/batches", batchOf(4, "b")))
		assert.Equal(t, http.StatusTooManyRequests, e.StatusCode, "5 + 4 queued > 8")
		assert.Equal(t, ErrorRateLimit, e.Type)
		decodeBatch(t, post(s, "other", "/v1/messages/batches", batchOf(4, "b")))
		time.Sleep(100 * time.Millisecond)
		decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(4, "b")))

		// An invalid request errors alone; a streamed one too.
		p := batchOf(3, "c")
		p.Requests[1].Params.MaxTokens = 0
		p.Requests[2].Params.Stream = true
		x := decodeBatch(t, post(s, "x", "/v1/messages/batches", p))
		time.Sleep(time.Second)
		x = decodeBatch(t, get(s, "x", "/v1/messages/batches/"+x.ID))
		assert.Equal(t, BatchRequestCounts{Succeeded: 1, Errored: 2}, x.RequestCounts)
		res := batchResults(t, s, "x", x.ID)
		require.Len(t, res, 3)
		require.NotNil(t, res[1].Result.Error)
		assert.Equal(t, ErrorInvalidRequest, res[1].Result.Error.Error.Type)
		assert.Equal(t, http.StatusNotFound, get(s, "k", "/v1/messages/batches/"+x.ID).Code, "another key's batch")
	})
}

func TestBatchList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, testConfig())
		var ids []string
		for i := range 5 {
			ids = append(ids, decodeBatch(t, post(s, "k", "/v1/messages/batches", batchOf(1, fmt.Sprint(i)))).ID)
		}
		list := func(q string) (got []string, more bool) {
			w := get(s, "k", "/v1/messages/batches"+q)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			var l BatchList
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &l))
			for _, b := range l.Data {
				got = append(got, b.ID)
			}
			return got, l.HasMore
		}
		got, more := list("?limit=2")
		assert.Equal(t, []string{ids[4], ids[3]}, got, "newest first")
		assert.True(t, more)
		got, more = list("?limit=2&after_id=" + ids[3])
		assert.Equal(t, []string{ids[2], ids[1]}, got)
		assert.True(t, more)
		got, more = list("?limit=2&after_id=" + ids[1])
		assert.Equal(t, []string{ids[0]}, got)
		assert.False(t, more)
		got, more = list("?limit=2&before_id=" + ids[1])
		assert.Equal(t, []string{ids[3], ids[2]}, got)
		assert.True(t, more)
		got, _ = list("")
		assert.Len(t, got, 5)
		assert.Equal(t, http.StatusBadRequest, get(s, "k", "/v1/messages/batches?limit=0").Code)
	})
}
