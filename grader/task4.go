package grader

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/vsession"
	"ratelab/results"
	"ratelab/scenario"
)

// The storm of task 4: 400 clients against the shedding server of task 2,
// each retrying with base 100 ms, cap 5 s, 12 tries, as in the lesson.
const (
	task4Clients = 400
	task4Tries   = 12
	task4Base    = 100 * time.Millisecond
	task4Cap     = 5 * time.Second
	// task4StormLimit bounds one storm; the slowest (no jitter) took 35–57 s
	// in the lesson and a Go prototype.
	task4StormLimit = 150 * time.Second
	// task4AmplifyLimit bounds one run of the amplifier: 10 s of arrivals
	// and the retries after them.
	task4AmplifyLimit = 40 * time.Second
)

// Tolerances of task 4, each with the reason it is as wide as it is.
const (
	// The storm's time and attempts with full jitter depend on the seed:
	// the simulation (model.Sim, 41 seeds) gives a median of 7.4 s and
	// 2,406 attempts, and 8.3 s and 2,427 at its 95th percentile; the
	// lesson measured 7.2–7.5 s, a Go prototype 7.4–7.9 s and 2,401–2,408.
	// On top of that 95th percentile, 20% more time and 10% more attempts
	// leave room for a machine whose slots overrun and whose 400 goroutines
	// start late (9.9 s and 2,670, the lesson's 10 s and 2,700 before the
	// simulation); a run without jitter takes over 30 s.
	task4JitterTimeSlack     = 1.20
	task4JitterAttemptsSlack = 1.10
	// Without jitter whole cohorts retry together and are shed together.
	// The simulation gives 31.6 s and 3,448 attempts with 136 clients
	// giving up (a Go prototype measured the same; the lesson 52–57 s). At
	// least half the simulated time is far above any jittered run: a
	// client whose "no jitter" still jitters fails it.
	task4NoJitterShare = 0.5
	// Honouring a Retry-After that the server spreads at its capacity
	// finishes in 6.1–6.4 s here; it must beat the simulation's median
	// storm with jitter alone (7.4 s), not this run's jitter storm: jitter
	// is random, and a lucky 6.7 s run (the simulation's fastest seed) must
	// not fail a correct client.

	// The share of 250 ms bins with no send at all, from 1 s until the last
	// call ended. Jitter spreads every round of retries over its window,
	// so hardly a bin stays empty (0 to 10% measured here); without it,
	// whole cohorts retry in one bin and leave seconds of silence between
	// waves (over 90% measured). Lockstep is at least half empty; spread
	// retries leave at most a quarter empty.
	task4WavesMin  = 0.50
	task4SpreadMax = 0.25
	// A client that honours a Retry-After spread at the server's capacity is
	// refused about once, then served at its turn: about two attempts each
	// (the reference: 780 for 400). Three a client leaves room for the few
	// the line turns away again; one that ignores the header needs about six,
	// as jitter alone does.
	task4RetryAfterAttempts = 3.0
	// The amplifier's immediate retries: each call that times out is sent
	// again at once, up to 4 attempts. Once the line is over a second
	// long, every call times out and the server receives about 4× the
	// offered rate. 2.5× in the second half of the flood is far above the
	// offered load, and well below what a correct naive loop produces.
	task4AmplifyFactor = 2.5
	// With backoff, jitter and a 10% retry budget, attempts stay within
	// 1.1× the calls, plus a small overshoot: the budget may start with a
	// few retries in hand (see the reference's doc) and a retry decided
	// just before the budget drained still goes out.
	task4BudgetFactor    = 1.10
	task4BudgetOvershoot = 20
	// How much sooner than its Retry-After a client may come back, as the
	// server measures it from committing the refusal to reading the next
	// attempt: 50 ms admits a loop that starts its wait when it sent (a
	// shed answer takes a millisecond, tens on a busy machine) and is far
	// below any real mistake (docs/VALIDITY.md, "Retry-After, measured by
	// the server"). A header longer than Cap counts as Cap.
	task4EarlyTolerance = 50 * time.Millisecond
)

// stormRow is one storm of task 4.
type stormRow struct {
	name   string
	jitter bool
	honor  bool
}

var task4Storms = []stormRow{
	{"storm 400, full jitter", true, false},
	{"storm 400, no jitter", false, false},
	{"storm 400, full jitter, Retry-After honoured", true, true},
	{"storm 400, no jitter, Retry-After honoured", false, true},
}

func task4Planned() []planned {
	return []planned{
		{"storm, full jitter: done about as fast as simulated", 2},
		{"storm, full jitter: attempts about as few as simulated", 1},
		{"storm, full jitter: no lockstep waves", 1},
		{"storm, no jitter: as slow as the simulated lockstep", 1},
		{"storm, no jitter: sends come in lockstep waves", 1},
		{"storms: every client eventually succeeds", 1},
		{"storms: OnAttempt is called before every attempt", 1},
		{"storm: honouring a spread Retry-After beats jitter alone", 1},
		{"storms: no client has two attempts open at once (as the server saw)", 1},
		{"storms: no client sends more than MaxTries attempts (as the server saw)", 1},
		{"storm, Retry-After honoured: no client comes back before the time the server gave it", 1},
		{"amplifier: immediate retries multiply the load", 1},
		{"amplifier: a 10% budget keeps retries near the offered load", 2},
	}
}

func gradeTask4(ctx context.Context, g *grading) error {
	notReady, err := g.unit(ctx)
	if err != nil {
		return err
	}
	if g.opts.UnitOnly {
		return nil
	}
	if notReady == "" {
		err := g.runner().prepare(ctx)
		if err == nil {
			return stormTask4(ctx, g)
		}
		notReady = fmt.Sprintf("the storm with %s %v", g.file(), err)
	}
	g.skipRest(notReady)
	return nil
}

func (r virtualRunner) storm(ctx context.Context, cfg fakegpu.Config, req vsession.Request, _ time.Duration) (*results.Storm, results.ServerStats, error) {
	return r.g.stormVirtual(ctx, cfg, req)
}

// storm on the wall clock runs the storm binary against a child server
// from the reference build, or, for the amplifier, an unprotected
// in-process server.
func (r *wallRunner) storm(ctx context.Context, cfg fakegpu.Config, req vsession.Request, limit time.Duration) (*results.Storm, results.ServerStats, error) {
	var url string
	var stats harness.StatsFunc
	if req.Storm != nil {
		c, err := startServer(ctx, r.server, append([]string{"--port", "0"}, cfg.Args()...)...)
		if err != nil {
			return nil, results.ServerStats{}, err
		}
		defer c.stop()
		url, stats = c.URL, harness.HTTPStatsOf(c.URL, harness.StatsQuery{Detail: true})
	} else {
		srv, err := fakegpu.New(cfg)
		if err != nil {
			return nil, results.ServerStats{}, err
		}
		in, err := fakegpu.Listen(srv, "127.0.0.1:0")
		if err != nil {
			return nil, results.ServerStats{}, err
		}
		defer in.Close()
		url, stats = in.URL, func(context.Context) (results.ServerStats, error) { return srv.StatsDetail(), nil }
	}
	st, err := r.g.runStorm(ctx, r.cmd, url, limit, stormArgs(req)...)
	if err != nil {
		return nil, results.ServerStats{}, err
	}
	final, err := stats(ctx)
	return st, final, err
}

// stormArgs is the storm binary's command line for req.
func stormArgs(req vsession.Request) []string {
	r := req.Retry
	args := []string{"--tries", fmt.Sprint(r.Tries), "--base", r.Base.String(), "--cap", r.Cap.String(),
		fmt.Sprintf("--jitter=%t", r.Jitter), fmt.Sprintf("--honor-retry-after=%t", r.HonorRetryAfter)}
	if r.Budget > 0 {
		args = append(args, "--budget", strconv.FormatFloat(r.Budget, 'g', -1, 64))
	}
	if s := req.Storm; s != nil {
		return append([]string{"--kind", "storm", "--name", s.Name, "--clients", fmt.Sprint(s.Clients)}, args...)
	}
	a := req.Amplify
	return append([]string{"--kind", "amplify", "--name", a.Name, "--rate", strconv.FormatFloat(a.Rate, 'g', -1, 64),
		"--seconds", strconv.FormatFloat(a.Duration.Seconds(), 'g', -1, 64)}, args...)
}

// runStorm runs the storm binary with args against url and decodes its
// result.
func (g *grading) runStorm(ctx context.Context, bin, url string, limit time.Duration, args ...string) (*results.Storm, error) {
	var st results.Storm
	err := RunJSON(ctx, limit+30*time.Second, &st, bin, append([]string{"--url", url, "--limit", limit.String()}, args...)...)
	if err != nil {
		return nil, g.learnerFault("the storm's clients", err)
	}
	return &st, nil
}

func stormTask4(ctx context.Context, g *grading) error {
	cfg := fakegpu.DefaultConfig()
	ideal := float64(task4Clients) * cfg.Work.Seconds() / float64(cfg.Slots)
	storms := make([]*results.Storm, len(task4Storms))
	for i, row := range task4Storms {
		server := shedConfig()
		server.SpreadRetryAfter = row.honor
		rt := vsession.Retry{Tries: task4Tries, Base: task4Base, Cap: task4Cap, Jitter: row.jitter, HonorRetryAfter: row.honor}
		g.logf("  %s: %d clients at once against the shedding server%s%s ...", row.name, task4Clients,
			map[bool]string{true: " (it spreads Retry-After)", false: ""}[row.honor], g.runner().clock())
		st, stats, err := g.runner().storm(ctx, server, vsession.Request{
			Op: vsession.OpStorm, Retry: &rt,
			Storm: &scenario.StormOptions{Name: row.name, Clients: task4Clients, Limit: task4StormLimit},
		}, task4StormLimit)
		if err != nil {
			return fmt.Errorf("%s: %w", row.name, err)
		}
		st.ServerReceived = stats.Received
		st.Calls = summariseCalls(stats.Calls, task4Cap, task4EarlyTolerance)
		st.IdealS = ideal
		st.Server = record(server)
		storms[i] = st
		g.doc.Storms = append(g.doc.Storms, st)
		g.logf("    attempts %d (server counted %d), last done %.1f s (ideal %.1f s), succeeded %d of %d, peak/mean %.1f",
			st.Attempts, st.ServerReceived, st.LastDoneS, ideal, st.Succeeded, st.Clients, st.PeakToMean)
		if cs := st.Calls; cs != nil {
			g.logf("    per client, as the server saw: at most %d attempts and %d open at once, shortest gap %.1f ms; %d returns after a Retry-After, %d clients early (worst: told %d s, back after %.0f ms)",
				cs.MostAttempts, cs.MaxOpen, cs.MinGapMS, cs.RetryAfterReturns, cs.EarlyCalls, cs.WorstRetryAfterS, cs.WorstGapMS)
		}
	}
	sims := make([]stormForecast, 2)
	for i, jitter := range []bool{true, false} {
		var err error
		if sims[i], err = simStorm(shedConfig(), task4Clients, task4Tries, task4Base, task4Cap, jitter); err != nil {
			return err
		}
		storms[i].SimulatedS = sims[i].MedianS
	}
	checkTask4Storms(g, storms, sims[0], sims[1])
	checkTask4Calls(g, storms)

	naive, budget, err := amplifyTask4(ctx, g)
	if err != nil {
		return err
	}
	checkTask4Amplify(g, naive, budget)
	return nil
}

// amplifyTask4 runs the amplifier twice against a fresh unprotected
// in-process server each time: immediate retries, then backoff with a budget.
func amplifyTask4(ctx context.Context, g *grading) (naive, budget *results.Storm, err error) {
	rows := []struct {
		name  string
		retry vsession.Retry
	}{
		{"amplifier 100/s, immediate retries ×3", vsession.Retry{Tries: 4, Base: time.Nanosecond, Cap: time.Nanosecond}},
		{"amplifier 100/s, backoff, jitter, 10% budget", vsession.Retry{Tries: 4, Base: task4Base, Cap: task4Cap, Jitter: true, Budget: 0.1}},
	}
	out := make([]*results.Storm, len(rows))
	for i, row := range rows {
		cfg := fakegpu.DefaultConfig()
		g.logf("  %s against the unprotected server%s ...", row.name, g.runner().clock())
		st, stats, err := g.runner().storm(ctx, cfg, vsession.Request{
			Op: vsession.OpAmplify, Retry: &row.retry,
			Amplify: &scenario.AmplifyOptions{Name: row.name, Rate: 100, Duration: 10 * time.Second, Limit: task4AmplifyLimit},
		}, task4AmplifyLimit)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", row.name, err)
		}
		st.Server = record(cfg)
		st.ServerReceived = stats.Received
		out[i] = st
		g.doc.Storms = append(g.doc.Storms, st)
		first, _ := st.ReceivedRate(0, 5)
		second, _ := st.ReceivedRate(5, 10)
		g.logf("    calls %d, attempts %d, server received %.0f/s then %.0f/s, succeeded %d", st.Clients, st.Attempts, first, second, st.Succeeded)
	}
	return out[0], out[1], nil
}

// shedConfig is the shedding server the storms run against.
func shedConfig() fakegpu.Config {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = fakegpu.ModeShed
	return cfg
}

// checkTask4Storms judges the four storms, in task4Storms order, against
// the simulation of the first two (simJit with full jitter, simLock
// without).
func checkTask4Storms(g *grading, s []*results.Storm, simJit, simLock stormForecast) {
	jit, nojit, jitRA, nojitRA := s[0], s[1], s[2], s[3]
	ideal := jit.IdealS
	maxS := math.Round(10*task4JitterTimeSlack*simJit.HighS) / 10
	g.check(results.Check{
		Name: "storm, full jitter: done about as fast as simulated", MaxScore: 2,
		Message: fmt.Sprintf("%d of %d clients succeeded, the last after %.1f s (ideal %.1f s); the simulation gives %.1f s (%.1f s at its 95th percentile over seeds), want all of them, by %.1f s (20%% above that: a slower machine)",
			jit.Succeeded, jit.Clients, jit.LastDoneS, ideal, simJit.MedianS, simJit.HighS, maxS),
		Measured: map[string]float64{"last_done_s": jit.LastDoneS},
		Expected: map[string]float64{"last_done_s": simJit.MedianS, "last_done_s_max": maxS, "ideal_s": ideal},
	}, !jit.TimedOut && jit.Succeeded == int64(jit.Clients) && jit.LastDoneS <= maxS, nil)
	maxAttempts := math.Round(task4JitterAttemptsSlack * simJit.HighAttempts)
	g.check(results.Check{
		Name: "storm, full jitter: attempts about as few as simulated", MaxScore: 1,
		Message: fmt.Sprintf("the server received %d attempts and %d of %d clients succeeded; the simulation gives %.0f (%.0f at its 95th percentile), want ≤ %.0f (10%% above that) with every client served: spread-out retries find room more often",
			jit.ServerReceived, jit.Succeeded, jit.Clients, simJit.MedianAttempts, simJit.HighAttempts, maxAttempts),
		Measured: map[string]float64{"attempts": float64(jit.ServerReceived)},
		Expected: map[string]float64{"attempts": simJit.MedianAttempts, "attempts_max": maxAttempts},
	}, float64(jit.ServerReceived) <= maxAttempts && jit.ServerReceived >= task4Clients && jit.Succeeded == int64(jit.Clients), nil)
	g.check(results.Check{
		Name: "storms: OnAttempt is called before every attempt", MaxScore: 1,
		Message: fmt.Sprintf("the clients reported %d attempts through OnAttempt and the server counted %d (full jitter); want the same: the sends histogram is built from OnAttempt",
			jit.Attempts, jit.ServerReceived),
		Measured: map[string]float64{"on_attempt": float64(jit.Attempts), "server_received": float64(jit.ServerReceived)},
	}, jit.Attempts == jit.ServerReceived && nojit.Attempts == nojit.ServerReceived, nil)
	g.check(results.Check{
		Name: "storm, full jitter: no lockstep waves", MaxScore: 1,
		Message:  fmt.Sprintf("%.0f%% of the 250 ms bins from 1 s to the end had no send; want ≤ %.0f%%: jitter spreads each round of retries over its window", 100*jit.EmptyShare, 100*task4SpreadMax),
		Measured: map[string]float64{"empty_share": jit.EmptyShare}, Expected: map[string]float64{"empty_share_max": task4SpreadMax},
	}, jit.Attempts > 0 && jit.EmptyShare <= task4SpreadMax, nil)
	minS := math.Round(10*task4NoJitterShare*simLock.MedianS) / 10
	g.check(results.Check{
		Name: "storm, no jitter: as slow as the simulated lockstep", MaxScore: 1,
		Message: fmt.Sprintf("without jitter the last client was done after %.1f s; the simulation gives %.1f s (%d of 400 giving up), want ≥ %.1f s (half of it; ideal %.1f s, the lesson: 52–57 s): clients rejected together retry together and are rejected together again",
			nojit.LastDoneS, simLock.MedianS, simLock.GaveUp, minS, ideal),
		Measured: map[string]float64{"last_done_s": nojit.LastDoneS, "gave_up": float64(nojit.Failed)},
		Expected: map[string]float64{"last_done_s": simLock.MedianS, "last_done_s_min": minS, "gave_up": float64(simLock.GaveUp)},
	}, nojit.LastDoneS >= minS, nil)
	g.check(results.Check{
		Name: "storm, no jitter: sends come in lockstep waves", MaxScore: 1,
		Message: fmt.Sprintf("%.0f%% of the 250 ms bins from 1 s to the end had no send; want ≥ %.0f%%: whole cohorts retry in one bin, then silence. %d of 400 clients gave up after %d tries: each wave admits only the 8 slots and the line of 16",
			100*nojit.EmptyShare, 100*task4WavesMin, nojit.Failed, task4Tries),
		Measured: map[string]float64{"empty_share": nojit.EmptyShare, "gave_up": float64(nojit.Failed)}, Expected: map[string]float64{"empty_share_min": task4WavesMin},
	}, nojit.EmptyShare >= task4WavesMin, nil)
	all := true
	var bad []string
	// Without jitter and without Retry-After, lockstep waves admit 24 clients
	// each, 5 s apart once the backoff is capped, so 12 tries cannot serve
	// all 400; that storm is judged on its time and its waves instead.
	for _, st := range []*results.Storm{jit, jitRA, nojitRA} {
		if st.TimedOut || st.Succeeded != int64(st.Clients) {
			all = false
			bad = append(bad, fmt.Sprintf("%s: %d of %d (%s)", st.Name, st.Succeeded, st.Clients, strings.Join(st.Errors, "; ")))
		}
	}
	msg := "all 400 clients succeeded with full jitter, and with Retry-After honoured (with and without jitter)"
	if !all {
		msg = "some clients never succeeded: " + strings.Join(bad, "; ")
	}
	g.check(results.Check{Name: "storms: every client eventually succeeds", MaxScore: 1, Message: msg}, all, nil)
	maxRA := task4RetryAfterAttempts * float64(jitRA.Clients)
	g.check(results.Check{
		Name: "storm: honouring a spread Retry-After beats jitter alone", MaxScore: 1,
		Message: fmt.Sprintf("when the server tells each shed client when to come back, spread at its capacity, and the client honours it: %d of %d served, the last after %.1f s with jitter (%.1f s without), in %d attempts; want all of them, under the %.1f s jitter alone takes (the simulation's median; this run's jitter storm took %.1f s, the ideal is %.1f s), in at most %.0f attempts (%.0f a client: one refusal names the client's turn, where jitter alone needs about %.0f)",
			jitRA.Succeeded, jitRA.Clients, jitRA.LastDoneS, nojitRA.LastDoneS, jitRA.ServerReceived, simJit.MedianS, jit.LastDoneS, ideal, maxRA, task4RetryAfterAttempts, simJit.MedianAttempts/float64(task4Clients)),
		Measured: map[string]float64{"last_done_s": jitRA.LastDoneS, "last_done_s_no_jitter": nojitRA.LastDoneS, "last_done_s_jitter_alone": jit.LastDoneS, "attempts": float64(jitRA.ServerReceived)},
		Expected: map[string]float64{"last_done_s_max": simJit.MedianS, "attempts_max": maxRA},
	}, !jitRA.TimedOut && jitRA.Succeeded == int64(jitRA.Clients) && jitRA.LastDoneS < simJit.MedianS && float64(jitRA.ServerReceived) <= maxRA, nil)
}

func checkTask4Amplify(g *grading, naive, budget *results.Storm) {
	second, _ := naive.ReceivedRate(5, naive.DurationS) // 0 without samples: the check fails
	g.check(results.Check{
		Name: "amplifier: immediate retries multiply the load", MaxScore: 1,
		Message: fmt.Sprintf("100 calls/s, each retried at once up to 3 times: the server received %.0f attempts/s in the second half of the flood; want ≥ %.0f/s (%.1f×): every attempt times out in a line that never recovers, and is sent again",
			second, task4AmplifyFactor*naive.OfferedRPS, task4AmplifyFactor),
		Measured: map[string]float64{"received_rps_second_half": second, "attempts": float64(naive.Attempts)},
		Expected: map[string]float64{"received_rps_min": task4AmplifyFactor * naive.OfferedRPS},
	}, second >= task4AmplifyFactor*naive.OfferedRPS, nil)
	limit := task4BudgetFactor*float64(budget.Clients) + task4BudgetOvershoot
	g.check(results.Check{
		Name: "amplifier: a 10% budget keeps retries near the offered load", MaxScore: 2,
		Message: fmt.Sprintf("%d calls made %d attempts as the server counted them; want ≤ %.0f (1.1× plus %d for the budget's start and retries already decided): once the budget is spent, failures fail fast",
			budget.Clients, budget.ServerReceived, limit, task4BudgetOvershoot),
		Measured: map[string]float64{"attempts": float64(budget.ServerReceived), "calls": float64(budget.Clients)},
		Expected: map[string]float64{"attempts_max": limit},
	}, budget.ServerReceived <= int64(limit) && budget.ServerReceived >= int64(budget.Clients), nil)
}

// summariseCalls keeps the worst of the server's records of each call for
// the checks: the most attempts and attempts open at once, the shortest
// gap, and the returns that came earliest against their Retry-After
// (capped at capRA, as the contract caps it), counting a call early if it
// came more than tol before. Nil if the server recorded nothing.
func summariseCalls(cs *results.CallStats, capRA, tol time.Duration) *results.CallSummary {
	if cs == nil {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s := &results.CallSummary{Calls: len(cs.Calls), Untracked: cs.Untracked, MinGapMS: -1, ToleranceMS: ms(tol)}
	worst := false
	for _, c := range cs.Calls {
		s.Attempts += c.Attempts
		if c.Attempts > s.MostAttempts {
			s.MostAttempts, s.MostAttemptsCall = c.Attempts, c.ID
		}
		if c.MaxOpen > s.MaxOpen {
			s.MaxOpen, s.MaxOpenCall = c.MaxOpen, c.ID
		}
		if c.MaxOpen > 1 {
			s.Overlapping++
		}
		if c.Gaps > 0 && (s.MinGapMS < 0 || c.MinGapMS < s.MinGapMS) {
			s.MinGapMS = c.MinGapMS
		}
		if c.RetryAfterReturns == 0 {
			continue
		}
		s.RetryAfterReturns += c.RetryAfterReturns
		floor := min(float64(c.WorstRetryAfterS)*1000, ms(capRA))
		early := floor - c.WorstGapMS
		if early > ms(tol) {
			s.EarlyCalls++
		}
		if !worst || early > s.WorstEarlyMS {
			worst = true
			s.WorstCall, s.WorstRetryAfterS, s.WorstGapMS, s.WorstEarlyMS = c.ID, c.WorstRetryAfterS, c.WorstGapMS, early
		}
	}
	return s
}

// callsComplete says whether the server recorded every attempt of st under
// one call per client, or why not.
func callsComplete(st *results.Storm) string {
	cs := st.Calls
	switch {
	case cs == nil:
		return fmt.Sprintf("%s: the server recorded no call (no attempt carried X-Call-Id)", st.Name)
	case cs.Untracked > 0:
		return fmt.Sprintf("%s: %d attempts came from calls past the server's table of %d", st.Name, cs.Untracked, fakegpu.CallCapacity)
	case cs.Attempts != st.ServerReceived:
		return fmt.Sprintf("%s: the server received %d attempts but only %d carried their call's X-Call-Id: every retry must resend the request (req.Clone), headers included", st.Name, st.ServerReceived, cs.Attempts)
	case cs.Calls != st.Clients:
		return fmt.Sprintf("%s: the server saw %d calls (X-Call-Id) from %d clients: every retry must resend the call's own request", st.Name, cs.Calls, st.Clients)
	}
	return ""
}

// checkTask4Calls judges the storms, in task4Storms order, from the
// server's own record of each client's attempts (results.CallSummary).
func checkTask4Calls(g *grading, s []*results.Storm) {
	var incomplete []string
	for _, st := range s {
		if why := callsComplete(st); why != "" {
			incomplete = append(incomplete, why)
		}
	}
	// The numbers of every storm, for the messages.
	var open, tries []string
	var maxOpen, most int64
	minGap := -1.0
	for _, st := range s {
		cs := st.Calls
		if cs == nil {
			continue
		}
		maxOpen, most = max(maxOpen, cs.MaxOpen), max(most, cs.MostAttempts)
		if cs.MinGapMS >= 0 && (minGap < 0 || cs.MinGapMS < minGap) {
			minGap = cs.MinGapMS
		}
		o := fmt.Sprintf("%s: at most %d (shortest gap %.1f ms)", st.Name, cs.MaxOpen, cs.MinGapMS)
		if cs.MaxOpen > 1 {
			o = fmt.Sprintf("%s: %d clients had two or more open, %s %d at once", st.Name, cs.Overlapping, cs.MaxOpenCall, cs.MaxOpen)
		}
		open = append(open, o)
		tries = append(tries, fmt.Sprintf("%s: at most %d (%s)", st.Name, cs.MostAttempts, cs.MostAttemptsCall))
	}
	gaps := ""
	if len(incomplete) > 0 {
		gaps = "; " + strings.Join(incomplete, "; ")
	}
	ok := len(incomplete) == 0
	g.check(results.Check{
		Name: "storms: no client has two attempts open at once (as the server saw)", MaxScore: 1,
		Message: fmt.Sprintf("attempts of one client open at once, from the server's own record of each client's call (X-Call-Id), an attempt open from its arrival until the server commits its answer or sees the client hang up: %s; want 1: a retry loop sends the next attempt only once the previous one has ended%s",
			strings.Join(open, "; "), gaps),
		Measured: map[string]float64{"max_open": float64(maxOpen), "min_gap_ms": minGap},
		Expected: map[string]float64{"max_open_max": 1},
	}, ok && maxOpen <= 1, nil)
	maxTries := int64(task4Tries)
	for _, st := range s {
		if st.MaxTries > 0 {
			maxTries = int64(st.MaxTries)
		}
	}
	g.check(results.Check{
		Name: "storms: no client sends more than MaxTries attempts (as the server saw)", MaxScore: 1,
		Message: fmt.Sprintf("attempts of one client's call as the server counted them: %s; want at most MaxTries = %d, the first included (without jitter %d of 400 gave up after exactly that many)%s",
			strings.Join(tries, "; "), maxTries, s[1].Failed, gaps),
		Measured: map[string]float64{"most_attempts": float64(most)},
		Expected: map[string]float64{"most_attempts_max": float64(maxTries)},
	}, ok && most <= maxTries, nil)

	var told []string
	var early int
	var returns int64
	worst := math.Inf(-1)
	for _, st := range s {
		if !st.HonorRetryAfter || st.Calls == nil {
			continue
		}
		cs := st.Calls
		early += cs.EarlyCalls
		returns += cs.RetryAfterReturns
		worst = max(worst, cs.WorstEarlyMS)
		told = append(told, fmt.Sprintf("%s: %d returns after a Retry-After, %d clients early; the closest, %s, was told %d s and came back after %.0f ms",
			st.Name, cs.RetryAfterReturns, cs.EarlyCalls, cs.WorstCall, cs.WorstRetryAfterS, cs.WorstGapMS))
	}
	if math.IsInf(worst, -1) {
		worst = 0
	}
	g.check(results.Check{
		Name: "storm, Retry-After honoured: no client comes back before the time the server gave it", MaxScore: 1,
		Message: fmt.Sprintf("from each refusal the server committed with a Retry-After to the same client's next attempt, by the server's clock: %s; want no client back sooner than the header (at most Cap = %v, as the contract caps it) less %v: latency only lengthens this gap, and %v admits a loop that starts its wait when it sent the attempt; ignoring the header comes back within the backoff after being told at least 1 s%s",
			strings.Join(told, "; "), task4Cap, task4EarlyTolerance, task4EarlyTolerance, gaps),
		Measured: map[string]float64{"early_clients": float64(early), "retry_after_returns": float64(returns), "worst_early_ms": worst},
		Expected: map[string]float64{"early_clients_max": 0, "tolerance_ms": float64(task4EarlyTolerance) / float64(time.Millisecond)},
	}, ok && len(told) > 0 && early == 0 && returns > 0, nil)
}
