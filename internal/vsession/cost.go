package vsession

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"ratelab/fakegpu"
	"ratelab/scenario"
)

// Computation is free in virtual time: a bubble's clock moves only when
// every goroutine in it waits, so code that burns a millisecond of CPU per
// call looks perfect there. OpCost measures that cost on the wall clock,
// outside the bubble, with objects made outside it: the one thing a
// session judges in real time.

// CostRequest says what OpCost measures: each part that is set.
type CostRequest struct {
	// Server measures requests through a fake GPU server configured so,
	// with the graded admission and limiter; its work is made 1 ns, so
	// what is measured is the server's own path. Requests come from Keys
	// distinct clients (X-Client-Id), in turn.
	Server *fakegpu.Config `json:"server,omitempty"`
	Keys   int             `json:"keys,omitempty"`
	// Breaker measures one Allow and its done(true) on the graded breaker
	// configured so.
	Breaker *Breaker `json:"breaker,omitempty"`
	// Limit and Window configure each of the graded counting limiters
	// (and the bucket with its default burst), whose Allow is measured
	// over Keys clients; Limit 0 measures none of them.
	Limit  int           `json:"limit,omitempty"`
	Window time.Duration `json:"window,omitempty"`
}

// Cost is what one part of the graded code cost per call on the wall
// clock: the least over costRounds rounds of the mean of up to costCalls
// calls (other load on the machine only ever adds time).
type Cost struct {
	Name    string        `json:"name"`
	Calls   int           `json:"calls"`    // calls in the fastest round
	PerCall time.Duration `json:"per_call"` // wall time per call
}

// Sizes of a cost measurement: each round stops after costCalls calls or
// costRound of real time, whichever comes first, so slow code is measured
// in bounded time.
const (
	costRounds = 3
	costCalls  = 2000
	costRound  = 300 * time.Millisecond
)

// measureCost runs req's parts; it runs outside the bubble.
func measureCost(host Host, req CostRequest) ([]Cost, error) {
	var out []Cost
	keys := max(req.Keys, 1)
	if req.Server != nil {
		if host.NewServer == nil {
			return nil, fmt.Errorf("no server in this session")
		}
		cfg := *req.Server
		cfg.Work = time.Nanosecond
		srv, done, err := costServer(host, cfg)
		if err != nil {
			return nil, err
		}
		defer done()
		ids := clientIDs(keys)
		out = append(out, timeCalls("server "+string(cfg.Mode), func(i int) {
			r := httptest.NewRequest(http.MethodGet, "/generate", nil)
			r.Header.Set("X-Client-Id", ids[i%keys])
			srv.ServeHTTP(httptest.NewRecorder(), r)
		}))
		srv.Close()
	}
	if req.Breaker != nil {
		if host.NewBreaker == nil {
			return nil, fmt.Errorf("no breaker in this session")
		}
		b := host.NewBreaker(*req.Breaker)
		out = append(out, timeCalls("breaker", func(int) {
			if done, err := b.Allow(); err == nil {
				done(true)
			}
		}))
	}
	if req.Limit > 0 {
		set := host.Counting
		if set == nil {
			return nil, fmt.Errorf("no limiters in this session")
		}
		ids := clientIDs(keys)
		for _, l := range []struct {
			name string
			make func() scenario.CountingLimiter
		}{
			{"fixed window", func() scenario.CountingLimiter { return set.Fixed(req.Limit, req.Window) }},
			{"sliding log", func() scenario.CountingLimiter { return set.Log(req.Limit, req.Window) }},
			{"sliding counter", func() scenario.CountingLimiter { return set.Counter(req.Limit, req.Window) }},
			{"token bucket", func() scenario.CountingLimiter {
				return set.Bucket(req.Limit, req.Window, set.DefaultBurst(req.Limit))
			}},
		} {
			lim := l.make()
			out = append(out, timeCalls(l.name, func(i int) { lim.Allow(ids[i%keys]) }))
		}
	}
	return out, nil
}

// costServer returns a server for measureCost, and what to call once it
// is closed. In mode redis its limiter uses a miniredis of its own, on the
// wall clock, dialled in memory: what is measured is the graded script's
// time in Redis and the round trip's, not a network's.
func costServer(host Host, cfg fakegpu.Config) (*fakegpu.Server, func(), error) {
	if cfg.Mode != fakegpu.ModeRedis {
		srv, err := host.NewServer(cfg)
		return srv, func() {}, err
	}
	if host.NewRedisServer == nil {
		return nil, nil, fmt.Errorf("no Redis limiter in this session")
	}
	mr, err := startMemory()
	if err != nil {
		return nil, nil, err
	}
	rdb := memoryClient(mr)
	done := func() {
		rdb.Close()
		mr.Close()
	}
	srv, err := host.NewRedisServer(cfg, rdb)
	if err != nil {
		done()
		return nil, nil, err
	}
	return srv, done, nil
}

// clientIDs names n clients.
func clientIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "client-" + strconv.Itoa(i)
	}
	return ids
}

// timeCalls measures call(0), call(1), ... as Cost describes.
func timeCalls(name string, call func(i int)) Cost {
	best := Cost{Name: name}
	n := 0
	for range costRounds {
		start := time.Now()
		calls := 0
		for calls < costCalls && (calls%16 != 0 || time.Since(start) < costRound) {
			call(n)
			n++
			calls++
		}
		per := time.Since(start) / time.Duration(calls)
		if best.Calls == 0 || per < best.PerCall {
			best.Calls, best.PerCall = calls, per
		}
	}
	return best
}
