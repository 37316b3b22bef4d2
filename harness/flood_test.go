package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/results"
)

// TestFloodInProcess floods a real fakegpu server briefly, below capacity,
// and checks the records against the server's own counts.
func TestFloodInProcess(t *testing.T) {
	srv, err := fakegpu.New(fakegpu.DefaultConfig())
	require.NoError(t, err)
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	run, err := Flood(context.Background(), Options{
		URL: in.URL + "/generate", Rate: 40, Duration: time.Second, Stats: ServerStats(srv),
	})
	require.NoError(t, err)
	assert.Equal(t, int64(40), run.Expected, "expected")
	assert.Equal(t, int64(40), run.Issued, "issued")
	assert.Equal(t, int64(40), run.OK, "ok")
	assert.Equal(t, run.OK, run.ServerFinal.Finished, "the server finished what the client saw succeed")
	assert.GreaterOrEqual(t, run.P50MS, 100.0, "p50 includes the 100 ms of work")
	assert.NotEmpty(t, run.Samples, "stats samples")
	assert.GreaterOrEqual(t, run.DrainedS, 0.0, "drained")
	for _, o := range results.Outcomes {
		assert.NotEmpty(t, run.Histograms[o], "histogram for %s", o)
	}
}

// stallServer answers at once, except that requests arriving between 0.5 s
// and 1.5 s after the first one are held until 1.5 s: a 1 s stall.
func stallServer(t *testing.T) *httptest.Server {
	var first atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		since := time.Duration(now - first.Load())
		if since >= 500*time.Millisecond && since < 1500*time.Millisecond {
			time.Sleep(1500*time.Millisecond - since)
		}
	}))
}

// TestCoordinatedOmission shows that latency measured from the intended send
// time includes a server stall, even when the client pool is capped and
// cannot send during it, while vegeta's own pickup latency hides it.
func TestCoordinatedOmission(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for 2 s twice")
	}
	for _, tt := range []struct {
		name       string
		maxWorkers uint64
	}{
		{"uncapped", 0},
		{"capped at one worker", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := stallServer(t)
			defer ts.Close()
			run, err := Flood(context.Background(), Options{
				URL: ts.URL, Rate: 200, Duration: 2 * time.Second, maxWorkers: tt.maxWorkers,
			})
			require.NoError(t, err)
			assert.Equal(t, int64(400), run.Issued, "issued")
			// About 200 of 400 requests were due during the stall; the p99
			// must show it.
			assert.GreaterOrEqual(t, run.P99MS, 900.0, "p99 from intended send time")
			if tt.maxWorkers == 1 {
				// One worker sat in the stall; every other request was picked
				// up late and then answered fast: vegeta's view hides it.
				assert.Less(t, run.PickupP99MS, 100.0, "vegeta's pickup-based p99")
				assert.False(t, run.Reliable, "a generator that fell 1 s behind is unreliable")
				assert.NotEmpty(t, run.Warnings)
			} else {
				// An uncapped generator keeps its schedule through the stall:
				// its lag is the machine's noise (a few ms, tens on a busy
				// 2-core machine), never the stall's second.
				assert.Less(t, run.SendLagP99MS, 250.0, "an uncapped generator keeps its schedule: %v", run.Warnings)
			}
		})
	}
}

// TestFloodInterrupted checks that cancelling a flood stops it early and
// returns the partial run marked interrupted.
func TestFloodInterrupted(t *testing.T) {
	srv, err := fakegpu.New(fakegpu.DefaultConfig())
	require.NoError(t, err)
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	run, err := Flood(ctx, Options{URL: in.URL + "/generate", Rate: 200, Duration: 10 * time.Second, Timeout: 30 * time.Second, Stats: ServerStats(srv)})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 3*time.Second, "an interrupted flood returns promptly")
	require.NotNil(t, run)
	assert.True(t, run.Interrupted)
	assert.Less(t, run.Issued, run.Expected)
}

// TestFloodSpreadsClients checks that a flood over several clients gives
// each request the next client's X-Client-Id, so each client sends its
// share of the rate.
func TestFloodSpreadsClients(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-Client-Id")]++
		mu.Unlock()
	}))
	defer ts.Close()
	run, err := Flood(context.Background(), Options{
		URL: ts.URL, Rate: 200, Duration: 300 * time.Millisecond, Clients: 3, ClientPrefix: "c",
		Header: http.Header{"X-Client-Id": {"ignored"}, "X-Other": {"kept"}},
	})
	require.NoError(t, err)
	assert.Equal(t, int64(3), run.Clients)
	assert.Equal(t, map[string]int{"c-0": 20, "c-1": 20, "c-2": 20}, seen)
	assert.Equal(t, "c-7", ClientID("c", 10, 17), "ClientID(c, 10, 17)")
}

func TestHTTPStatsOf(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = fakegpu.ModeShed
	srv, err := fakegpu.New(cfg, fakegpu.WithAdmission(fakegpu.AdmissionFunc(func(w http.ResponseWriter, _ *http.Request, _ *fakegpu.Job) {
		fakegpu.WriteOK(w)
	})))
	require.NoError(t, err)
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	st, err := HTTPStats(in.URL)(context.Background())
	require.NoError(t, err)
	assert.Nil(t, st.Memory)
	assert.Nil(t, st.Clients)
	st, err = HTTPStatsOf(in.URL, StatsQuery{Detail: true, GC: true})(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, st.Memory)
	assert.NotNil(t, st.Clients)
}

// A flood of a server in another process needs a socket per request in
// flight; one whose server may be in this process needs both ends.
func TestFileNeed(t *testing.T) {
	o := Options{Rate: 20000, Timeout: time.Second}
	assert.Equal(t, uint64(40256), fileNeed(o), "both ends here")
	o.ServerElsewhere = true
	assert.Equal(t, uint64(20256), fileNeed(o), "the client's sockets only")
	o.Timeout = 1500 * time.Millisecond
	o.Rate = 333
	assert.Equal(t, uint64(500+256), fileNeed(o), "rate × timeout, rounded up")
}

// TestFloodPattern floods in spikes: the schedule's count is sent, the run
// records the pattern and its mean rate, and the timeline puts each spike
// in the bin of its due time.
func TestFloodPattern(t *testing.T) {
	var got atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	defer ts.Close()
	run, err := Flood(context.Background(), Options{
		URL: ts.URL, Duration: 600 * time.Millisecond,
		Pattern: Pattern{Kind: PatternSpikes, Spike: 5, Every: 250 * time.Millisecond},
	})
	require.NoError(t, err)
	assert.Equal(t, int64(10), run.Expected, "two spikes of 5 in 600 ms")
	assert.Equal(t, int64(10), run.Issued)
	assert.Equal(t, int64(10), got.Load(), "the server saw")
	assert.Equal(t, 20.0, run.OfferedRPS, "the mean rate")
	assert.Equal(t, "spikes of 5 every 250ms", run.Name)
	require.NotNil(t, run.Pattern)
	assert.Equal(t, results.Pattern{Kind: "spikes", Spike: 5, EveryS: 0.25}, *run.Pattern)
	assert.Equal(t, []int64{0, 5, 5, 0}, run.Timeline[results.OutcomeOK], "a spike per 250 ms bin, by due time")
}
