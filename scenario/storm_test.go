package scenario

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/internal/vnet"
	"ratelab/model/ties"
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

// In virtual time a storm's clients, all started "at once", reach the
// server one nanosecond apart in index order (ties.Start(1)), so
// which of them a server admits first is the same in every run.
func TestStormStartsClientsInIndexOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &vnet.Network{}
		l, err := n.Listen("127.0.0.1:1")
		require.NoError(t, err)
		var mu sync.Mutex
		var ids []string
		var at []time.Time
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id := r.Header.Get(fakegpu.CallIDHeader); id != "" {
				mu.Lock()
				ids, at = append(ids, id), append(at, time.Now())
				mu.Unlock()
			}
		})}
		go func() { _ = hs.Serve(l) }()
		defer hs.Close()
		once := func(ctx context.Context, c *http.Client, req *http.Request, onAttempt func()) (*http.Response, error) {
			onAttempt()
			return c.Do(req)
		}
		const clients = 50
		st, err := Storm(context.Background(), StormOptions{BaseURL: "http://127.0.0.1:1", Clients: clients, Call: once, Dial: n.DialContext})
		require.NoError(t, err)
		require.Equal(t, int64(clients), st.Succeeded)
		require.Len(t, ids, clients)
		for i := range clients {
			assert.Equal(t, StormCallID(i), ids[i], "arrival %d", i)
			if i > 0 {
				assert.Equal(t, ties.Start(1), at[i].Sub(at[i-1]), "arrival %d after %d", i, i-1)
			}
		}
	})
}

// The amplifier's clients give up ties.Restart before the timeout: an
// attempt sent again the instant the last one timed out drifts off the
// send grid, generation after generation, instead of arriving with the
// next call and timing out as a slot's work ends.
func TestAmplifyTimesOutOffTheGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &vnet.Network{}
		l, err := n.Listen("127.0.0.1:1")
		require.NoError(t, err)
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // never answers
		})}
		go func() { _ = hs.Serve(l) }()
		defer hs.Close()
		var mu sync.Mutex
		var at []time.Time
		retry := func(ctx context.Context, c *http.Client, req *http.Request, onAttempt func()) (*http.Response, error) {
			for range 3 {
				onAttempt()
				mu.Lock()
				at = append(at, time.Now())
				mu.Unlock()
				resp, err := c.Do(req.Clone(ctx))
				if err == nil {
					return resp, nil
				}
			}
			return nil, context.DeadlineExceeded
		}
		st, err := Amplify(context.Background(), AmplifyOptions{BaseURL: "http://127.0.0.1:1", Rate: 10, Duration: 100 * time.Millisecond,
			Timeout: time.Second, Call: retry, Dial: n.DialContext})
		require.NoError(t, err)
		require.Equal(t, 1, st.Clients)
		require.Len(t, at, 3)
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			assert.Equal(t, ties.Restart(time.Second), gap, "attempt %d", i)
			assert.NotZero(t, at[i].Sub(at[0])%ties.Grid, "attempt %d is off the grid", i)
		}
	})
}
