package fakegpu

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"ratelab/results"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	def := DefaultConfig()
	assert.Equal(t, 80.0, def.Capacity(), "DefaultConfig().Capacity()")
	require.NoError(t, def.Validate())
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no slots", func(c *Config) { c.Slots = 0 }},
		{"no work", func(c *Config) { c.Work = 0 }},
		{"bad mode", func(c *Config) { c.Mode = "fast" }},
		{"negative line", func(c *Config) { c.MaxWaiting = -1 }},
		{"negative deadline", func(c *Config) { c.Deadline = -time.Second }},
		{"bucket without rate", func(c *Config) { c.Mode, c.BucketRate = ModeBucket, 0 }},
		{"bucket with tiny burst", func(c *Config) { c.Mode, c.BucketBurst = ModeBucket, 0.5 }},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		tt.change(&c)
		assert.Error(t, c.Validate(), "%s: Validate() = nil; want an error", tt.name)
	}
}

func TestNewNeedsAdmissionInProtectedModes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeShed
	_, err := New(cfg)
	assert.ErrorContains(t, err, "admission")
	cfg.Mode = ModeBucket
	_, err = New(cfg, WithAdmission(AdmissionFunc(func(http.ResponseWriter, *http.Request, *Job) {})))
	assert.ErrorContains(t, err, "limiter")
}

// get sends GET path to s from a new goroutine and returns its recorder
// through the channel once the handler returns.
func get(s *Server, ctx context.Context, path string) <-chan *httptest.ResponseRecorder {
	ch := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		ch <- w
	}()
	return ch
}

func TestUnprotectedSlotsAndWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(DefaultConfig())
		require.NoError(t, err)
		start := time.Now()
		var done []<-chan *httptest.ResponseRecorder
		for range 20 {
			done = append(done, get(s, context.Background(), "/generate"))
		}
		synctest.Wait()
		st := s.Stats()
		assert.Equal(t, int64(8), st.InFlight, "in flight with 20 requests and 8 slots")
		assert.Equal(t, int64(12), st.Waiting, "waiting")
		assert.Equal(t, int64(12), st.MaxWaiting, "max waiting")
		for _, ch := range done {
			w := <-ch
			assert.Equal(t, http.StatusOK, w.Code)
			assert.JSONEq(t, `{"text":"hello"}`, w.Body.String())
		}
		// 20 requests on 8 slots of 100 ms: three rounds.
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "time to serve 20 requests")
		st = s.Stats()
		assert.Equal(t, results.ServerStats{Received: 20, Finished: 20, MaxWaiting: 12}, st)
	})
}

func TestUnprotectedWorksForClientsThatLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(DefaultConfig())
		require.NoError(t, err)
		// Fill the slots, then queue one request whose client leaves after 50 ms.
		var busy []<-chan *httptest.ResponseRecorder
		for range 8 {
			busy = append(busy, get(s, context.Background(), "/generate"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		gone := get(s, ctx, "/generate")
		for _, ch := range busy {
			<-ch
		}
		<-gone
		st := s.Stats()
		// ModeNone ignores the departure: the work is still done, and is dead.
		assert.Equal(t, int64(9), st.Finished, "finished")
		assert.Equal(t, int64(1), st.Dead, "dead: work done after the client left")
	})
}

func TestProtectedCounting(t *testing.T) {
	tests := []struct {
		name  string
		admit AdmissionFunc
		want  results.ServerStats
	}{
		{"shed before a slot", func(w http.ResponseWriter, _ *http.Request, _ *Job) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, results.ServerStats{Received: 1, Shed: 1}},
		{"expired after a slot", func(w http.ResponseWriter, r *http.Request, j *Job) {
			_ = j.Acquire(r.Context())
			j.Release()
			w.WriteHeader(http.StatusServiceUnavailable)
		}, results.ServerStats{Received: 1, Expired: 1}},
		{"limited", func(w http.ResponseWriter, _ *http.Request, _ *Job) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, results.ServerStats{Received: 1, Limited: 1}},
		{"leaked slot", func(w http.ResponseWriter, r *http.Request, j *Job) {
			_ = j.Acquire(r.Context())
			j.Work()
			WriteOK(w)
		}, results.ServerStats{Received: 1, Finished: 1, InFlight: 1, Leaked: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Mode = ModeShed
				s, err := New(cfg, WithAdmission(tt.admit))
				require.NoError(t, err)
				<-get(s, context.Background(), "/generate")
				got := s.Stats()
				got.Refusals = nil // judged in observe_test.go
				assert.Equal(t, tt.want, got)
			})
		})
	}
}

func TestJobHelpers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeBucket
	var key string
	var lim Limiter
	s, err := New(cfg, WithLimiter(fakeLimiter{}), WithAdmission(AdmissionFunc(func(w http.ResponseWriter, r *http.Request, j *Job) {
		key, lim = j.ClientKey(), j.Limiter()
		w.WriteHeader(http.StatusTooManyRequests)
	})))
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/generate", nil)
	r.RemoteAddr = "127.0.0.7:5555"
	s.ServeHTTP(httptest.NewRecorder(), r)
	assert.Equal(t, "127.0.0.7", key, "ClientKey without X-Client-Id")
	assert.NotNil(t, lim)
	r.Header.Set("X-Client-Id", "backfill")
	s.ServeHTTP(httptest.NewRecorder(), r)
	assert.Equal(t, "backfill", key, "ClientKey with X-Client-Id")
}

type fakeLimiter struct{}

func (fakeLimiter) TryTake(string, float64) (bool, time.Duration) { return true, 0 }

func TestStatsEndpoint(t *testing.T) {
	s, err := New(DefaultConfig())
	require.NoError(t, err)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats", nil))
	require.Equal(t, http.StatusOK, w.Code)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
	for _, k := range []string{"finished", "waiting", "max_waiting", "in_flight", "shed", "limited", "expired", "dead"} {
		assert.Contains(t, m, k, "/stats field")
	}
	w = httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/generate", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code, "POST /generate")
}

func TestCloseReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(DefaultConfig())
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() { <-get(s, context.Background(), "/generate") })
		}
		synctest.Wait()
		s.Close()
		wg.Wait() // every handler returns at once: nothing left behind
		assert.Equal(t, int64(0), s.Stats().Finished)
	})
}

func TestListenAndClose(t *testing.T) {
	s, err := New(DefaultConfig())
	require.NoError(t, err)
	in, err := Listen(s, "127.0.0.1:0")
	require.NoError(t, err)
	resp, err := http.Get(in.URL + "/generate")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, in.Close())
	require.NoError(t, in.Close(), "second Close")
	_, err = http.Get(in.URL + "/stats")
	assert.Error(t, err, "GET after Close")
}
