package fakegpu

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// callServer is a shedding server whose admission refuses a request with
// ?ra=N at once (503, Retry-After N) and works on any other; with ?deaf=1
// it waits for a slot even after the client left.
func callServer(t *testing.T) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Mode, cfg.Work = ModeShed, time.Second
	s, err := New(cfg, WithAdmission(AdmissionFunc(func(w http.ResponseWriter, r *http.Request, j *Job) {
		if ra := r.URL.Query().Get("ra"); ra != "" {
			refuse(w, http.StatusServiceUnavailable, ra)
			return
		}
		ctx := r.Context()
		if r.URL.Query().Get("deaf") != "" {
			ctx = context.Background() // works on for clients that left
		}
		if err := j.Acquire(ctx); err != nil {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		j.Work()
		j.Release()
		WriteOK(w)
	})))
	require.NoError(t, err)
	return s
}

// attempt starts one attempt of call id with query q ("" for none).
func attempt(s *Server, ctx context.Context, id, q string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/generate"+q, nil)
		if id != "" {
			r.Header.Set(CallIDHeader, id)
		}
		s.ServeHTTP(httptest.NewRecorder(), r)
	}()
	return done
}

func callRecord(t *testing.T, s *Server, id string) results.CallRecord {
	t.Helper()
	st := s.StatsDetail().Calls
	require.NotNil(t, st)
	for _, c := range st.Calls {
		if c.ID == id {
			return c
		}
	}
	require.Failf(t, "no record", "call %q", id)
	return results.CallRecord{}
}

// A retry loop's attempts, one after another: the gaps and the returns
// after a Retry-After are measured from each answer.
func TestCallsOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := callServer(t)
		ctx := context.Background()
		<-attempt(s, ctx, "a", "?ra=2")
		time.Sleep(2*time.Second + 10*time.Millisecond) // honoured
		<-attempt(s, ctx, "a", "?ra=1")
		time.Sleep(500 * time.Millisecond) // half a second early
		<-attempt(s, ctx, "a", "")
		c := callRecord(t, s, "a")
		assert.Equal(t, results.CallRecord{
			ID: "a", Attempts: 3, MaxOpen: 1, Gaps: 2, MinGapMS: 500,
			RetryAfterReturns: 2, Early: 1, WorstRetryAfterS: 1, WorstGapMS: 500,
		}, c)
	})
}

// A call that sends its next attempt while the first is still open has two
// open at once; a different call's attempts are its own.
func TestCallsHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := callServer(t)
		ctx := context.Background()
		first := attempt(s, ctx, "hedge", "")
		time.Sleep(100 * time.Millisecond)
		second := attempt(s, ctx, "hedge", "")
		other := attempt(s, ctx, "other", "")
		<-first
		<-second
		<-other
		assert.Equal(t, int64(2), callRecord(t, s, "hedge").MaxOpen)
		assert.Equal(t, int64(0), callRecord(t, s, "hedge").Gaps, "the second came before any answer")
		assert.Equal(t, int64(1), callRecord(t, s, "other").MaxOpen)
	})
}

// An attempt whose client hung up is over, whatever the server still does
// with it: a retry after that is not a second open attempt.
func TestCallsClientHungUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := callServer(t)
		for range 8 { // fill the slots for 1 s
			attempt(s, context.Background(), "", "")
		}
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		first := attempt(s, ctx, "a", "?deaf=1") // waits in line, answered after 2 s
		time.Sleep(200 * time.Millisecond)
		cancel()
		synctest.Wait()
		second := attempt(s, context.Background(), "a", "")
		<-first
		<-second
		c := callRecord(t, s, "a")
		assert.Equal(t, int64(1), c.MaxOpen)
		assert.Equal(t, int64(2), c.Attempts)
	})
}

// The table holds CallCapacity calls; the attempts of others are counted
// only. Requests without the header are not recorded at all.
func TestCallsBounded(t *testing.T) {
	s := callServer(t)
	<-attempt(s, context.Background(), "", "?ra=1")
	assert.Nil(t, s.StatsDetail().Calls, "no call named itself")
	assert.Nil(t, s.Stats().Calls, "only with detail")
	for i := range CallCapacity + 5 {
		<-attempt(s, context.Background(), fmt.Sprintf("c%d", i), "?ra=1")
	}
	<-attempt(s, context.Background(), "c0", "?ra=1")
	st := s.StatsDetail().Calls
	require.NotNil(t, st)
	assert.Len(t, st.Calls, CallCapacity)
	assert.Equal(t, int64(5), st.Untracked)
	assert.Equal(t, int64(2), callRecord(t, s, "c0").Attempts)
}
