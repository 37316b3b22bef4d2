package grader

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
)

// Checks judged from the fake GPU's own records (fakegpu's observe.go):
// the Retry-After of every refusal, the answers per client key, the
// server's memory and its CPU while idle. The server notes these from its
// hooks, so the code under test can neither print nor fake them, and it
// cannot tell a graded flood from any other traffic.

// idleWindow is how long the grader leaves a server alone after its
// floods drained, to measure the CPU it burns while nobody calls.
const idleWindow = 1500 * time.Millisecond

// idleCPUShare is the most CPU an idle server may use, per second of wall
// time. An idle Go server uses well under 1% of a core: the runtime's
// background scavenger returning a flood's memory, and the grader's two
// /stats reads. A goroutine that never blocks (a refill loop without a
// sleep, a busy-wait) keeps a whole core busy, and still gets about half
// of one on a machine busy enough to run two such programs per core. A
// fifth of a core sits far from both.
const idleCPUShare = 0.2

// measured is what floodChild measures beyond the floods themselves.
type measured struct {
	// memory reads the server's live memory before the floods and after
	// they drained.
	memory bool
}

// observeAfter reads, once the floods on the server at url have drained,
// its detailed stats, its CPU over idleWindow, and its memory if asked.
// A reading that fails leaves its field nil and says why in warnings.
func observeAfter(ctx context.Context, url string, m measured) (final results.ServerStats, idle *results.IdleStats, mem *results.MemoryStats, warnings []string, err error) {
	final, err = harness.HTTPStatsOf(url, harness.StatsQuery{Detail: true})(ctx)
	if err != nil {
		return final, nil, nil, nil, err
	}
	stats := harness.HTTPStats(url)
	a, errA := stats(ctx)
	start := time.Now()
	select {
	case <-ctx.Done():
		return final, nil, nil, nil, ctx.Err()
	case <-time.After(idleWindow):
	}
	b, errB := stats(ctx)
	wall := time.Since(start)
	switch {
	case errA != nil || errB != nil:
		warnings = append(warnings, fmt.Sprintf("idle CPU not measured: %v", firstErr(errA, errB)))
	case a.CPUS == 0 && b.CPUS == 0:
		warnings = append(warnings, "idle CPU not measured: the server does not know its CPU time here")
	default:
		idle = &results.IdleStats{WallS: wall.Seconds(), CPUS: max(0, b.CPUS-a.CPUS), Goroutines: b.Goroutines}
	}
	if m.memory {
		st, err := harness.HTTPStatsOf(url, harness.StatsQuery{GC: true})(ctx)
		if err == nil && st.Memory != nil {
			mem = st.Memory
		} else {
			warnings = append(warnings, fmt.Sprintf("memory after the flood not measured: %v", err))
		}
	}
	return final, idle, mem, warnings, nil
}

// readMemory reads the server's live memory, after a full collection,
// once the connections of a flood that just ended have closed: an open
// connection holds kilobytes of buffers, hundreds of them megabytes. It
// waits until the server's goroutines stop falling (up to 2 s).
func readMemory(ctx context.Context, url string) (*results.MemoryStats, error) {
	stats := harness.HTTPStats(url)
	last := int64(-1)
	for range 40 {
		st, err := stats(ctx)
		if err != nil {
			return nil, err
		}
		if last >= 0 && st.Goroutines >= last {
			break
		}
		last = st.Goroutines
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	st, err := harness.HTTPStatsOf(url, harness.StatsQuery{GC: true})(ctx)
	if err != nil {
		return nil, err
	}
	if st.Memory == nil {
		return nil, fmt.Errorf("the server reported no memory")
	}
	return st.Memory, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkExact records a check judged from the server's exact accounting,
// which does not depend on the load generator keeping its schedule: a run
// that fell behind still has every refusal judged and every client counted,
// so its checks stay verdicts. The check names its run.
func (g *grading) checkExact(c results.Check, pass bool, run *results.Run) {
	g.check(c, pass, nil)
	if run != nil {
		g.doc.Checks[len(g.doc.Checks)-1].Run = run.Name
	}
}

// notJudged records a check that could not be judged, for a reason that
// is neither the learner's code nor the grader's: an error, scoring 0.
func (g *grading) notJudged(c results.Check, why string, run *results.Run) {
	c.Task, c.Status, c.Score = g.task.ID, results.StatusError, 0
	c.Message = "not judged: " + why + "; " + c.Message
	if run != nil {
		c.Run = run.Name
	}
	g.record(c)
}

// refusalKinds names the refusal kinds for messages.
var refusalKinds = []struct{ kind, what string }{
	{results.RefusalShed, "503 shed before a slot"},
	{results.RefusalExpired, "503 past the deadline"},
	{results.RefusalLimited, "429"},
}

// checkRefusals judges every refusal of run as its server judged it when
// it went out: some of each kind in need must have been judged, and none
// wrong. The rule is exact, so there is no tolerance: a 503 must say the
// drain time of a line length its request saw (through job.Waiting(), or
// at the moment of the answer), a 429 the wait the limiter reported to
// that request, each in whole seconds rounded up and at least 1.
func (g *grading) checkRefusals(name string, run *results.Run, cfg fakegpu.Config, need ...string) {
	r := run.ServerFinal.Refusals
	if r == nil {
		r = &results.Refusals{}
	}
	judged, bad := r.Judged()
	measured := map[string]float64{"judged": float64(judged), "bad": float64(bad)}
	var parts, missing []string
	for _, k := range refusalKinds {
		c := r.Kind(k.kind)
		measured[k.kind+"_judged"], measured[k.kind+"_bad"], measured[k.kind+"_gone"] = float64(c.Judged), float64(c.Bad), float64(c.Gone)
		if c.Judged+c.Gone > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%d wrong; %d more to clients already gone, not judged)", c.Judged, k.what, c.Bad, c.Gone))
		}
		if slices.Contains(need, k.kind) && c.Judged == 0 {
			missing = append(missing, k.what)
		}
	}
	if len(parts) == 0 {
		parts = []string{"no refusal at all"}
	}
	msg := fmt.Sprintf("the server judged every refusal as it went out: %s. Each 503 must carry Retry-After = the line it saw drained at %g requests/s, each 429 the limiter's wait for that request, in whole seconds rounded up and at least 1; the rule is exact, so no tolerance",
		strings.Join(parts, ", "), cfg.Capacity())
	if len(missing) > 0 {
		msg += fmt.Sprintf("; want some of: %s", strings.Join(missing, ", "))
	}
	if len(r.Bad) > 0 {
		var ex []string
		for _, b := range r.Bad {
			ex = append(ex, describeBad(b))
		}
		msg += ". Wrong: " + strings.Join(ex, "; ")
	}
	g.checkExact(results.Check{
		Name: name, MaxScore: 1, Message: msg,
		Measured: measured, Expected: map[string]float64{"bad": 0},
	}, len(missing) == 0 && bad == 0, run)
}

// describeBad says in a few words what was wrong with one refusal.
func describeBad(b results.BadRefusal) string {
	got := fmt.Sprintf("Retry-After %q", b.Header)
	if b.Header == "" {
		got = "no Retry-After"
	}
	var want string
	switch {
	case b.WantMinS == 0:
		want = "no 429 at all"
	case b.WantMaxS == 0:
		want = fmt.Sprintf("at least %d", b.WantMinS)
	case b.WantMinS == b.WantMaxS:
		want = fmt.Sprint(b.WantMinS)
	default:
		want = fmt.Sprintf("%d to %d", b.WantMinS, b.WantMaxS)
	}
	return fmt.Sprintf("a %d (%s) with %s, want %s: %s", b.Status, b.Kind, got, want, b.Why)
}

// bucketBound returns the most a bucket of cfg lets through over spanS
// seconds: b + r·spanS, with a millionth of a token for float rounding.
func bucketBound(cfg fakegpu.Config, spanS float64) float64 {
	return cfg.BucketBurst + cfg.BucketRate*spanS + 1e-6
}

// clientOverBound is one client key the server admitted more often than
// its bucket allows.
type clientOverBound struct {
	c     results.ClientCount
	bound float64
}

// clientsOverBound returns the tracked keys of run's server for which
// want(key) holds, and those admitted more than b + r·span.
func clientsOverBound(run *results.Run, cfg fakegpu.Config, want func(key string) bool) (found []results.ClientCount, over []clientOverBound) {
	if run.ServerFinal.Clients == nil {
		return nil, nil
	}
	for _, c := range run.ServerFinal.Clients.Clients {
		if !want(c.Key) {
			continue
		}
		found = append(found, c)
		if b := bucketBound(cfg, c.SpanS); float64(c.Admitted) > b {
			over = append(over, clientOverBound{c, b})
		}
	}
	return found, over
}

// describeOver says how far the worst clients went over their bound.
func describeOver(over []clientOverBound, limit int) string {
	slices.SortFunc(over, func(a, b clientOverBound) int {
		return int(math.Ceil((float64(b.c.Admitted) - b.bound) - (float64(a.c.Admitted) - a.bound)))
	})
	var out []string
	for _, o := range over[:min(len(over), limit)] {
		out = append(out, fmt.Sprintf("%s let through %d times in %.2f s, bound %.1f", o.c.Key, o.c.Admitted, o.c.SpanS, o.bound))
	}
	return strings.Join(out, "; ")
}

// checkIdle judges the CPU every child server of this grading used while
// nobody called it, after its floods drained: each must stay under
// idleCPUShare of a core.
func (g *grading) checkIdle(name string) {
	var worst *results.Run
	var parts []string
	measured := map[string]float64{}
	for _, run := range g.doc.Runs {
		if run.Idle == nil {
			continue
		}
		share := run.Idle.Share()
		measured["cpu_share_"+run.Name] = share
		parts = append(parts, fmt.Sprintf("%s %.1f%% (%d goroutines)", run.Name, 100*share, run.Idle.Goroutines))
		if worst == nil || share > worst.Idle.Share() {
			worst = run
		}
	}
	msg := fmt.Sprintf("CPU per second of a %.1f s idle spell after each flood drained: %s; want under %.0f%% of one core each: an idle server sleeps (well under 1%%), a goroutine that never blocks, such as a refill loop without a sleep or a busy-wait, burns a whole core",
		idleWindow.Seconds(), strings.Join(parts, ", "), 100*idleCPUShare)
	pass := worst != nil && worst.Idle.Share() <= idleCPUShare && len(g.idleMissing) == 0
	if worst == nil {
		msg = "no idle spell was measured"
	}
	if len(g.idleMissing) > 0 {
		msg += fmt.Sprintf("; not measured after %s (the server did not answer /stats)", strings.Join(g.idleMissing, ", "))
	}
	if worst != nil {
		measured["cpu_share_max"] = worst.Idle.Share()
	}
	g.checkExact(results.Check{
		Name: name, MaxScore: 1, Message: msg,
		Measured: measured, Expected: map[string]float64{"cpu_share_max": idleCPUShare},
	}, pass, worst)
}
