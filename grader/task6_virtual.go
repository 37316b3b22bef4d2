package grader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/redisenv"
	"ratelab/internal/vsession"
	"ratelab/model"
	"ratelab/results"
)

// Task 6 in virtual time (the default, unless --redis URL or --real): the
// four workers, the Redis they share and the floods all run in the
// grading's session (cmd/fakegpu, vsession's OpStart with Workers). The
// Redis is a miniredis in the bubble whose TTLs and TIME follow the
// bubble's clock; each worker has its own client, dialled in memory, and
// the session's listener hands the workers connections in turn. The
// floods, the reads of Redis's keyspace (SCAN and PTTL, every
// task6ScanEvery of virtual time during the shared flood, after the burst
// and once every bucket is full again) and the checks are the wall
// clock's. Grading against a given Redis stays on the wall clock: a real
// server keeps real time.

// task6SessionRedis names the Redis of a virtual-time grading in messages.
const task6SessionRedis = "the virtual-time session's miniredis, on the bubble's clock"

// givenRedis reports whether url names a Redis to judge task 6 by (--redis
// URL), which then judges it on the wall clock.
func givenRedis(url string) bool {
	return url != "" && url != RedisOff
}

// floodTask6Virtual is floodTask6 in virtual time.
func floodTask6Virtual(ctx context.Context, g *grading) error {
	s, err := g.vsession(ctx)
	if err != nil {
		return err
	}
	local := fakegpu.DefaultConfig()
	local.Mode = fakegpu.ModeBucket
	shared := local
	shared.Mode = fakegpu.ModeRedis // on the session's Redis
	d := g.floodDuration(task6Duration)
	bound := task3Bound(local, d)
	tag := randomHex(6)
	localRun, _, err := g.floodWorkersVirtual(ctx, s, local, 0, harness.Options{
		Name: "4 workers, a limiter each", Rate: task6Rate, Duration: d, Header: clientHeader(tag + randomHex(4)),
	})
	if err != nil {
		return err
	}
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpFlush}); err != nil {
		return fmt.Errorf("empty %s before the flood: %w", task6SessionRedis, err)
	}
	if g.sharedFloodStarts != nil {
		go g.sharedFloodStarts()
	}
	sharedRun, seen, err := g.floodWorkersVirtual(ctx, s, shared, task6ScanEvery, harness.Options{
		Name: "4 workers, one bucket in Redis", Rate: task6Rate, Duration: d, Header: clientHeader(tag + randomHex(4)),
	})
	if err != nil {
		return err
	}
	// In virtual time the counts are exact: each worker's bucket admits
	// what a token bucket admits of every fourth send (round robin), the
	// shared one what it admits of them all (model.BucketAdmits on the
	// flood's schedule).
	localRun.Predicted = map[string]float64{"ok": float64(task6Admits(local, d, task6Workers)), "ok_bound": task6Workers * bound}
	sharedRun.Predicted = map[string]float64{"ok": float64(task6Admits(local, d, 1)), "ok_bound": bound}
	keys := newTask6Keys(shared, task6SessionRedis, "the whole keyspace")
	if err := g.distinctClientsVirtual(ctx, s, shared, tag, &keys); err != nil {
		return err
	}
	checkTask6(g, localRun, sharedRun, bound, d, redisSeen{keys: seen}, keys)
	return checkTask6Cost(ctx, g, shared)
}

// floodWorkersVirtual is floodWorkers in the session: task6Workers fresh
// workers configured as cfg behind one listener, flooded with o, the
// keyspace read every scanEvery meanwhile (not if 0); the run records the
// workers' stats summed, and each one's.
func (g *grading) floodWorkersVirtual(ctx context.Context, s *session, cfg fakegpu.Config, scanEvery time.Duration, o harness.Options) (*results.Run, []redisenv.KeyTTL, error) {
	fault := func(err error) error { return g.learnerFault("the server in virtual time", err) }
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpStart, Config: &cfg, Workers: task6Workers, NotBefore: time.Now()}); err != nil {
		return nil, nil, fault(err)
	}
	o.NewConnections = true // one client, but many connections, as from many processes
	o.MaxSendLag = task6MaxSendLag
	g.logf("  flooding %s in virtual time: %s for %s against %d workers (mode %s) ...", o.Name, o.Arrivals(), o.Duration, task6Workers, cfg.Mode)
	rep, err := s.call(ctx, vsession.Request{Op: vsession.OpFlood, Floods: []harness.Options{o}, ScanEvery: scanEvery})
	if err != nil {
		return nil, nil, fault(err)
	}
	fin, err := s.call(ctx, vsession.Request{Op: vsession.OpFinish})
	if err != nil {
		return nil, nil, fault(err)
	}
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpStop}); err != nil {
		return nil, nil, fault(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0] == nil || fin.Final == nil {
		return nil, nil, errors.New("the virtual-time session answered without a run")
	}
	run := rep.Runs[0]
	run.Server = record(cfg)
	run.Server.Workers = task6Workers
	run.ServerFinal, run.Workers = *fin.Final, fin.Workers
	if p := panicServing(s.output.String()); p != "" {
		run.Warnings = append(run.Warnings, "a worker logged: "+p)
	}
	g.doc.Runs = append(g.doc.Runs, run)
	g.logf("    sent %d, ok %d, 429 %d, 503 %d (virtual time)", run.Issued, run.OK, run.Counts[results.OutcomeTooMany], run.Counts[results.OutcomeUnavailable])
	return run, rep.Keys, nil
}

// distinctClientsVirtual is distinctClients in the session: one request
// from each of many distinct clients to four fresh workers in mode redis,
// then the keyspace at once and once every bucket is full again, in
// virtual time.
func (g *grading) distinctClientsVirtual(ctx context.Context, s *session, cfg fakegpu.Config, tag string, keys *task6Keys) error {
	fault := func(err error) error { return g.learnerFault("the server in virtual time", err) }
	cfg.Work = time.Millisecond // as distinctClients
	n := task6ClientsMin + g.draw("task6 distinct clients").IntN(task6ClientsMax-task6ClientsMin+1)
	keys.clients = n
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpStart, Config: &cfg, Workers: task6Workers}); err != nil {
		return fault(err)
	}
	g.logf("  %d requests from %d distinct clients, then Redis's keyspace (virtual time) ...", n, n)
	burst := harness.BurstOptions{IDs: task6ClientIDs(tag, n), Concurrency: task6BurstConcurrency, Timeout: task6BurstTimeout}
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpBurst, Burst: &burst}); err != nil {
		return fault(err)
	}
	fin, err := s.call(ctx, vsession.Request{Op: vsession.OpFinish})
	if err != nil {
		return fault(err)
	}
	if fin.Final == nil {
		return errors.New("the virtual-time session answered the burst without the workers' stats")
	}
	keys.failOpen = fin.Final.FailOpen
	now, err := s.call(ctx, vsession.Request{Op: vsession.OpKeyspace})
	if err != nil {
		return fmt.Errorf("read %s after the burst: %w", task6SessionRedis, err)
	}
	keys.burstRan = true
	keys.afterBurst = len(now.Keys)
	keys.note(now.Keys)
	later, err := s.call(ctx, vsession.Request{Op: vsession.OpKeyspace, Wait: keys.refill + task6ExpiryMargin + task6IdleAfter})
	if err != nil {
		return fmt.Errorf("read %s after the burst: %w", task6SessionRedis, err)
	}
	keys.left = len(later.Keys)
	if len(later.Keys) > 0 {
		keys.leftKey = later.Keys[0].Key
	}
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpStop}); err != nil {
		return fault(err)
	}
	return nil
}

// task6Admits is how many of a task 6 flood's sends over d buckets
// configured as cfg admit in all when the sends are dealt round robin to
// workers buckets of their own.
func task6Admits(cfg fakegpu.Config, d time.Duration, workers int) int {
	sends := make([][]time.Duration, workers)
	for k := range uint64(task6Rate * d.Seconds()) {
		w := int(k) % workers
		sends[w] = append(sends[w], harness.Intended(task6Rate, k))
	}
	n := 0
	for _, at := range sends {
		n += model.BucketAdmits(at, cfg.BucketRate, cfg.BucketBurst)
	}
	return n
}

// task6ClientIDs names the burst's n distinct clients, each with the
// grading's tag.
func task6ClientIDs(tag string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%x", tag, i)
	}
	return ids
}
