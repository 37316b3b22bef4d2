package fakegpu

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/lab"
	"ratelab/results"
)

// refuse answers status with a Retry-After of seconds ("" sends none).
func refuse(w http.ResponseWriter, status int, seconds string) {
	if seconds != "" {
		w.Header().Set("Retry-After", seconds)
	}
	http.Error(w, "no", status)
}

// drainAdmit sheds at MaxWaiting with a Retry-After from round(drain),
// and expires after the deadline the same way: round decides the header.
func drainAdmit(round func(time.Duration) string) AdmissionFunc {
	return func(w http.ResponseWriter, r *http.Request, j *Job) {
		cfg := j.Config()
		if n := j.Waiting(); n >= cfg.MaxWaiting {
			refuse(w, http.StatusServiceUnavailable, round(cfg.drain(int64(n))))
			return
		}
		if err := j.Acquire(r.Context()); err != nil {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		defer j.Release()
		if cfg.Deadline > 0 && time.Since(j.Arrived()) > cfg.Deadline {
			j.Release()
			refuse(w, http.StatusServiceUnavailable, round(cfg.drain(int64(j.Waiting()))))
			return
		}
		j.Work()
		j.Release()
		WriteOK(w)
	}
}

func ceilString(d time.Duration) string  { return strconv.FormatInt(retryAfterSeconds(d), 10) }
func floorString(d time.Duration) string { return strconv.Itoa(max(1, int(d/time.Second))) }

// 2 slots of 1 s and a line of 3: the line drains in 1.5 s, so 2 is right
// and 1 (rounded down) is wrong, for shed and expired requests alike.
func TestRefusalsJudgedAgainstTheLine(t *testing.T) {
	for _, tt := range []struct {
		name  string
		round func(time.Duration) string
		bad   bool
	}{
		{"rounded up", ceilString, false},
		{"rounded down", floorString, true},
		{"no header", func(time.Duration) string { return "" }, true},
		{"zero", func(time.Duration) string { return "0" }, true},
		{"a date", func(time.Duration) string { return "Wed, 21 Oct 2026 07:28:00 GMT" }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Mode, cfg.Slots, cfg.Work, cfg.MaxWaiting, cfg.Deadline = ModeShed, 2, time.Second, 3, 1500*time.Millisecond
				s, err := New(cfg, WithAdmission(drainAdmit(tt.round)))
				require.NoError(t, err)
				var done []<-chan *httptest.ResponseRecorder
				for range 6 { // 2 work, 3 wait, 1 is shed
					done = append(done, get(s, context.Background(), "/generate"))
					synctest.Wait()
				}
				for _, ch := range done {
					<-ch
				}
				st := s.StatsDetail()
				require.NotNil(t, st.Refusals)
				// The third waiter reaches a slot at 2 s, past the deadline.
				assert.Equal(t, int64(1), st.Shed, "shed")
				assert.Equal(t, int64(1), st.Expired, "expired")
				assert.Equal(t, int64(1), st.Refusals.Shed.Judged, "shed judged")
				assert.Equal(t, int64(1), st.Refusals.Expired.Judged, "expired judged")
				want := int64(0)
				if tt.bad {
					want = 1
				}
				assert.Equal(t, want, st.Refusals.Shed.Bad, "shed bad")
				if tt.bad {
					require.NotEmpty(t, st.Refusals.Bad)
					b := st.Refusals.Bad[0]
					assert.Equal(t, results.BadRefusal{
						Kind: results.RefusalShed, Status: 503, Header: tt.round(1500 * time.Millisecond),
						WantMinS: 2, WantMaxS: 2, Why: "the line of 3 this request saw drains in 1.5s",
					}, b)
					assert.Empty(t, s.Stats().Refusals.Bad, "examples only in the detailed stats")
				}
			})
		})
	}
}

// scripted is a limiter that refuses with a wait chosen per key.
type scripted map[string]time.Duration

func (s scripted) TryTake(key string, _ float64) (bool, time.Duration) {
	w, ok := s[key]
	return !ok, w
}

func TestLimitedJudgedAgainstTheLimiter(t *testing.T) {
	lim := scripted{
		"slow": 1500 * time.Millisecond, "quick": 3 * time.Millisecond, "never": lab.InfDuration,
		"liar":  3 * time.Second, // more than 1/rate = 2 s
		"zero":  0,
		"stuck": lab.InfDuration, // for one token, within the burst
	}
	tokens := map[string]float64{"never": 5} // more than the burst: never
	tests := []struct {
		key, header string
		bad         bool
	}{
		{"slow", "2", false},
		{"slow", "1", true}, // rounded down
		{"slow", "3", true},
		{"quick", "1", false},
		{"quick", "0", true},
		{"never", "60", false},
		{"never", "", true},
		{"liar", "2", true},   // no bucket of rate 1 says 2 s for one token
		{"zero", "1", true},   // refused, with nothing to wait for
		{"stuck", "60", true}, // one token is at most 2 s away
		{"granted", "1", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %q", tt.key, tt.header), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Mode, cfg.BucketRate, cfg.BucketBurst = ModeBucket, 0.5, 2
			s, err := New(cfg, WithLimiter(lim), WithAdmission(AdmissionFunc(func(w http.ResponseWriter, r *http.Request, j *Job) {
				n, ok := tokens[j.ClientKey()]
				if !ok {
					n = 1
				}
				_, _ = j.Limiter().TryTake(j.ClientKey(), n)
				refuse(w, http.StatusTooManyRequests, tt.header)
			})))
			require.NoError(t, err)
			r := httptest.NewRequest(http.MethodGet, "/generate", nil)
			r.Header.Set("X-Client-Id", tt.key)
			s.ServeHTTP(httptest.NewRecorder(), r)
			st := s.StatsDetail()
			assert.Equal(t, int64(1), st.Refusals.Limited.Judged)
			want := int64(0)
			if tt.bad {
				want = 1
			}
			assert.Equal(t, want, st.Refusals.Limited.Bad, "bad: %+v", st.Refusals.Bad)
		})
	}
}

func TestRefusalsOfClientsThatLeftAreNotJudged(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeShed
	s, err := New(cfg, WithAdmission(AdmissionFunc(func(w http.ResponseWriter, _ *http.Request, _ *Job) {
		refuse(w, http.StatusServiceUnavailable, "")
	})))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/generate", nil))
	assert.Equal(t, results.RefusalCounts{Gone: 1}, s.Stats().Refusals.Shed)
}

// A client's answers are counted by its key, with the span its bucket had.
func TestClientCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Mode = ModeBucket
		lim := &countdown{left: map[string]int{}}
		s, err := New(cfg, WithLimiter(lim), WithAdmission(AdmissionFunc(func(w http.ResponseWriter, r *http.Request, j *Job) {
			if ok, wait := j.Limiter().TryTake(j.ClientKey(), 1); !ok {
				refuse(w, http.StatusTooManyRequests, ceilString(wait))
				return
			}
			refuse(w, http.StatusServiceUnavailable, "1")
		})))
		require.NoError(t, err)
		send := func(key string) {
			r := httptest.NewRequest(http.MethodGet, "/generate", nil)
			r.Header.Set("X-Client-Id", key)
			s.ServeHTTP(httptest.NewRecorder(), r)
		}
		lim.left["steady"] = 3
		for range 5 {
			send("steady")
			time.Sleep(time.Second)
		}
		// One-off keys past the table's capacity: the oldest one-offs are
		// forgotten, the steady key never.
		for i := range 2 * ClientCapacity {
			send(fmt.Sprint("once-", i))
		}
		lim.left["late"] = 0
		send("late")
		st := s.StatsDetail().Clients
		require.NotNil(t, st)
		assert.LessOrEqual(t, len(st.Clients), ClientCapacity)
		assert.Equal(t, int64(2*ClientCapacity+2), st.NewKeys, "new keys")
		assert.Equal(t, int64(1), st.NewLimited, "late's first request was refused")
		assert.Positive(t, st.Forgotten)
		assert.Zero(t, st.Untracked)
		steady := st.Client("steady")
		require.NotNil(t, steady)
		assert.Equal(t, results.ClientCount{Key: "steady", Requests: 5, Limited: 2, Admitted: 3, SpanS: 2, MaxWaitMS: 1000}, *steady)
		assert.Equal(t, "steady", st.Clients[0].Key, "most requests first")
	})
}

// countdown grants each key's first left[key] requests (unlimited if
// absent), then refuses with a wait of 1 s.
type countdown struct{ left map[string]int }

func (c *countdown) TryTake(key string, _ float64) (bool, time.Duration) {
	n, ok := c.left[key]
	if !ok {
		return true, 0
	}
	if n == 0 {
		return false, time.Second
	}
	c.left[key] = n - 1
	return true, 0
}

func TestStatsQueries(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeShed
	s, err := New(cfg, WithAdmission(drainAdmit(ceilString)))
	require.NoError(t, err)
	read := func(q string) results.ServerStats {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats"+q, nil))
		require.Equal(t, http.StatusOK, w.Code)
		var st results.ServerStats
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &st))
		return st
	}
	plain := read("")
	assert.Positive(t, plain.CPUS, "cpu_s")
	assert.Positive(t, plain.Goroutines, "goroutines")
	assert.NotNil(t, plain.Refusals)
	assert.Nil(t, plain.Clients, "clients only with detail=1")
	assert.Nil(t, plain.Memory, "memory only with gc=1")
	assert.NotNil(t, read("?detail=1").Clients)
	m := read("?gc=1").Memory
	require.NotNil(t, m)
	assert.Positive(t, m.HeapBytes)
	assert.Positive(t, m.StackBytes)
	assert.Positive(t, m.Goroutines)
}

// The CPU time counts a busy goroutine: the idle check rests on it.
func TestProcessCPUCountsWork(t *testing.T) {
	for _, cpu := range []func() time.Duration{processCPU, runtimeCPU} {
		runtime.GC()
		before := cpu()
		start := time.Now()
		for time.Since(start) < 200*time.Millisecond {
		}
		used := cpu() - before
		assert.Greater(t, used, 50*time.Millisecond, "200 ms of spinning")
		assert.Less(t, used, 2*time.Second)
	}
}

// Admission code must take one token from the request's own bucket.
func TestOtherKeysAndExtraTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeBucket
	s, err := New(cfg, WithLimiter(fakeLimiter{}), WithAdmission(AdmissionFunc(func(w http.ResponseWriter, r *http.Request, j *Job) {
		switch j.ClientKey() {
		case "by-address":
			_, _ = j.Limiter().TryTake(r.RemoteAddr, 1)
		case "twice":
			_, _ = j.Limiter().TryTake(j.ClientKey(), 1)
			_, _ = j.Limiter().TryTake(j.ClientKey(), 1)
		default:
			_, _ = j.Limiter().TryTake(j.ClientKey(), 1)
		}
		WriteOK(w)
	})))
	require.NoError(t, err)
	for _, key := range []string{"by-address", "twice", "right"} {
		r := httptest.NewRequest(http.MethodGet, "/generate", nil)
		r.Header.Set("X-Client-Id", key)
		s.ServeHTTP(httptest.NewRecorder(), r)
	}
	st := s.StatsDetail().Clients
	assert.Equal(t, int64(1), st.OtherKeys, "other keys")
	assert.Equal(t, `asked about "192.0.2.1:1234" for a request of "by-address"`, st.OtherKeyExample)
	assert.Equal(t, int64(1), st.ExtraTokens, "extra tokens")
}

// The waits task 8's limiters may report on a refusal (Config.Counting):
// a fixed window's exactly until the next epoch-aligned boundary, a log's
// within one window, a counter's within the next window's start plus
// window/limit, a bucket's within one token.
func TestDishonestWindowWait(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.CountingLimit, cfg.CountingWindow = ModeBucket, 10, 2*time.Second
	at := time.Unix(1_000_000, 500_000_000) // 0.5 s into a 2 s window
	asked := at.Add(-3 * time.Microsecond)
	tests := []struct {
		counting string
		wait     time.Duration
		ok       bool
	}{
		{"fixed", 1500 * time.Millisecond, true},
		{"fixed", 1500*time.Millisecond + 3*time.Microsecond, true}, // read at asked
		{"fixed", 2 * time.Second, false},                           // a whole window from now
		{"fixed", 1400 * time.Millisecond, false},
		{"fixed", 0, false},
		{"log", 2 * time.Second, true},
		{"log", 2*time.Second + 3*time.Microsecond, true}, // the call took 3 µs
		{"log", 2*time.Second + 5*time.Microsecond, false},
		{"counter", time.Nanosecond, true},
		{"counter", -time.Second, false},
		// A window full 0.5 s in: 1.5 s to the next, then 0.2 s for the
		// full window's weight to fall by one request.
		{"counter", 1700 * time.Millisecond, true},
		{"counter", 1700*time.Millisecond + 4*time.Microsecond, true}, // read at asked
		{"counter", 1800 * time.Millisecond, false},
		{"bucket", 200 * time.Millisecond, true},
		{"bucket", time.Second, false},
		{"", time.Hour, true}, // task 3's bucket: dishonestWait's business
	}
	for _, tt := range tests {
		cfg.Counting = tt.counting
		why := dishonestWindowWait(cfg, tt.wait, asked, at)
		assert.Equal(t, tt.ok, why == "", "dishonestWindowWait(%q, %v) = %q", tt.counting, tt.wait, why)
	}
}

// A sliding log's wait is judged from the grants the server saw: until the
// oldest of the key's limit latest admissions stops counting; with fewer
// than limit that may still count, nothing is judged.
func TestGrantLogWait(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.Counting, cfg.CountingLimit, cfg.CountingWindow = ModeBucket, "log", 3, 2*time.Second
	t0 := time.Unix(1_000_000, 0)
	var g grantLog
	for _, ms := range []int{0, 100, 200, 300} { // the first drops out of the record
		at := t0.Add(time.Duration(ms) * time.Millisecond)
		g.add("a", at, at, cfg.CountingLimit)
	}
	now := t0.Add(500 * time.Millisecond)
	assert.Empty(t, g.logWait(cfg, "a", 1600*time.Millisecond, now, now), "until 100 ms + 2 s")
	assert.NotEmpty(t, g.logWait(cfg, "a", 1800*time.Millisecond, now, now), "until the newest stops counting")
	assert.NotEmpty(t, g.logWait(cfg, "a", 1500*time.Millisecond, now, now), "too soon")
	late := t0.Add(2150 * time.Millisecond) // the 100 ms grant no longer counts
	assert.Empty(t, g.logWait(cfg, "a", time.Hour, late, late), "fewer than limit may count: not judged")
	assert.Empty(t, g.logWait(cfg, "b", time.Hour, now, now), "an unknown key: not judged")
	later := t0.Add(900 * time.Millisecond) // a grant after the refusal is left out
	g.add("a", later, later, cfg.CountingLimit)
	assert.Empty(t, g.logWait(cfg, "a", 1600*time.Millisecond, now, now), "the grant at 900 ms came after")
	assert.NotEmpty(t, g.logWait(cfg, "a", 1700*time.Millisecond, now, now), "the grant at 900 ms came after")
	g.add("a", now, now, cfg.CountingLimit) // decided at the same instant: either order
	assert.Empty(t, g.logWait(cfg, "a", time.Hour, now, now), "a grant decided while the refusal was: not judged")

	// A call of the key still in progress may hold a grant decided before
	// this refusal and not yet recorded: nothing is judged until it ends.
	var p grantLog
	for _, ms := range []int{100, 200, 300} {
		at := t0.Add(time.Duration(ms) * time.Millisecond)
		p.add("a", at, at, cfg.CountingLimit)
	}
	p.begin("a")
	assert.Empty(t, p.logWait(cfg, "a", 1800*time.Millisecond, now, now), "a call of the key in progress: not judged")
	p.end("a", false, now, now, cfg.CountingLimit)
	assert.NotEmpty(t, p.logWait(cfg, "a", 1800*time.Millisecond, now, now), "judged again once it ended")
	assert.Empty(t, p.pending, "ended calls leave nothing behind")
}

// A token bucket's refusal may say at most n/rate, from the limiter's own
// reading of the clock; that reading may precede a state another caller
// brought up to date later in the same call, so the call's duration is
// allowed on top, and nothing more. (On a busy machine the reference keyed
// limiter, reading the clock before its lock, said up to 132 ms for one
// token at 70/s in a call that took about as long.)
func TestDishonestWaitAllowsTheCallsDuration(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode = ModeBucket // 70/s, burst 20: one token within 14.285715 ms
	asked := time.Unix(1_700_000_000, 0)
	tests := []struct {
		took, wait time.Duration
		ok         bool
	}{
		{0, 14285715 * time.Nanosecond, true},
		{0, 15 * time.Millisecond, false},
		{120 * time.Millisecond, 132 * time.Millisecond, true},
		{120 * time.Millisecond, 14285715*time.Nanosecond + 120*time.Millisecond + 2*waitSlack, false},
		{-time.Millisecond, 15 * time.Millisecond, false}, // a clock that stepped back allows nothing
	}
	for _, tt := range tests {
		why := dishonestWait(cfg, 1, tt.wait, asked, asked.Add(tt.took))
		assert.Equal(t, tt.ok, why == "", "call took %v, wait %v: %q", tt.took, tt.wait, why)
	}
	cfg.Counting, cfg.CountingLimit, cfg.CountingWindow = "bucket", 10, 2*time.Second
	assert.Empty(t, dishonestWindowWait(cfg, 300*time.Millisecond, asked, asked.Add(100*time.Millisecond)))
	assert.NotEmpty(t, dishonestWindowWait(cfg, 300*time.Millisecond, asked, asked.Add(time.Millisecond)))
}
