package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"ratelab/fakegpu"
	"ratelab/internal/trees/counting"
	"ratelab/internal/trees/shedding"
	"ratelab/lab"
	"ratelab/scenario"
)

// Task 8's server mode: the fake GPU with one of the four limiters in front
// of task 2's shedding, as task 3 puts its bucket there, so that the
// grader floods it as it floods task 3's server and judges it from the
// server's own records (fakegpu.Config.Counting).

// newServer returns a fake GPU configured as cfg, in mode bucket with
// cfg.Counting naming the limiter of set that stands where task 3's bucket
// does, each key allowed cfg.CountingLimit requests per cfg.CountingWindow
// (the token bucket with a capacity of cfg.BucketBurst), and extra options
// added.
func newServer(set scenario.CountingSet, cfg fakegpu.Config, extra ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode != fakegpu.ModeBucket || cfg.Counting == "" {
		return nil, fmt.Errorf("the counting server needs mode bucket and --counting (fixed, log, counter or bucket), not mode %s", cfg.Mode)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	limit, window := cfg.CountingLimit, cfg.CountingWindow
	var lim scenario.CountingLimiter
	switch cfg.Counting {
	case "fixed":
		lim = set.Fixed(limit, window)
	case "log":
		lim = set.Log(limit, window)
	case "counter":
		lim = set.Counter(limit, window)
	case "bucket":
		lim = set.Bucket(limit, window, int(math.Floor(cfg.BucketBurst)))
	}
	opts := append([]fakegpu.Option{fakegpu.WithAdmission(shedding.Admission), fakegpu.WithLimiter(oneAtATime{lim})}, extra...)
	return fakegpu.New(cfg, opts...)
}

// oneAtATime adapts a task 8 limiter, which counts requests, to the
// server's Limiter, which takes tokens: one token is one request.
type oneAtATime struct{ lim scenario.CountingLimiter }

// TryTake asks the limiter about one request of key for n = 1; nothing is
// always there, and more than one request at once never.
func (o oneAtATime) TryTake(key string, n float64) (bool, time.Duration) {
	switch {
	case n <= 0:
		return true, 0
	case n != 1:
		return false, lab.InfDuration
	}
	return o.lim.Allow(key)
}

// serve runs the counting server for cfg on 127.0.0.1:port until ctx ends,
// printing "listening on URL" as cmd/fakegpu does, for the grader's
// wall-clock floods.
func serve(ctx context.Context, cfg fakegpu.Config, port int) error {
	srv, err := newServer(counting.Limiters(), cfg)
	if err != nil {
		return err
	}
	in, err := fakegpu.Listen(srv, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer in.Close()
	fmt.Printf("listening on %s (mode %s, counting %s, admission from %s, limiter from %s)\n", in.URL, cfg.Mode, cfg.Counting, shedding.From, counting.From)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return in.Shutdown(sctx)
}
