package grader

import (
	"slices"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// task7Hist encodes latencies in milliseconds, count times each, as the
// load generator encodes a run's histograms (microseconds, 1 µs to 60 s, 3
// significant figures).
func task7Hist(t *testing.T, latencies map[float64]int64) string {
	t.Helper()
	h := hdr.New(1, 60_000_000, 3)
	for ms, n := range latencies {
		require.NoError(t, h.RecordValues(int64(ms*1000), n))
	}
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	require.NoError(t, err)
	return string(b)
}

// task7Scenario is one run of the dead-dependency scenario (100/s for
// 25 s, the dependency dead from 5 s to 15 s): deadCalls calls reached the
// dependency while it was dead, inFlight requests were in the service at
// the busiest, n503 clients were refused with 503 in fastMS (p99) and the
// service answered 90% again recovered seconds after the dependency came
// back (-1: never).
func task7Scenario(t *testing.T, breaker bool, deadCalls, inFlight int64, heapMB float64, n503 int64, fastMS, recovered float64) *results.Scenario {
	t.Helper()
	name := map[bool]string{true: "with a breaker", false: "without a breaker"}[breaker]
	run := &results.Run{
		Name: name, OfferedRPS: task7Rate, DurationS: 25, Issued: 2500, Expected: 2500, Reliable: true,
		Counts:     map[results.Outcome]int64{results.OutcomeUnavailable: n503},
		Histograms: map[results.Outcome]string{},
	}
	// The calls that reached the dead dependency hang for the 10 s call
	// timeout and fail with a 502 ("other"); the rest are answered.
	run.Counts[results.OutcomeOther] = deadCalls
	run.Counts[results.OutcomeOK] = 2500 - n503 - deadCalls
	run.OK = run.Counts[results.OutcomeOK]
	run.Histograms[results.OutcomeOther] = task7Hist(t, map[float64]int64{10_002: deadCalls})
	run.Histograms[results.OutcomeOK] = task7Hist(t, map[float64]int64{6: run.OK})
	if n503 > 0 {
		// A few refusals at fastMS, the rest at about a millisecond.
		run.Histograms[results.OutcomeUnavailable] = task7Hist(t, map[float64]int64{1.2: n503 - n503/50 - 1, fastMS: n503/50 + 1})
	}
	sc := &results.Scenario{
		Name: name, Breaker: breaker, Run: run, DeadAtS: 5, DeadForS: 10, SlowCallMS: 100, CallTimeoutS: 10,
		DependencyCallsDead: deadCalls, InFlightMax: inFlight, HeapMaxMB: heapMB, RecoveredS: recovered,
		FirstRefusalS: -1,
	}
	if breaker && n503 > 0 {
		// As the reference: the calls before the breaker opened 0.25 s
		// into the dead spell, then up to four trials, each 2.1 s after
		// the one before (the 2 s cooldown from the reopening, which
		// comes 100 ms after a trial when it is reported slow).
		trials := min(deadCalls, 4)
		withTrials(sc, 5.25, deadCalls-trials, task7Cooldown.Seconds()+0.1, int(trials))
	}
	return sc
}

// withTrials rewrites sc's record of the calls the dead dependency got:
// the breaker first refused a call firstRefusal seconds in, before
// which it had let through before calls (spread over the 0.25 s before),
// and after which it let through trials calls, every gap seconds.
func withTrials(sc *results.Scenario, firstRefusal float64, before int64, gap float64, trials int) {
	sc.FirstRefusalS = firstRefusal
	sc.DeadCallsAllowedS = nil
	for i := range before {
		sc.DeadCallsAllowedS = append(sc.DeadCallsAllowedS, firstRefusal-0.25+0.25*float64(i)/float64(before))
	}
	for i := range trials {
		sc.DeadCallsAllowedS = append(sc.DeadCallsAllowedS, firstRefusal+gap*float64(i+1))
	}
}

// task7Without is the service without a breaker as measured on a 2-core
// machine: every one of the 1,000 requests sent while the dependency was
// dead reached it and hung for the 10 s timeout (Little's Law: 100/s ×
// 10 s = 1,000 in flight); it answers again at once when the dependency
// does.
func task7Without(t *testing.T) *results.Scenario {
	return task7Scenario(t, false, 1000, 1000, 80, 0, 0, 0)
}

const (
	task7CheckCalls    = "breaker: calls to the dead dependency stop quickly"
	task7CheckInFlight = "breaker: the service's in-flight count stays small"
	task7CheckFast     = "breaker: clients get fast failures instead of 10 s waits"
	task7CheckRecover  = "breaker: it closes soon after the dependency recovers"
	task7CheckTrials   = "breaker: no trial call before the cooldown has passed"
)

func TestTask7ScenarioChecks(t *testing.T) {
	all := []string{task7CheckCalls, task7CheckInFlight, task7CheckFast, task7CheckRecover, task7CheckTrials}
	tests := []struct {
		name string
		with func(t *testing.T) *results.Scenario
		fail []string // the checks that must fail; the others pass
	}{
		// The reference on a 2-core machine: 25 calls reached the dead
		// dependency (the ~10 out before the first slow call was
		// reported, ~11 more until more than half of the window of 20
		// had failed, one trial per cooldown), 25 in flight, 1,039
		// refusals with a p99 of 1.8 ms, closed 0.75 s after recovery.
		{"the reference", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 25, 25, 5.9, 1039, 1.8, 0.75)
		}, nil},
		// The same at the edges of every bound (a p99 just under 50 ms:
		// the histogram keeps 3 significant figures).
		{"the reference on a busy machine", func(t *testing.T) *results.Scenario {
			sc := task7Scenario(t, true, task7DeadCallsMax, task7InFlightMax, 9, 500, task7FastFailMS-0.1, task7RecoverMax.Seconds())
			// Trials at the end of the slack; a call let through just
			// before the first refusal counts as no trial.
			withTrials(sc, 5.25, task7DeadCallsMax-4, (task7Cooldown - task7TrialSlack).Seconds(), 4)
			return sc
		}, nil},
		// The exercise's stub, or any breaker that never opens: Allow lets
		// every call through, so the service behaves as without one, and no
		// client is refused at all (no 503, no histogram of them).
		{"a breaker that never opens", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 1000, 1000, 80, 0, 0, 0)
		}, []string{task7CheckCalls, task7CheckInFlight, task7CheckFast, task7CheckTrials}},
		// wrong/task7/cumulative-window: outcomes are counted since the
		// breaker was made, so the 500 successes of the first 5 s must be
		// outnumbered before it opens: about 510 calls reach the dead
		// dependency (5 s at 100/s, plus the 10 out when the 501st failure
		// is reported) and all of them hang in the service for 10 s. Once
		// open it refuses the ~620 clients of the next 6 s and closes at
		// its third trial, 1.3 s after recovery.
		{"a window that never forgets", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 510, 515, 42, 620, 1.6, 1.3)
		}, []string{task7CheckCalls, task7CheckInFlight}},
		// wrong/task7/unlimited-trials: each half-open lets every call
		// through until the first trial is reported slow, 100/s × 100 ms
		// = 10 calls, five times in the 10 s dead: 25 + 5 × 10 = 75
		// calls to the dead dependency, all hanging for 10 s; the second
		// to tenth of each group come 10 ms after the one before.
		{"unlimited trials", func(t *testing.T) *results.Scenario {
			sc := task7Scenario(t, true, 75, 75, 8, 960, 1.7, 0.25)
			withTrials(sc, 5.25, 25, 2.1, 5)
			for _, at := range slices.Clone(sc.DeadCallsAllowedS[25:]) {
				for i := range 9 {
					sc.DeadCallsAllowedS = append(sc.DeadCallsAllowedS, at+0.01*float64(i+1))
				}
			}
			slices.Sort(sc.DeadCallsAllowedS)
			return sc
		}, []string{task7CheckCalls, task7CheckInFlight, task7CheckTrials}},
		// A cooldown of half the setting (a unit slip, or the cooldown
		// counted from the first failure of the window): trials every
		// 1.1 s, nine of them in the dead spell, 30 calls in all, which
		// the count of calls lets pass; the dependency's record does not.
		{"trials every half cooldown", func(t *testing.T) *results.Scenario {
			sc := task7Scenario(t, true, 30, 30, 6, 950, 1.7, 0.3)
			withTrials(sc, 5.25, 21, task7Cooldown.Seconds()/2+0.1, 9)
			return sc
		}, []string{task7CheckTrials}},
		// Two trials at once now and then (HalfOpenMax ignored when two
		// callers race): the second comes a millisecond after the first.
		{"two trials at once", func(t *testing.T) *results.Scenario {
			sc := task7Scenario(t, true, 26, 26, 6, 1030, 1.7, 0.7)
			sc.DeadCallsAllowedS = append(sc.DeadCallsAllowedS, sc.DeadCallsAllowedS[len(sc.DeadCallsAllowedS)-2]+0.001)
			slices.Sort(sc.DeadCallsAllowedS)
			return sc
		}, []string{task7CheckTrials}},
		// Allow inverted (refuses while closed, lets through while open):
		// the service refuses its clients from the start and never calls
		// the dependency, dead or alive, so it never answers 90% again.
		{"a breaker that refuses everything", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 0, 3, 5, 2500, 1.1, -1)
		}, []string{task7CheckCalls, task7CheckRecover}},
		// A blocking breaker: a refused caller waits for the cooldown to
		// end, then is refused if no trial slot is free. The dependency
		// is spared, but every refusal takes up to the 2 s cooldown (p99
		// 1.98 s) and the waiting clients pile up in the service: 100/s
		// × about 1 s = 100, up to 200 at the end of each cooldown.
		{"refusals wait for the cooldown", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 25, 198, 12, 1010, 1980, 0.5)
		}, []string{task7CheckInFlight, task7CheckFast}},
		// wrong/task7/never-half-opens (and refusal-restarts-cooldown, whose
		// 100 refusals a second keep restarting the cooldown): once open it
		// fails fast for ever, so the service never answers again after
		// the dependency recovers. 1,000 more refusals than the reference.
		{"never half-opens", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 21, 21, 5.5, 1980, 1.5, -1)
		}, []string{task7CheckRecover}},
		// A cooldown that doubles at every failed trial (2 s, 4 s, 8 s):
		// opened at 5.2 s, trials at 7.2 s and 11.3 s fail, the next is at
		// 19.4 s, 4.4 s after the dependency came back.
		{"a cooldown that doubles", func(t *testing.T) *results.Scenario {
			return task7Scenario(t, true, 23, 23, 5.8, 1420, 1.6, 4.4)
		}, []string{task7CheckRecover}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			with := tt.with(t)
			for _, name := range all {
				c := judged(t, 7, name, func(g *grading) { checkTask7(g, task7Without(t), with) })
				want := wantStatus(name, tt.fail)
				assert.Equal(t, want, c.Status, "%s: %s", name, c.Message)
				assert.Equal(t, "with a breaker", c.Run, name)
			}
		})
	}
}

// A scenario the load generator could not keep to its schedule is not a
// verdict on the breaker, even one that looks broken.
func TestTask7UnreliableScenarioIsNotJudged(t *testing.T) {
	with := task7Scenario(t, true, 1000, 1000, 80, 0, 0, 0)
	with.Run.Reliable, with.Run.Warnings = false, []string{"the load generator fell behind"}
	g := &grading{task: tasks[6], doc: &results.Document{}}
	checkTask7(g, task7Without(t), with)
	require.Len(t, g.doc.Checks, len(task7Planned())-1, "every scenario check (the cost check is recorded apart)")
	for _, c := range g.doc.Checks {
		assert.Equal(t, results.StatusError, c.Status, "%s: %s", c.Name, c.Message)
		assert.Contains(t, c.Message, "not judged")
	}
}
