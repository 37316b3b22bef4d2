package grader

import (
	"context"
	"fmt"
	"math"
	"time"

	"ratelab/results"
)

// Task 8's measurements run in a child program, cmd/counting, with the
// graded tree's four limiters compiled in, on the real clock, with the sizes
// of scenario.CountingOptions' defaults: the boundary burst at 100 per 2 s,
// the synchronised return of 100 clients at 10 per second in bins of
// window/limit = 100 ms, memory at 100 and 10,000 per minute, and the
// disagreement on a seeded trace of 100 clients near 10 per 500 ms.
const (
	// task8MeasureLimit bounds the child: about 15 s of measuring, a
	// compile, and room for a busy machine.
	task8MeasureLimit = 2 * time.Minute

	// The synchronised return, as peak bin over mean bin. With bins of
	// window/limit there are limit = 10 bins a window. A fixed window
	// gets every client's return in the window's first bin: 10. The
	// others spread them: 1 for the log and the bucket (clients start
	// evenly over a window, and each comes back on its own schedule),
	// 10/9 for the counter (its last bin of each window is empty). The
	// bounds sit halfway, in ratio, between the two, so that neither a
	// return delayed into the next bin by a busy machine nor a few clients
	// drifting together changes a verdict.
	task8FixedPeakMin  = 5.0
	task8SmoothPeakMax = 2.5
	// Retries that woke up this late (p99) may have slipped a quarter of
	// a bin or more: the bins no longer say when the limiter let the
	// clients back. Lateness cannot make a fixed window's returns spread
	// out nor the others' come together, so it spoils only a failure: a
	// check that fails with retries this late is not judged. (A hundred
	// clients woken at one instant on two busy cores are 30 ms late at
	// the p99 without the bins changing.)
	task8LateMaxMS = 25.0

	// Memory per client. A log keeps one timestamp per counted request,
	// so from 100 to 10,000 per minute its bytes per client grow about a
	// hundredfold; it must grow at least tenfold, which leaves room for a
	// per-client overhead of the size of the 100 timestamps themselves.
	task8LogGrowthMin = 10.0
	// Counts cost the same at any limit: at 10,000 per minute the fixed
	// window, counter and bucket may keep at most twice their bytes per
	// client at 100, plus 64 B (the two measurements hold 1,000 and 200
	// clients, so the maps' load differs), where a log of requests would
	// keep 80 kB more.
	task8CountsGrowthFactor = 2.0
	task8CountsGrowthSlack  = 64.0

	// The counter's disagreement with the log: the definitions themselves
	// disagree on a share of this trace (the counter assumes the previous
	// window was spread evenly, and it was not); the learner's pair may
	// exceed that by half a percentage point, for requests within
	// microseconds of a count's expiry, where the two calls and the
	// model read the clock a little apart.
	task8DisagreeSlack = 0.005
)

// The names of task 8's checks.
const (
	task8CheckFixedBoundary   = "boundary: the fixed window admits 2 × limit across its boundary"
	task8CheckLogBoundary     = "boundary: the sliding log admits exactly limit"
	task8CheckCounterBoundary = "boundary: the sliding counter stays within limit + ⌊prev × e/window⌋"
	task8CheckBucketBoundary  = "boundary: the token bucket admits at most burst + rate × elapsed"
	task8CheckFixedReturn     = "synchronised return: a fixed window's clients come back together"
	task8CheckSmoothReturn    = "synchronised return: the log, counter and bucket spread their clients out"
	task8CheckLogMemory       = "memory: the sliding log's bytes per client grow with the limit"
	task8CheckCountsMemory    = "memory: the fixed window, counter and bucket keep counts, not requests"
	task8CheckDisagreement    = "disagreement: the counter's decisions differ from the log's no more than the definitions'"
)

// task8Planned lists task 8's measured checks: the boundary burst, the
// synchronised return, memory per client and the counter's disagreement
// with the log, measured by cmd/counting, then the floods of the server
// with each limiter in front of shedding (task8_server.go).
func task8Planned() []planned {
	return append([]planned{
		{task8CheckFixedBoundary, 1},
		{task8CheckLogBoundary, 1},
		{task8CheckCounterBoundary, 1},
		{task8CheckBucketBoundary, 1},
		{task8CheckFixedReturn, 1},
		{task8CheckSmoothReturn, 1},
		{task8CheckLogMemory, 1},
		{task8CheckCountsMemory, 1},
		{task8CheckDisagreement, 1},
	}, task8ServerPlanned()...)
}

// gradeTask8 grades the four ways of counting requests per window: their
// unit suite, then the measurements of cmd/counting, then the floods of the
// server with each in front of shedding.
func gradeTask8(ctx context.Context, g *grading) error {
	notReady, err := g.unit(ctx)
	if err != nil || g.opts.UnitOnly {
		return err
	}
	if notReady == "" {
		bin, err := g.countingBinary(ctx)
		if err == nil {
			return measureTask8(ctx, g, bin)
		}
		notReady = fmt.Sprintf("the measurements with %s %v", g.file(), err)
	}
	g.skipRest(notReady)
	return nil
}

// countingBinary builds cmd/counting with the graded tree's limiters.
func (g *grading) countingBinary(ctx context.Context) (string, error) {
	overlay, err := writeOverlay(g.tmp, g.opts.Root, g.opts.Replace)
	if err != nil {
		return "", err
	}
	var tags []string
	if g.opts.Impl == Exercises {
		tags = []string{"ratelab_ex_counting"}
	}
	return buildCmd(ctx, g.opts.Root, g.tmp, "counting", referenceTags(g.opts.Root, tags), overlay)
}

func measureTask8(ctx context.Context, g *grading, bin string) error {
	c, err := g.runner().counting(ctx, bin)
	if err != nil {
		return err
	}
	g.doc.Counting = append(g.doc.Counting, c)
	for _, b := range c.Boundary {
		g.logf("    boundary, %s: %d + %d admitted of %d", b.Limiter, b.AdmittedBefore, b.AdmittedAfter, b.Sent)
	}
	for _, r := range c.Return {
		g.logf("    return, %s: peak/mean %.2f", r.Limiter, r.PeakOverMean)
	}
	for _, m := range c.Memory {
		g.logf("    memory, %s at %d/min: %.0f B per client", m.Limiter, m.Limit, m.BytesPerClient)
	}
	if d := c.Disagreement; d != nil {
		g.logf("    disagreement: %.2f%% of %d (definitions: %.2f%%)", 100*d.Share(), d.Requests, 100*d.ModelShare())
	}
	for _, w := range c.Warnings {
		g.logf("    warning: %s", w)
	}
	checkTask8(g, c)
	return floodTask8Server(ctx, g, bin, c)
}

// checkTimed records a check measured on the real clock: not judged, an
// error, when unreliable says why the machine's timing spoilt it.
func (g *grading) checkTimed(c results.Check, pass bool, unreliable string) {
	if unreliable == "" {
		g.check(c, pass, nil)
		return
	}
	c.Task, c.Status, c.Score = g.task.ID, results.StatusError, 0
	c.Message = "not judged: " + unreliable + "; " + c.Message
	g.record(c)
}

func boundaryOf(c *results.Counting, limiter string) *results.CountingBoundary {
	for i := range c.Boundary {
		if c.Boundary[i].Limiter == limiter {
			return &c.Boundary[i]
		}
	}
	return nil
}

func returnOf(c *results.Counting, limiter string) *results.CountingReturn {
	for i := range c.Return {
		if c.Return[i].Limiter == limiter {
			return &c.Return[i]
		}
	}
	return nil
}

func memoryOf(c *results.Counting, limiter string, limit int) *results.CountingMemory {
	for i := range c.Memory {
		if c.Memory[i].Limiter == limiter && c.Memory[i].Limit == limit {
			return &c.Memory[i]
		}
	}
	return nil
}

// checkTask8 judges task 8's measurements, each against its limiter's own
// bound.
func checkTask8(g *grading, c *results.Counting) {
	checkTask8Boundary(g, c)
	checkTask8Return(g, c)
	checkTask8Memory(g, c)
	checkTask8Disagreement(g, c)
}

// boundaryBounds returns the least and the most b's limiter may admit in
// the boundary burst, with the reason.
func boundaryBounds(b *results.CountingBoundary) (lo, hi int, why string) {
	L := b.Limit
	switch b.Limiter {
	case results.LimiterFixed:
		return 2 * L, 2 * L, fmt.Sprintf("the first %d fall in the window that ends at the boundary and the next %d in the one that starts there (windows aligned on the Unix epoch), and each counts alone", L, L)
	case results.LimiterLog:
		return L, L, fmt.Sprintf("a fresh client's first %d count for a whole window (%.0f ms), far longer than the %.0f ms the burst took, so the second half is refused", L, b.WindowMS, b.LastEndMS-b.FirstStartMS)
	case results.LimiterCounter:
		extra := int(math.Floor(float64(L) * b.LastEndMS / b.WindowMS))
		return L, L + extra, fmt.Sprintf("its doc comment's bound limit + ⌊prev × e/window⌋ with prev = %d and e ≤ %.1f ms, the end of the last call after the boundary; at least the fresh client's first %d", L, b.LastEndMS, L)
	case results.LimiterBucket:
		gained := int(math.Floor(float64(L) * (b.LastEndMS - b.FirstStartMS) / b.WindowMS))
		return b.Burst, b.Burst + gained, fmt.Sprintf("burst %d (DefaultBurst(%d)), full for a fresh client, plus %d per %.0f ms over the %.1f ms from the first call to the end of the last", b.Burst, L, L, b.WindowMS, b.LastEndMS-b.FirstStartMS)
	}
	return 0, 0, "unknown limiter"
}

func checkTask8Boundary(g *grading, c *results.Counting) {
	for _, x := range []struct{ name, limiter string }{
		{task8CheckFixedBoundary, results.LimiterFixed},
		{task8CheckLogBoundary, results.LimiterLog},
		{task8CheckCounterBoundary, results.LimiterCounter},
		{task8CheckBucketBoundary, results.LimiterBucket},
	} {
		chk := results.Check{Name: x.name, MaxScore: 1}
		b := boundaryOf(c, x.limiter)
		if b == nil {
			chk.Message = "the " + x.limiter + " was not measured"
			g.checkTimed(chk, false, "the measurement is missing (a grader bug)")
			continue
		}
		lo, hi, why := boundaryBounds(b)
		n := b.Admitted()
		want := fmt.Sprintf("between %d and %d", lo, hi)
		if lo == hi {
			want = fmt.Sprint(lo)
		}
		chk.Message = fmt.Sprintf("%d requests %.1f ms before a window boundary and %d at %.1f ms after it: the %s admitted %d + %d = %d; want %s: %s",
			b.Limit, -b.FirstStartMS, b.Limit, b.AfterStartMS, b.Limiter, b.AdmittedBefore, b.AdmittedAfter, n, want, why)
		chk.Measured = map[string]float64{"admitted": float64(n), "admitted_before": float64(b.AdmittedBefore), "admitted_after": float64(b.AdmittedAfter), "span_ms": b.LastEndMS - b.FirstStartMS}
		chk.Expected = map[string]float64{"admitted_min": float64(lo), "admitted_max": float64(hi)}
		unreliable := ""
		if b.Straddled() {
			unreliable = fmt.Sprintf("a batch ran across the boundary (the first ended %.1f ms from it, the second began %.1f ms from it), so which window each request fell in is not known; the machine is busy", b.BeforeEndMS, b.AfterStartMS)
		}
		g.checkTimed(chk, n >= lo && n <= hi, unreliable)
	}
}

// failLate says why a failed verdict on the synchronised return's bins
// cannot be trusted, or "": a pass stands however late the retries were.
func failLate(pass bool, r *results.CountingReturn) string {
	if !pass && r.LateP99MS > task8LateMaxMS {
		return fmt.Sprintf("the clients' retries woke up %.1f ms late (p99), more than %.0f ms, a quarter of a bin; the machine is busy", r.LateP99MS, task8LateMaxMS)
	}
	return ""
}

func checkTask8Return(g *grading, c *results.Counting) {
	chk := results.Check{Name: task8CheckFixedReturn, MaxScore: 1}
	f := returnOf(c, results.LimiterFixed)
	if f == nil {
		chk.Message = "the fixed window was not measured"
		g.checkTimed(chk, false, "the measurement is missing (a grader bug)")
	} else {
		bins := float64(f.Limit)
		chk.Message = fmt.Sprintf("%d clients over their limit of %d per %.0f ms, retrying when told: the fixed window's fullest %.0f ms bin held %.2f × the mean; want ≥ %.1f: every window's counts restart at its start, so every refused client is told to come back then, and all %d returns of a window land in its first bin (%.0f × the mean), less what a busy machine delays into the next",
			f.Clients, f.Limit, f.WindowMS, f.BinMS, f.PeakOverMean, task8FixedPeakMin, f.Clients*f.Limit, bins)
		chk.Measured = map[string]float64{"peak_over_mean": f.PeakOverMean, "late_p99_ms": f.LateP99MS}
		chk.Expected = map[string]float64{"peak_over_mean_min": task8FixedPeakMin, "model": bins}
		pass := f.PeakOverMean >= task8FixedPeakMin
		g.checkTimed(chk, pass, failLate(pass, f))
	}

	chk = results.Check{Name: task8CheckSmoothReturn, MaxScore: 1, Measured: map[string]float64{}, Expected: map[string]float64{"peak_over_mean_max": task8SmoothPeakMax}}
	pass, missing, late := true, "", ""
	var parts string
	for _, lim := range []string{results.LimiterLog, results.LimiterCounter, results.LimiterBucket} {
		r := returnOf(c, lim)
		if r == nil {
			missing = lim
			continue
		}
		late = max(late, failLate(false, r))
		chk.Measured["peak_over_mean_"+keyOf(lim)] = r.PeakOverMean
		if parts != "" {
			parts += ", "
		}
		parts += fmt.Sprintf("%s %.2f", lim, r.PeakOverMean)
		if r.PeakOverMean > task8SmoothPeakMax {
			pass = false
		}
	}
	chk.Message = fmt.Sprintf("the same clients, fullest bin over the mean: %s; want each ≤ %.1f: a log lets a client back when its own oldest request expires, a counter as the previous window's weight falls, a bucket one token at a time, so with clients starting evenly over a window the returns stay spread (1 for the log and bucket, 10/9 for the counter)",
		parts, task8SmoothPeakMax)
	if missing != "" {
		g.checkTimed(chk, false, "the "+missing+" was not measured (a grader bug)")
		return
	}
	if pass {
		late = ""
	}
	g.checkTimed(chk, pass, late)
}

// keyOf makes a limiter's name a key of Measured.
func keyOf(limiter string) string {
	switch limiter {
	case results.LimiterFixed:
		return "fixed"
	case results.LimiterLog:
		return "log"
	case results.LimiterCounter:
		return "counter"
	case results.LimiterBucket:
		return "bucket"
	}
	return limiter
}

// The two limits of the memory measurement, per minute.
const (
	task8MemLow  = 100
	task8MemHigh = 10_000
)

func checkTask8Memory(g *grading, c *results.Counting) {
	chk := results.Check{Name: task8CheckLogMemory, MaxScore: 1}
	lo, hi := memoryOf(c, results.LimiterLog, task8MemLow), memoryOf(c, results.LimiterLog, task8MemHigh)
	if lo == nil || hi == nil {
		chk.Message = "the sliding log was not measured at both limits"
		g.checkTimed(chk, false, "the measurement is missing (a grader bug)")
	} else {
		growth := hi.BytesPerClient / max(lo.BytesPerClient, 1)
		chk.Message = fmt.Sprintf("the sliding log kept %.0f B per client at %d per minute (%d clients) and %.0f B at %d (%d clients): %.1f times as much; want ≥ %.0f times: it keeps a timestamp per counted request, so its memory follows the limit (%d times larger), less a per-client overhead",
			lo.BytesPerClient, lo.Limit, lo.Clients, hi.BytesPerClient, hi.Limit, hi.Clients, growth, task8LogGrowthMin, task8MemHigh/task8MemLow)
		chk.Measured = map[string]float64{"bytes_per_client_low": lo.BytesPerClient, "bytes_per_client_high": hi.BytesPerClient, "growth": growth}
		chk.Expected = map[string]float64{"growth_min": task8LogGrowthMin}
		g.checkTimed(chk, growth >= task8LogGrowthMin, "")
	}

	chk = results.Check{Name: task8CheckCountsMemory, MaxScore: 1, Measured: map[string]float64{}, Expected: map[string]float64{"growth_factor_max": task8CountsGrowthFactor, "slack_bytes": task8CountsGrowthSlack}}
	pass, parts := true, ""
	for _, lim := range []string{results.LimiterFixed, results.LimiterCounter, results.LimiterBucket} {
		lo, hi := memoryOf(c, lim, task8MemLow), memoryOf(c, lim, task8MemHigh)
		if lo == nil || hi == nil {
			chk.Message = "the " + lim + " was not measured at both limits"
			g.checkTimed(chk, false, "the measurement is missing (a grader bug)")
			return
		}
		k := keyOf(lim)
		chk.Measured["bytes_per_client_low_"+k], chk.Measured["bytes_per_client_high_"+k] = lo.BytesPerClient, hi.BytesPerClient
		if parts != "" {
			parts += ", "
		}
		parts += fmt.Sprintf("%s %.0f B and %.0f B", lim, lo.BytesPerClient, hi.BytesPerClient)
		if hi.BytesPerClient > task8CountsGrowthFactor*max(lo.BytesPerClient, 0)+task8CountsGrowthSlack {
			pass = false
		}
	}
	chk.Message = fmt.Sprintf("bytes per client at %d and %d per minute: %s; want at %d at most %.0f × the figure at %d + %.0f B: a count costs the same whatever the limit (the slack covers the maps' load, with 1,000 and 200 clients), where keeping each request would cost 8 B × %d more",
		task8MemLow, task8MemHigh, parts, task8MemHigh, task8CountsGrowthFactor, task8MemLow, task8CountsGrowthSlack, task8MemHigh)
	g.checkTimed(chk, pass, "")
}

func checkTask8Disagreement(g *grading, c *results.Counting) {
	chk := results.Check{Name: task8CheckDisagreement, MaxScore: 1}
	d := c.Disagreement
	if d == nil || d.Requests == 0 {
		chk.Message = "the disagreement was not measured"
		g.checkTimed(chk, false, "the measurement is missing (a grader bug)")
		return
	}
	share, model := d.Share(), d.ModelShare()
	bound := model + task8DisagreeSlack
	chk.Message = fmt.Sprintf("a seeded trace (seed %d) of %d clients each sending at 0.8 to 1.2 times its limit of %d per %.0f ms, %d requests over %.0f s: the sliding counter and the sliding log decided %d differently (%.2f%%; %d admitted by the counter alone, %d by the log alone); want ≤ %.2f%%: the definitions of both, fed the same instants, differ on %.2f%% of this trace (the counter assumes the previous window's requests were spread evenly, and near the limit that is often off by one), plus %.1f points for requests within microseconds of an expiry, where the two calls read the clock apart. Cloudflare measured 0.003%% on real traffic, mostly far below its limits",
		d.Seed, d.Clients, d.Limit, d.WindowMS, d.Requests, d.Seconds, d.Differ, 100*share, d.CounterOnly, d.LogOnly, 100*bound, 100*model, 100*task8DisagreeSlack)
	chk.Measured = map[string]float64{"share": share, "differ": float64(d.Differ), "requests": float64(d.Requests), "counter_only": float64(d.CounterOnly), "log_only": float64(d.LogOnly)}
	chk.Expected = map[string]float64{"share_max": bound, "model_share": model}
	g.checkTimed(chk, share <= bound, "")
}
