package grader

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"ratelab/internal/vsession"
	"ratelab/results"
	"ratelab/scenario"
)

// The dead-dependency scenario of task 7: a service at 100 requests per
// second calls a dependency that goes dead for 10 s (it accepts requests and
// never answers), with a 10 s timeout to it.
const (
	task7Rate        = 100.0
	task7Window      = 20
	task7SlowCall    = 100 * time.Millisecond
	task7Cooldown    = 2 * time.Second // the scenario's, so recovery fits the run; 30 s is usual
	task7DeadFor     = 10 * time.Second
	task7TrialsBound = 5 // half-open trials in 10 s dead: one per cooldown
	// The rest of the scenario: 25 s of requests, the dependency dead from
	// 5 s in, the service's clients patient for 5 s more than its own
	// timeout, and the breaker's other settings.
	task7Length        = 25 * time.Second
	task7DeadAt        = 5 * time.Second
	task7CallTimeout   = 10 * time.Second
	task7ClientTimeout = task7CallTimeout + 5*time.Second
	task7Work          = 5 * time.Millisecond
	task7FailureRatio  = 0.5
	task7MinCalls      = 10
	task7HalfOpenMax   = 1
)

// task7Settings is task 7's dependency scenario, and with a breaker its
// settings (nil without one).
func task7Settings(with bool) (scenario.Dependency, *vsession.Breaker) {
	o := scenario.Dependency{
		Name: "without a breaker", Rate: task7Rate, Duration: task7Length,
		ClientTimeout: task7ClientTimeout, CallTimeout: task7CallTimeout, DependencyWork: task7Work,
		DeadAt: task7DeadAt, DeadFor: task7DeadFor, SlowCall: task7SlowCall,
	}
	if !with {
		return o, nil
	}
	o.Name = "with a breaker"
	return o, &vsession.Breaker{Window: task7Window, FailureRatio: task7FailureRatio, MinCalls: task7MinCalls, Cooldown: task7Cooldown, HalfOpenMax: task7HalfOpenMax}
}

// scenarioArgs is cmd/breaker's command line for o and b.
func scenarioArgs(o scenario.Dependency, b *vsession.Breaker) []string {
	args := []string{"--rate", strconv.FormatFloat(o.Rate, 'g', -1, 64), "--seconds", strconv.FormatFloat(o.Duration.Seconds(), 'g', -1, 64),
		"--dead-at", o.DeadAt.String(), "--dead-for", o.DeadFor.String(), "--call-timeout", o.CallTimeout.String(),
		"--client-timeout", o.ClientTimeout.String(), "--dependency-work", o.DependencyWork.String(), "--slow-call", o.SlowCall.String(),
		fmt.Sprintf("--breaker=%t", b != nil)}
	if b != nil {
		args = append(args, "--window", strconv.Itoa(b.Window), "--failure-ratio", strconv.FormatFloat(b.FailureRatio, 'g', -1, 64),
			"--min-calls", strconv.Itoa(b.MinCalls), "--cooldown", b.Cooldown.String(), "--half-open-max", strconv.Itoa(b.HalfOpenMax))
	}
	return args
}

// Tolerances of task 7, each with the reason it is as wide as it is.
const (
	// Calls reaching the dead dependency: the breaker hears of the first
	// failure SlowCall after death, by which time Rate × SlowCall = 10 calls
	// are out; it opens once more than half of the last Window outcomes
	// failed (about 11 more), then lets one trial through per cooldown (5
	// in 10 s). 20 + 10 + 5 = 35; the bound adds 5 for scheduling.
	task7DeadCallsMax = task7Window + 10 + task7TrialsBound + 5
	// Requests in flight in the service: the ~35 calls above hang for the
	// 10 s timeout, plus a few healthy ones; 60 leaves room, and is far
	// below the ~1,000 of the service without a breaker (Little's Law:
	// 100/s × 10 s).
	task7InFlightMax = 60
	// A fast failure is answered without calling the dependency: a loopback
	// round trip. 50 ms leaves room for a busy machine and is 200 times
	// faster than the 10 s the clients wait without a breaker.
	task7FastFailMS = 50.0
	// After the dependency recovers, the breaker closes at its next
	// half-open trial: within one cooldown, plus the trial itself and one
	// 250 ms bin of the load generator's timeline.
	task7RecoverMax = task7Cooldown + time.Second
	// Trial calls while the dependency is dead, as the dependency recorded
	// them with when the breaker let each through: the breaker opened at
	// or before it first refused a call, and opens again at or after each
	// trial, so each trial comes at least one cooldown after the first
	// refusal or the trial before. The slack is the gap between opening and
	// the first refusal: one request's interval at 100/s (10 ms), with room
	// for a busy machine.
	task7TrialSlack = 50 * time.Millisecond
)

// task7Planned lists task 7's checks: the scenario's, as declared in
// task7Checks, then the cost check.
func task7Planned() []planned {
	return append(plannedOf(task7Checks), planned{task7CheckCost, 1})
}

// task7CheckCost names task 7's wall-clock cost check (cost.go).
const task7CheckCost = "breaker: each call costs little CPU"

// gradeTask7 grades the circuit breaker: its unit suite, then the
// dead-dependency scenario without and with the breaker.
func gradeTask7(ctx context.Context, g *grading) error {
	notReady, err := g.unit(ctx)
	if err != nil || g.opts.UnitOnly {
		return err
	}
	if notReady == "" {
		err := g.runner().prepare(ctx)
		if err == nil {
			return scenarioTask7(ctx, g)
		}
		notReady = fmt.Sprintf("the scenario with %s %v", g.file(), err)
	}
	g.skipRest(notReady)
	return nil
}

func scenarioTask7(ctx context.Context, g *grading) error {
	var out [2]*results.Scenario
	for i, with := range []bool{false, true} {
		g.logf("  dead dependency for 10 s, service at 100/s, %s%s ...", map[bool]string{true: "with the breaker", false: "without a breaker"}[with],
			g.runner().clock())
		o, b := task7Settings(with)
		sc, err := g.runner().scenario(ctx, o, b)
		if err != nil {
			return err
		}
		g.doc.Scenarios = append(g.doc.Scenarios, sc)
		g.doc.Runs = append(g.doc.Runs, sc.Run)
		g.logf("    in flight at most %d, heap at most %.0f MB, calls to the dead dependency %d, recovered after %.2f s",
			sc.InFlightMax, sc.HeapMaxMB, sc.DependencyCallsDead, sc.RecoveredS)
		out[i] = sc
	}
	checkTask7(g, out[0], out[1])
	_, b := task7Settings(true)
	return g.checkCost(ctx, task7CheckCost, vsession.CostRequest{Breaker: b}, decisionCostBudget,
		"10,000 calls a second, the lesson's example of a large service, would then take one whole core")
}

// task7Runs is what task 7's scenario checks judge: the dead-dependency
// scenario without a breaker and with the graded one.
type task7Runs struct{ without, with *results.Scenario }

// task7Checks are task 7's scenario checks, in the order they are
// recorded.
var task7Checks = []checkDef[task7Runs]{
	{"breaker: calls to the dead dependency stop quickly", 2, judgeTask7DeadCalls},
	{"breaker: the service's in-flight count stays small", 1, judgeTask7InFlight},
	{"breaker: clients get fast failures instead of 10 s waits", 1, judgeTask7FastFailures},
	{"breaker: it closes soon after the dependency recovers", 1, judgeTask7Recovery},
	{"breaker: no trial call before the cooldown has passed", 1, judgeTask7Trials},
}

// checkTask7 records task7Checks, judged on the scenario without and with
// the breaker.
func checkTask7(g *grading, without, with *results.Scenario) {
	judgeAll(g, task7Checks, task7Runs{without, with})
}

func judgeTask7DeadCalls(r task7Runs) (results.Check, bool, *results.Run) {
	without, with := r.without, r.with
	return results.Check{
		Message: fmt.Sprintf("%d calls reached the dead dependency (without a breaker: %d); want ≤ %d: the window of %d, the %d calls already out before the first slow call was reported, and one trial per cooldown",
			with.DependencyCallsDead, without.DependencyCallsDead, task7DeadCallsMax, task7Window, int(task7Rate*task7SlowCall.Seconds())),
		Measured: map[string]float64{"dependency_calls_dead": float64(with.DependencyCallsDead), "without_breaker": float64(without.DependencyCallsDead)},
		Expected: map[string]float64{"dependency_calls_dead_max": task7DeadCallsMax},
	}, with.DependencyCallsDead <= task7DeadCallsMax && with.DependencyCallsDead > 0, with.Run
}

func judgeTask7InFlight(r task7Runs) (results.Check, bool, *results.Run) {
	without, with := r.without, r.with
	return results.Check{
		Message: fmt.Sprintf("at most %d requests in flight in the service, heap %.0f MB (without a breaker: %d in flight, %.0f MB; Little's Law: 100/s × 10 s = 1,000); want ≤ %d",
			with.InFlightMax, with.HeapMaxMB, without.InFlightMax, without.HeapMaxMB, task7InFlightMax),
		Measured: map[string]float64{"in_flight_max": float64(with.InFlightMax), "heap_max_mb": with.HeapMaxMB, "without_in_flight_max": float64(without.InFlightMax)},
		Expected: map[string]float64{"in_flight_max": task7InFlightMax},
	}, with.InFlightMax <= task7InFlightMax, with.Run
}

func judgeTask7FastFailures(r task7Runs) (results.Check, bool, *results.Run) {
	without, with := r.without, r.with
	fast, err := with.Run.QuantileMS(results.OutcomeUnavailable, 99)
	n503 := with.Run.Counts[results.OutcomeUnavailable]
	deadRequests := int64(task7Rate * task7DeadFor.Seconds())
	slowOther, _ := without.Run.QuantileMS(results.OutcomeOther, 50)
	return results.Check{
		Message: fmt.Sprintf("%d requests failed fast with 503, p99 %.1f ms; want at least half of the %d sent while the dependency was dead, with p99 ≤ %.0f ms (without a breaker they failed after a median of %.1f s)",
			n503, fast, deadRequests, task7FastFailMS, slowOther/1000),
		Measured: map[string]float64{"fast_failures": float64(n503), "p99_fast_fail_ms": fast, "without_median_failure_ms": slowOther},
		Expected: map[string]float64{"fast_failures_min": float64(deadRequests / 2), "p99_fast_fail_ms_max": task7FastFailMS},
	}, err == nil && n503 >= deadRequests/2 && fast <= task7FastFailMS, with.Run
}

func judgeTask7Recovery(r task7Runs) (results.Check, bool, *results.Run) {
	with := r.with
	return results.Check{
		Message: fmt.Sprintf("the service answered 90%% of its clients again %.2f s after the dependency recovered; want ≤ %.0f s: one cooldown (%s) for the next trial, and the trial itself",
			with.RecoveredS, task7RecoverMax.Seconds(), task7Cooldown),
		Measured: map[string]float64{"recovered_s": with.RecoveredS}, Expected: map[string]float64{"recovered_s_max": task7RecoverMax.Seconds()},
	}, with.RecoveredS >= 0 && with.RecoveredS <= task7RecoverMax.Seconds(), with.Run
}

func judgeTask7Trials(r task7Runs) (results.Check, bool, *results.Run) {
	with := r.with
	trials, early, why := task7Trials(with)
	return results.Check{
		Message: fmt.Sprintf("%s; want every call the dead dependency got after the breaker first refused one to have been let through at least one cooldown (%s, less %v of slack) after that refusal or the trial before it",
			why, task7Cooldown, task7TrialSlack),
		Measured: map[string]float64{"trials": float64(trials), "early_trials": float64(early), "first_refusal_s": with.FirstRefusalS},
		Expected: map[string]float64{"early_trials": 0},
	}, with.FirstRefusalS >= 0 && early == 0, with.Run
}

// task7Trials reads the dead dependency's record of the scenario with a
// breaker: how many calls the breaker let through after it first refused
// one (its trials), how many of those came less than a cooldown (less
// task7TrialSlack) after the first refusal or the trial before, and a
// sentence that says so.
func task7Trials(sc *results.Scenario) (trials, early int, why string) {
	if sc.FirstRefusalS < 0 {
		return 0, 0, "the breaker never refused a call: it never opened"
	}
	last := sc.FirstRefusalS
	shortest := -1.0
	for _, at := range sc.DeadCallsAllowedS {
		if at <= sc.FirstRefusalS {
			continue // let through before the breaker opened
		}
		trials++
		gap := at - last
		if shortest < 0 || gap < shortest {
			shortest = gap
		}
		// To the nanosecond, as the harness recorded it.
		if time.Duration(math.Round(gap*1e9)) < task7Cooldown-task7TrialSlack {
			early++
		}
		last = at
	}
	switch {
	case trials == 0:
		why = fmt.Sprintf("the breaker first refused a call %.2f s in and let no call through to the dead dependency after that", sc.FirstRefusalS)
	case early == 0:
		why = fmt.Sprintf("%d trial calls reached the dead dependency, the closest %.2f s after the refusal or trial before", trials, shortest)
	default:
		why = fmt.Sprintf("%d of the %d calls the breaker let through to the dead dependency after first refusing one (%.2f s in) came early, the earliest %.3f s after the refusal or trial before",
			early, trials, sc.FirstRefusalS, shortest)
	}
	return trials, early, why
}
