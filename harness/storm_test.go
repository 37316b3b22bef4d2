package harness

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
)

// Every storm client names its call with X-Call-Id, and a retry loop that
// resends its request keeps the name on every retry: the server records
// one call per client, with all its attempts.
func TestStormNamesEachCall(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode, cfg.Slots, cfg.Work = fakegpu.ModeShed, 2, 10*time.Millisecond
	srv, err := fakegpu.New(cfg, fakegpu.WithAdmission(fakegpu.AdmissionFunc(func(w http.ResponseWriter, r *http.Request, j *fakegpu.Job) {
		if j.Waiting() >= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if err := j.Acquire(r.Context()); err != nil {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		j.Work()
		j.Release()
		fakegpu.WriteOK(w)
	})))
	require.NoError(t, err)
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()

	const clients = 20
	// A plain retry loop: the same request again, 5 ms after each refusal.
	call := func(ctx context.Context, c *http.Client, req *http.Request, onAttempt func()) (*http.Response, error) {
		for {
			onAttempt()
			resp, err := c.Do(req)
			if err != nil || resp.StatusCode == http.StatusOK {
				return resp, err
			}
			resp.Body.Close()
			time.Sleep(5 * time.Millisecond)
		}
	}
	st, err := Storm(context.Background(), StormOptions{BaseURL: in.URL, Clients: clients, Call: call, Limit: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, int64(clients), st.Succeeded)

	calls := srv.StatsDetail().Calls
	require.NotNil(t, calls)
	require.Len(t, calls.Calls, clients)
	var attempts int64
	ids := map[string]bool{}
	for _, c := range calls.Calls {
		attempts += c.Attempts
		ids[c.ID] = true
		assert.Equal(t, int64(1), c.MaxOpen, c.ID)
	}
	for i := range clients {
		assert.True(t, ids[StormCallID(i)], "no call %s", StormCallID(i))
	}
	assert.Equal(t, srv.Stats().Received, attempts, "every attempt carried its call's id")
	assert.Equal(t, st.Attempts, attempts)
	assert.Greater(t, attempts, int64(clients), "some were refused and retried")
}
