package grader

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/redisenv"
	"ratelab/internal/vsession"
	"ratelab/results"
)

// Task 6's floods: one client at 400/s for 10 s against four server
// workers sharing one port (Break It 1), each with its own 8 slots.
const (
	task6Workers  = 4
	task6Rate     = 400.0
	task6Duration = 10 * time.Second
)

// Tolerances of task 6, each with the reason it is as wide as it is.
const (
	// With a limiter in each process, each of the 4 workers lets the client
	// have 70/s: the lesson predicts about 280/s, 4 × 720 = 2,880 in 10 s.
	// Connections do not spread perfectly evenly, so at least 3× is asked.
	task6LeakFactor = 3.0
	// With the bucket in Redis, the 4 workers share one: burst + rate × T =
	// 720 is a hard bound, and a correct script reaches at least 95% of it.
	task6ShareMin = 0.95
	// The send lag these count-only floods tolerate (see floodWorkers).
	task6MaxSendLag = 50 * time.Millisecond
)

// Names of task 6's flood checks, as the plan and the corpus give them.
const (
	task6CheckLeak   = "Break It 1: four workers with their own limiters let about 4× through"
	task6CheckBound  = "Redis: four workers sharing one bucket stay within burst + rate × time"
	task6CheckShare  = "Redis: the shared bucket still lets the limit through"
	task6CheckTTL    = "Redis: every key the limiter wrote expires within the refill time plus 1 s"
	task6CheckKeyset = "Redis: keys do not pile up with the clients ever seen"
)

// Task 6's keyspace checks read Redis's own records after the limiter ran
// in the four workers: every key's PTTL (SCAN, then PTTL of each key),
// during the shared flood and after a burst of requests from many distinct
// clients, and how many keys are left once every bucket is full again.
const (
	// task6ExpiryMargin is how much longer than the refill time (empty to
	// full, burst/rate) a key may live: the handout allows "plus at most a
	// second"; one more millisecond absorbs PTTL's rounding.
	task6ExpiryMargin = time.Second + time.Millisecond
	// task6ClientsMin and task6ClientsMax bound how many distinct clients
	// the burst has (random between them, so no fixed count passes).
	task6ClientsMin, task6ClientsMax = 1500, 3000
	// task6IdleAfter is how long after the burst the keyspace must be
	// empty, beyond the refill time plus the margin: time for Redis to
	// notice and for the last requests to finish.
	task6IdleAfter = 250 * time.Millisecond
	// task6ScanEvery is how often the keyspace is read during the shared
	// flood.
	task6ScanEvery = 500 * time.Millisecond
	// task6CostBudget bounds one request through the fake GPU server with
	// the graded limiter on a miniredis dialled in memory, on the wall
	// clock (checkTask6Cost): the reference takes about 270 µs there on 2
	// busy cores (miniredis interprets Lua far slower than Redis), so 2 ms
	// leaves load on the machine room; a script that computes for a few
	// milliseconds more shows (wrong/task6/costly-script: about 9 ms).
	task6CostBudget = 2 * time.Millisecond
	// task6BurstConcurrency and task6BurstTimeout are how many of the
	// burst's requests are out at once, and how long each may take.
	task6BurstConcurrency = 32
	task6BurstTimeout     = 2 * time.Second
)

func task6Planned() []planned {
	return append([]planned{
		{task6CheckLeak, 1},
		{task6CheckBound, 2},
		{task6CheckShare, 1},
		{task6CheckTTL, 1},
		{task6CheckKeyset, 1},
		{task6CheckCost, 1},
	}, task6ClusterPlanned()...)
}

// task6CheckCost names task 6's wall-clock cost check (cost.go): the
// graded script's time per decision, which virtual time makes free.
const task6CheckCost = "the Redis limiter costs little time per request"

// task6CostKeys is how many clients the cost check's requests come from.
const task6CostKeys = 1000

// checkTask6Cost times requests through a server whose limiter is the
// graded one on a miniredis of its own, on the wall clock, on both clocks
// of grading: a script that computes a lot looks perfect in virtual time.
func checkTask6Cost(ctx context.Context, g *grading, cfg fakegpu.Config) error {
	cfg.Mode, cfg.Redis = fakegpu.ModeRedis, ""
	return g.checkCost(ctx, task6CheckCost, vsession.CostRequest{Server: &cfg, Keys: task6CostKeys}, task6CostBudget,
		"Redis runs one script at a time for every worker and client, so a script's time caps the whole service's decisions a second; "+
			"the budget is miniredis's, whose Lua runs several times slower than Redis's")
}

func gradeTask6(ctx context.Context, g *grading) error {
	g.clusterPointsOff()
	r, err := g.openRedis(ctx)
	if err != nil {
		return err
	}
	defer r.close()
	g.redis = r
	notReady, err := g.unit(ctx)
	if err != nil || g.opts.UnitOnly {
		return err
	}
	if notReady == "" {
		err := g.runner().prepare(ctx)
		if err == nil {
			if err := g.runner().workerFloods(ctx, r); err != nil {
				return err
			}
			return clusterTask6(ctx, g)
		}
		notReady = fmt.Sprintf("the server with %s %v", g.file(), err)
	}
	g.skipRest(notReady)
	return nil
}

// floodWorkers floods task6Workers fresh workers configured as cfg, and
// records the run with the workers' stats summed.
func (g *grading) floodWorkers(ctx context.Context, bin string, cfg fakegpu.Config, o harness.Options) (*results.Run, error) {
	w, err := StartWorkers(ctx, bin, task6Workers, 0, cfg.Args()...)
	if err != nil {
		return nil, g.learnerFault("the server", err)
	}
	defer w.Stop()
	var each []harness.StatsFunc
	for _, u := range w.StatsURLs {
		each = append(each, harness.HTTPStats(u))
	}
	o.URL = w.URL + "/generate"
	o.NewConnections = true // one client, but many connections, as from many processes
	// A new connection per request at 400/s beside four server processes
	// costs the generator on two cores: its send lag reached 6 ms here.
	// These checks count successes over 10 s against a bucket whose clock
	// is the server's, so sends up to 50 ms late change the counts by at
	// most a token or two; 50 ms is allowed instead of the usual 5 ms.
	o.MaxSendLag = task6MaxSendLag
	o.Stats = func(ctx context.Context) (results.ServerStats, error) {
		var all []results.ServerStats
		for _, f := range each {
			st, err := f(ctx)
			if err != nil {
				return results.SumWorkers(all), err
			}
			all = append(all, st)
		}
		return results.SumWorkers(all), nil
	}
	o.Progress = g.progress(o)
	g.logf("  flooding %s: %s for %s against %d workers (mode %s) ...", o.Name, o.Arrivals(), o.Duration, task6Workers, cfg.Mode)
	run, err := harness.Flood(ctx, o)
	if run != nil {
		for _, f := range each {
			if st, serr := f(ctx); serr == nil {
				run.Workers = append(run.Workers, st)
			}
		}
		run.Server = record(cfg)
		run.Server.Workers = task6Workers
		if p := w.Panics(); p != "" {
			run.Warnings = append(run.Warnings, "a worker logged: "+p)
		}
		g.doc.Runs = append(g.doc.Runs, run)
		g.logf("    sent %d, ok %d, 429 %d, 503 %d", run.Issued, run.OK, run.Counts[results.OutcomeTooMany], run.Counts[results.OutcomeUnavailable])
	}
	return run, err
}

func floodTask6(ctx context.Context, g *grading, bin string, r *judgeRedis) error {
	local := fakegpu.DefaultConfig()
	local.Mode = fakegpu.ModeBucket
	shared := local
	shared.Mode, shared.Redis = fakegpu.ModeRedis, r.url
	d := g.floodDuration(task6Duration)
	bound := task3Bound(local, d)
	// Client ids are random hex, as real ones would be: nothing in a key
	// name says it is graded. The tag is in every id of this grading, so a
	// given Redis that others use too is scanned for this grading's keys
	// only.
	tag := randomHex(6)
	localRun, err := g.floodWorkers(ctx, bin, local, harness.Options{
		Name: "4 workers, a limiter each", Rate: task6Rate, Duration: d, Header: clientHeader(tag + randomHex(4)),
	})
	if err != nil {
		return err
	}
	if err := r.flush(ctx); err != nil {
		return fmt.Errorf("empty %s before the flood: %w", r, err)
	}
	watch := g.watchRedis(ctx, r, tag)
	if g.sharedFloodStarts != nil {
		go g.sharedFloodStarts()
	}
	sharedRun, err := g.floodWorkers(ctx, bin, shared, harness.Options{
		Name: "4 workers, one bucket in Redis", Rate: task6Rate, Duration: d, Header: clientHeader(tag + randomHex(4)),
	})
	seen := watch.stop()
	if err != nil {
		return err
	}
	keys := keysOf(shared, r, tag)
	if gone, _ := r.health(ctx); gone != "" && seen.gone == "" {
		seen.gone = gone
	}
	if seen.gone == "" {
		if err := g.distinctClients(ctx, bin, shared, r, tag, &keys); err != nil {
			return err
		}
	}
	checkTask6(g, localRun, sharedRun, bound, d, seen, keys)
	return checkTask6Cost(ctx, g, shared)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = cryptorand.Read(b)
	return hex.EncodeToString(b)
}

// task6Keys is what Redis's own records said about the keys the limiter
// wrote, for the keyspace checks.
type task6Keys struct {
	on      string        // which Redis, for messages
	refill  time.Duration // a bucket's time from empty to full
	scanned string        // what was scanned: the whole keyspace or this grading's keys

	// Every PTTL read, during the shared flood and after the burst.
	reads         int      // keys read
	noExpiry      []string // keys without one (a few)
	noExpiryCount int
	longest       redisenv.KeyTTL // the longest PTTL read

	// The burst of distinct clients.
	clients    int  // distinct clients sent
	burstRan   bool // whether the burst ran
	afterBurst int  // keys right after it
	left       int  // keys once every bucket was full again
	leftKey    string
	failOpen   int64 // decisions the workers made without Redis during the burst
}

// keysOf starts the keyspace record of a grading on the wall clock.
func keysOf(cfg fakegpu.Config, r *judgeRedis, tag string) task6Keys {
	scanned := "the whole keyspace"
	if r.kind == results.RedisGiven {
		scanned = fmt.Sprintf("the keys with this grading's client tag %q (a server others may use too)", tag)
	}
	return newTask6Keys(cfg, r.String(), scanned)
}

// newTask6Keys starts a keyspace record of the Redis named on, of which
// scanned was read, for limiters configured as cfg.
func newTask6Keys(cfg fakegpu.Config, on, scanned string) task6Keys {
	return task6Keys{on: on, refill: time.Duration(cfg.BucketBurst / cfg.BucketRate * float64(time.Second)), scanned: scanned}
}

// note adds the PTTLs of one read of the keyspace.
func (k *task6Keys) note(keys []redisenv.KeyTTL) {
	for _, kt := range keys {
		k.reads++
		switch {
		case kt.PTTL < 0:
			k.noExpiryCount++
			if len(k.noExpiry) < 3 && !slices.Contains(k.noExpiry, kt.Key) {
				k.noExpiry = append(k.noExpiry, kt.Key)
			}
		case kt.PTTL > k.longest.PTTL:
			k.longest = kt
		}
	}
}

// pattern is what SCAN matches on r: every key of a Redis that belongs to
// the grading, this grading's keys on a given one.
func pattern(r *judgeRedis, tag string) string {
	if r.kind == results.RedisGiven {
		return "*" + tag + "*"
	}
	return "*"
}

// redisWatch reads Redis's records while a flood runs: PING, and the
// keyspace with every key's PTTL, every task6ScanEvery.
type redisWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	seen   redisSeen
}

// redisSeen is what a redisWatch saw.
type redisSeen struct {
	gone      string // Redis stopped answering: what happened
	slowPings int    // PINGs not answered within redisenv.Timeout
	lastSlow  string
	keys      []redisenv.KeyTTL // every PTTL read (for task6Keys.note)
}

// watchRedis starts watching r until stop is called.
func (g *grading) watchRedis(ctx context.Context, r *judgeRedis, tag string) *redisWatch {
	wctx, cancel := context.WithCancel(ctx)
	w := &redisWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(task6ScanEvery)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			gone, slow := r.health(wctx)
			switch {
			case gone != "":
				if w.seen.gone == "" {
					w.seen.gone = gone
				}
				continue
			case slow != nil:
				w.seen.slowPings++
				w.seen.lastSlow = slow.Error()
				continue
			}
			pctx, pcancel := context.WithTimeout(wctx, 2*time.Second)
			keys, err := r.keyspace(pctx, pattern(r, tag), 10000)
			pcancel()
			if err == nil {
				w.seen.keys = append(w.seen.keys, keys...)
			}
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *redisWatch) stop() redisSeen {
	w.cancel()
	<-w.done
	return w.seen
}

// distinctClients sends one request from each of many distinct clients to
// four fresh workers in mode redis (each request runs the limiter once, on
// a key of its own), then reads the keyspace at once and again when every
// bucket is full again, into keys.
func (g *grading) distinctClients(ctx context.Context, bin string, cfg fakegpu.Config, r *judgeRedis, tag string, keys *task6Keys) error {
	// The same limiter, on a server whose work is short, so that the
	// burst takes a second or two rather than the minutes 8 slots of
	// 100 ms would need.
	cfg.Work = time.Millisecond
	n := task6ClientsMin + g.draw("task6 distinct clients").IntN(task6ClientsMax-task6ClientsMin+1)
	keys.clients = n
	w, err := StartWorkers(ctx, bin, task6Workers, 0, cfg.Args()...)
	if err != nil {
		return g.learnerFault("the server", err)
	}
	defer w.Stop()
	g.logf("  %d requests from %d distinct clients, then Redis's keyspace ...", n, n)
	if err := harness.Burst(ctx, harness.BurstOptions{URL: w.URL + "/generate", IDs: task6ClientIDs(tag, n), Concurrency: task6BurstConcurrency, Timeout: task6BurstTimeout}); err != nil {
		return err
	}
	for _, u := range w.StatsURLs {
		if st, err := harness.HTTPStats(u)(ctx); err == nil {
			keys.failOpen += st.FailOpen
		}
	}
	now, err := r.keyspace(ctx, pattern(r, tag), task6ClientsMax*4)
	if err != nil {
		return fmt.Errorf("read %s after the burst: %w", r, err)
	}
	keys.burstRan = true
	keys.afterBurst = len(now)
	keys.note(now)
	if err := r.idle(ctx, keys.refill+task6ExpiryMargin+task6IdleAfter); err != nil {
		return err
	}
	later, err := r.keyspace(ctx, pattern(r, tag), task6ClientsMax*4)
	if err != nil {
		return fmt.Errorf("read %s after the burst: %w", r, err)
	}
	keys.left = len(later)
	if len(later) > 0 {
		keys.leftKey = later[0].Key
	}
	return nil
}

// checkTask6 judges the workers with a limiter each (local) and with one
// bucket in Redis (shared) against the bound of one bucket over d, and
// Redis's keyspace as it was seen during and after the floods.
func checkTask6(g *grading, local, shared *results.Run, bound float64, d time.Duration, seen redisSeen, keys task6Keys) {
	keys.note(seen.keys)
	switch n := shared.ServerFinal.FailOpen; {
	case seen.gone != "":
		// Not the learner's doing: the server it was given went away.
		shared.Reliable = false
		shared.Warnings = append(shared.Warnings, seen.gone+": the shared bound cannot be judged without it; this is not your code")
	case n > 0 && shared.IsVirtual():
		// Redis answers every call at once in virtual time: the limiter
		// failed open because the script failed, or answered what the
		// limiter could not read. The counts are the learner's.
		shared.Warnings = append(shared.Warnings, fmt.Sprintf("the limiter failed open %d times in virtual time, where %s answers every call at once: the script returned an error or a reply the limiter could not read, and each worker answered from its own local bucket", n, keys.on))
	case n > 0:
		// The bound holds only while Redis decides; a limiter that failed
		// open answered from each worker's local bucket, by design.
		shared.Reliable = false
		why := fmt.Sprintf("%s answered every PING of the grader within %v, so the workers' calls most likely timed out on a busy machine", keys.on, redisenv.Timeout)
		if seen.slowPings > 0 {
			why = fmt.Sprintf("%s did not answer the grader in time %d times (%s): a busy machine, or a script that runs long and blocks Redis for everyone", keys.on, seen.slowPings, seen.lastSlow)
		}
		shared.Warnings = append(shared.Warnings, fmt.Sprintf("the limiter failed open %d times (Redis did not answer a worker within its timeout): the shared bound does not apply to this run; %s", n, why))
	}
	// The bound, unless the grading predicted the exact count (in
	// virtual time, where it is exact: floodTask6Virtual).
	if local.Predicted == nil {
		local.Predicted = map[string]float64{"ok": task6Workers * bound}
	}
	if shared.Predicted == nil {
		shared.Predicted = map[string]float64{"ok": bound}
	}
	g.check(results.Check{
		Name: task6CheckLeak, MaxScore: 1,
		Message: fmt.Sprintf("%d succeeded (%.0f/s) against a limit of %.0f in %.0f s; want ≥ %.0f× that: each process keeps its own bucket, so the limit multiplies by the workers",
			local.OK, local.GoodputRPS, bound, d.Seconds(), task6LeakFactor),
		Measured: map[string]float64{"ok": float64(local.OK)}, Expected: map[string]float64{"ok_min": task6LeakFactor * bound},
	}, float64(local.OK) >= task6LeakFactor*bound, local)
	g.check(results.Check{
		Name: task6CheckBound, MaxScore: 2,
		Message:  fmt.Sprintf("%d succeeded across the 4 workers; want ≤ %.0f = 20 + 70 × %.0f, a hard bound: the script's read, refill, decision and write are one atomic step in Redis (%s)", shared.OK, bound, d.Seconds(), keys.on),
		Measured: map[string]float64{"ok": float64(shared.OK)}, Expected: map[string]float64{"ok_max": bound},
	}, float64(shared.OK) <= bound, shared)
	g.check(results.Check{
		Name: task6CheckShare, MaxScore: 1,
		Message:  fmt.Sprintf("%d succeeded; want ≥ %.0f (%.0f%% of the bound): a script that refills too slowly or never refills would starve the client", shared.OK, task6ShareMin*bound, 100*task6ShareMin),
		Measured: map[string]float64{"ok": float64(shared.OK)}, Expected: map[string]float64{"ok_min": task6ShareMin * bound},
	}, float64(shared.OK) >= task6ShareMin*bound, shared)
	checkTask6Keys(g, shared, keys)
}

// checkTask6Keys judges Redis's keyspace: every key has an expiry of at
// most the refill time plus the margin, and once every bucket is full
// again none is left, however many clients came.
func checkTask6Keys(g *grading, shared *results.Run, k task6Keys) {
	most := k.refill + task6ExpiryMargin
	var msg string
	pass := k.noExpiryCount == 0 && k.longest.PTTL <= most
	switch {
	case k.reads == 0:
		msg = fmt.Sprintf("no key was found in %s of %s during the shared flood or after the burst of %d clients; want one per client with an expiry: the buckets must live in Redis",
			k.scanned, k.on, k.clients)
		pass = false
	case k.noExpiryCount > 0:
		msg = fmt.Sprintf("%d of the %d keys read in %s of %s had no expiry, such as %q; want every key the limiter writes to expire within the refill time (%v) plus at most 1 s: "+
			"a key without one stays in Redis for ever, one per client ever seen", k.noExpiryCount, k.reads, k.scanned, k.on, k.noExpiry, k.refill.Round(time.Millisecond))
	case !pass:
		msg = fmt.Sprintf("key %q had %v left to live in %s; want at most %v, the refill time (burst/rate = %v) plus 1 s: an expiry longer than that keeps idle clients' keys in memory",
			k.longest.Key, k.longest.PTTL, k.on, most.Round(time.Millisecond), k.refill.Round(time.Millisecond))
	default:
		msg = fmt.Sprintf("all %d keys read in %s of %s (every %v during the shared flood, and after the burst) expired within %v (longest %v)",
			k.reads, k.scanned, k.on, task6ScanEvery, most.Round(time.Millisecond), k.longest.PTTL)
	}
	g.check(results.Check{
		Name: task6CheckTTL, MaxScore: 1, Message: msg,
		Measured: map[string]float64{"keys_read": float64(k.reads), "no_expiry": float64(k.noExpiryCount), "longest_pttl_ms": float64(k.longest.PTTL.Milliseconds())},
		Expected: map[string]float64{"no_expiry": 0, "pttl_max_ms": float64(most.Milliseconds())},
	}, pass, shared)

	wait := k.refill + task6ExpiryMargin + task6IdleAfter
	switch {
	case !k.burstRan:
		msg = "not run: the burst of distinct clients did not run"
		pass = false
	case k.left > 0:
		msg = fmt.Sprintf("after %d requests from %d distinct clients, %s held %d keys; %v later, when every bucket was full again, %d were still there, such as %q; want 0: "+
			"a full bucket needs no key, so each must expire once refilled, or Redis grows with every client ever seen",
			k.clients, k.clients, k.on, k.afterBurst, wait.Round(time.Millisecond), k.left, k.leftKey)
		pass = false
	default:
		msg = fmt.Sprintf("after %d requests from %d distinct clients, %s held %d keys, and none %v later, when every bucket was full again",
			k.clients, k.clients, k.on, k.afterBurst, wait.Round(time.Millisecond))
		pass = true
	}
	if k.failOpen > 0 && pass {
		msg += fmt.Sprintf(" (the workers decided %d of them without Redis: it did not answer in time)", k.failOpen)
	}
	g.check(results.Check{
		Name: task6CheckKeyset, MaxScore: 1, Message: msg,
		Measured: map[string]float64{"clients": float64(k.clients), "keys_after_burst": float64(k.afterBurst), "keys_left": float64(k.left)},
		Expected: map[string]float64{"keys_left": 0},
	}, pass, shared)
}
