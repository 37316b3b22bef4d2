package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"ratelab/fakegpu"
	"ratelab/model/ties"
	"ratelab/results"
)

// HTTPStats returns a StatsFunc that reads baseURL + "/stats" with its own
// client, so sampling never waits behind the flood's connections.
func HTTPStats(baseURL string) StatsFunc { return HTTPStatsOf(baseURL, StatsQuery{}) }

// StatsQuery asks a fake GPU's /stats for more than its counters.
type StatsQuery struct {
	// Detail adds the examples of wrong refusals and the answers per
	// client key.
	Detail bool
	// GC makes the server collect garbage first and add its live memory:
	// too slow to sample, right for a reading before and after a flood.
	GC bool
}

// HTTPStatsOf is HTTPStats asking for q. The GC reading may take a while
// on a large heap, so its client waits up to 10 s.
func HTTPStatsOf(baseURL string, q StatsQuery) StatsFunc {
	timeout := 2 * time.Second
	u := strings.TrimSuffix(baseURL, "/") + "/stats"
	v := url.Values{}
	if q.Detail {
		v.Set(fakegpu.StatsDetail, "1")
	}
	if q.GC {
		v.Set(fakegpu.StatsGC, "1")
		timeout = 10 * time.Second
	}
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	return func(ctx context.Context) (results.ServerStats, error) {
		var s results.ServerStats
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return s, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return s, fmt.Errorf("read server stats: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return s, fmt.Errorf("read server stats: %s answered %s", u, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return s, fmt.Errorf("read server stats: %w", err)
		}
		return s, nil
	}
}

// ServerStats returns a StatsFunc that reads an in-process server directly.
func ServerStats(s *fakegpu.Server) StatsFunc {
	return func(context.Context) (results.ServerStats, error) { return s.Stats(), nil }
}

// sampler reads the server's stats at a fixed interval in the background.
type sampler struct {
	opts Options
	t0   time.Time

	mu      sync.Mutex
	samples []results.Sample
	err     error
	drained chan struct{} // closed by the sampler once a sample shows an empty, idle server after the flood
	flooded chan struct{} // closed when sending has stopped
	done    chan struct{}
	cancel  context.CancelFunc
	once    sync.Once
	wg      sync.WaitGroup
}

// Sampler reads a server's stats every interval in the background, from
// ties.ReadPhase past its start onwards (see [StartSampler]).
type Sampler struct{ s *sampler }

// StartSampler starts reading stats every interval, counting time from
// t0, until Stop. A nil stats reads nothing.
func StartSampler(stats StatsFunc, every time.Duration, t0 time.Time) *Sampler {
	return &Sampler{startSampler(Options{Stats: stats, SampleEvery: every}, t0)}
}

// Stop stops the readings; it may be called more than once.
func (s *Sampler) Stop() { s.s.stop() }

// Samples returns the readings so far.
func (s *Sampler) Samples() []results.Sample {
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	return append([]results.Sample(nil), s.s.samples...)
}

func startSampler(opts Options, t0 time.Time) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{
		opts:    opts,
		t0:      t0,
		drained: make(chan struct{}),
		flooded: make(chan struct{}),
		done:    make(chan struct{}),
		cancel:  cancel,
	}
	if opts.Stats == nil {
		close(s.drained)
		return s
	}
	s.wg.Add(1)
	go s.loop(ctx)
	return s
}

func (s *sampler) loop(ctx context.Context) {
	defer s.wg.Done()
	// Read between the instants the server acts on, so that in virtual
	// time a reading never races an arrival or the end of a slot's work
	// (ties.ReadPhase; nothing measurable on the wall clock).
	time.Sleep(ties.ReadPhase)
	tick := time.NewTicker(s.opts.SampleEvery)
	defer tick.Stop()
	drainedOnce := sync.Once{}
	for {
		st, err := s.opts.Stats(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if err != nil {
			if s.err == nil {
				s.err = err
			}
		} else {
			s.samples = append(s.samples, results.Sample{TS: time.Since(s.t0).Seconds(), Stats: st})
		}
		s.mu.Unlock()
		select {
		case <-s.flooded:
			if err != nil || (st.Waiting == 0 && st.InFlight == 0) {
				drainedOnce.Do(func() { close(s.drained) })
			}
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// drain waits until the server's line is empty, for at most limit.
func (s *sampler) drain(ctx context.Context, limit time.Duration) {
	close(s.flooded)
	if limit < 0 {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-s.drained:
	case <-t.C:
	case <-ctx.Done():
	}
}

func (s *sampler) stop() {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
	})
}

// fill copies the samples into run, with the stats the moment the flood
// ended (floodEnd after t0) and the final ones.
func (s *sampler) fill(run *results.Run, floodEnd time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run.SampleEveryMS = float64(s.opts.SampleEvery) / float64(time.Millisecond)
	run.Samples = s.samples
	run.DrainedS = -1
	if s.err != nil {
		run.Warnings = append(run.Warnings, fmt.Sprintf("server stats: %v", s.err))
	}
	if len(s.samples) == 0 {
		return
	}
	end := floodEnd.Seconds()
	last := s.samples[len(s.samples)-1]
	run.ServerFinal = last.Stats
	if last.Stats.Waiting == 0 && last.Stats.InFlight == 0 {
		run.DrainedS = max(0, last.TS-end)
	}
}

// offGrid sleeps until the next instant, counted from t0, at which a
// one-off reading races nothing (ties.NextRead): the reading after a flood,
// which decides that the line is to be drained, then never shares an
// instant with a sample, which would see the flood still running or not by
// the scheduler's choice.
func offGrid(t0 time.Time) {
	time.Sleep(ties.NextRead(time.Since(t0)))
}
