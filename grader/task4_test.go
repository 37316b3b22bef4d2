package grader

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/results"
	"ratelab/scenario"
)

// Tests of the logic of task 4's flood checks: each feeds checkTask4Storms
// or checkTask4Amplify the storms a wrong retry loop produces, and the
// reference's as a 2-core machine measured them, which must pass.

// The names of task 4's storm checks, as task4Planned gives them.
const (
	t4Fast     = "storm, full jitter: done about as fast as simulated"
	t4Few      = "storm, full jitter: attempts about as few as simulated"
	t4Spread   = "storm, full jitter: no lockstep waves"
	t4Slow     = "storm, no jitter: as slow as the simulated lockstep"
	t4Waves    = "storm, no jitter: sends come in lockstep waves"
	t4All      = "storms: every client eventually succeeds"
	t4OnAtt    = "storms: OnAttempt is called before every attempt"
	t4RA       = "storm: honouring a spread Retry-After beats jitter alone"
	t4Multiply = "amplifier: immediate retries multiply the load"
	t4Budget   = "amplifier: a 10% budget keeps retries near the offered load"
)

// The sends per 250 ms bin of the reference's four storms, as measured on
// a 2-core machine (reports/testdata/task4.json), in task4Storms order.
var (
	t4JitterBins     = []int64{1178, 316, 183, 137, 105, 63, 58, 50, 68, 36, 35, 22, 16, 23, 24, 17, 10, 9, 11, 13, 8, 5, 1, 3, 3, 1, 2, 1, 1, 2, 1}
	t4RABins         = []int64{400, 0, 0, 0, 16, 13, 23, 24, 20, 26, 15, 20, 16, 25, 18, 16, 27, 22, 15, 22, 15, 18, 6, 17, 4}
	t4NoJitterRABins = []int64{400, 0, 0, 0, 21, 20, 26, 12, 21, 28, 15, 18, 18, 18, 17, 24, 19, 15, 29, 19, 15, 11, 12, 15, 3}
)

// t4LockstepBins are the no-jitter storm's sends as measured: the opening
// burst, then a wave at every backoff (0.1, 0.2, ... s, every 5 s once
// capped), each 24 smaller as the 8 slots and the line of 16 take their
// share, and silence between the waves.
func t4LockstepBins() []int64 {
	bins := make([]int64, 126)
	copy(bins, []int64{776, 368, 237, 115})
	for at, wave := range map[int]int64{6: 328, 12: 304, 25: 280, 45: 256, 65: 232, 85: 208, 105: 184, 125: 160} {
		bins[at] = wave
	}
	return bins
}

// storm4 is one storm as the storm binary reports it: the sends histogram
// and Attempts come from OnAttempt, ServerReceived from the server.
func storm4(row int, lastDone float64, succeeded int64, bins []int64) *results.Storm {
	var sent int64
	for _, b := range bins {
		sent += b
	}
	bin := 250 * time.Millisecond
	return &results.Storm{
		Name: task4Storms[row].name, Kind: "storm", Jitter: task4Storms[row].jitter, HonorRetryAfter: task4Storms[row].honor,
		MaxTries: task4Tries, BaseMS: 100, CapMS: 5000, Clients: task4Clients,
		Attempts: sent, ServerReceived: sent, Succeeded: succeeded, Failed: task4Clients - succeeded,
		LastDoneS: lastDone, IdealS: 5, BinMS: 250, SendsPerBin: slices.Clone(bins),
		EmptyShare: scenario.EmptyShare(bins, int(time.Second/bin), int(time.Duration(lastDone*float64(time.Second))/bin)+1),
	}
}

// task4ReferenceStorms are the reference's four storms as measured.
func task4ReferenceStorms() []*results.Storm {
	return []*results.Storm{
		storm4(0, 7.710, 400, t4JitterBins),
		storm4(1, 31.696, 264, t4LockstepBins()),
		storm4(2, 6.158, 400, t4RABins),
		storm4(3, 6.157, 400, t4NoJitterRABins),
	}
}

// task4Sims simulates the storms with and without jitter as stormTask4
// does (a few tens of milliseconds).
func task4Sims(t *testing.T) (jit, lock stormForecast) {
	t.Helper()
	jit, err := simStorm(shedConfig(), task4Clients, task4Tries, task4Base, task4Cap, true)
	require.NoError(t, err)
	lock, err = simStorm(shedConfig(), task4Clients, task4Tries, task4Base, task4Cap, false)
	require.NoError(t, err)
	return jit, lock
}

// task4Checks returns the checks judge records, by name.
func task4Checks(t *testing.T, judge func(g *grading)) map[string]results.Check {
	t.Helper()
	require.Equal(t, "task4", tasks[3].ID)
	g := &grading{task: tasks[3], doc: &results.Document{}}
	judge(g)
	out := map[string]results.Check{}
	for _, c := range g.doc.Checks {
		out[c.Name] = c
	}
	return out
}

// wantTask4Statuses asserts that the checks in fail failed (and counts them as
// shown to fail) and those in pass passed.
func wantTask4Statuses(t *testing.T, checks map[string]results.Check, fail, pass []string) {
	t.Helper()
	for _, name := range fail {
		c, ok := checks[name]
		if assert.True(t, ok, "no check %q recorded", name) {
			assert.Equal(t, results.StatusFail, c.Status, "%s: %s", name, c.Message)
			shownFailing(t, "task4", c)
		}
	}
	for _, name := range pass {
		c, ok := checks[name]
		if assert.True(t, ok, "no check %q recorded", name) {
			assert.Equal(t, results.StatusPass, c.Status, "%s: %s", name, c.Message)
		}
	}
}

func TestCheckTask4Storms(t *testing.T) {
	simJit, simLock := task4Sims(t)
	// The no-cap client's storm, simulated: its median time.
	noCap, err := simStorm(shedConfig(), task4Clients, task4Tries, task4Base, 1<<62, true)
	require.NoError(t, err)
	stormNames := []string{t4Fast, t4Few, t4Spread, t4Slow, t4Waves, t4All, t4OnAtt, t4RA}

	tests := []struct {
		name       string
		storms     func() []*results.Storm
		fail, pass []string // pass nil: every check not in fail passes
	}{
		{"the reference as measured", task4ReferenceStorms, nil, nil},
		// A jittered storm at the simulation's 95th percentile, on a
		// machine a fifth slower: still a pass.
		{"the reference at a slow seed on a slow machine", func() []*results.Storm {
			s := task4ReferenceStorms()
			s[0].LastDoneS = 1.19 * simJit.HighS
			s[0].ServerReceived = int64(1.09 * simJit.HighAttempts)
			s[0].Attempts = s[0].ServerReceived
			return s
		}, nil, nil},
		// Jitter never applied (BackoffDelay returns the ceiling whatever
		// its jitter argument): the full-jitter storm is the lockstep storm,
		// as the no-jitter row measured it.
		{"jitter never applied", func() []*results.Storm {
			s := task4ReferenceStorms()
			lock := storm4(0, 31.696, 264, t4LockstepBins())
			lock.Jitter = true
			s[0] = lock
			s[2] = storm4(2, 6.158, 400, t4RABins) // the spread Retry-After needs no jitter
			return s
		}, []string{t4Fast, t4Few, t4Spread, t4All}, []string{t4Slow, t4Waves, t4OnAtt, t4RA}},
		// Jitter always applied (the jitter flag ignored the other way):
		// the no-jitter storm is a jittered storm, as measured.
		{"jitter always applied", func() []*results.Storm {
			s := task4ReferenceStorms()
			s[1] = storm4(1, 7.710, 400, t4JitterBins)
			s[1].Jitter = false
			return s
		}, []string{t4Slow, t4Waves}, []string{t4Fast, t4Few, t4Spread, t4All, t4OnAtt, t4RA}},
		// The backoff's cap ignored: waits of 6.4, 12.8, 25.6 s for the
		// clients that still fail late. The simulation of that client
		// gives a median last client as below, with about as many
		// attempts as the reference.
		{"backoff never capped", func() []*results.Storm {
			s := task4ReferenceStorms()
			s[0].LastDoneS = noCap.MedianS
			s[0].ServerReceived = int64(noCap.MedianAttempts)
			s[0].Attempts = s[0].ServerReceived
			return s
		}, []string{t4Fast}, []string{t4Few, t4OnAtt}},
		// OnAttempt called only before retries, where the loop waits: the
		// clients report 400 attempts fewer than the server counted, and
		// the sends histogram misses the opening burst.
		{"OnAttempt only before retries", func() []*results.Storm {
			s := task4ReferenceStorms()
			for _, st := range s {
				st.Attempts -= task4Clients
				st.SendsPerBin[0] -= task4Clients
			}
			return s
		}, []string{t4OnAtt}, []string{t4Fast, t4Few, t4Spread, t4Slow, t4Waves, t4All, t4RA}},
		// OnAttempt called twice for every attempt (once in the loop, once
		// in a helper that sends): twice the attempts the server counted.
		{"OnAttempt twice per attempt", func() []*results.Storm {
			s := task4ReferenceStorms()
			for _, st := range s {
				st.Attempts *= 2
			}
			return s
		}, []string{t4OnAtt}, nil},
		// Retry-After ignored: the storm against the server that spreads
		// it is a plain jitter storm (the measured one, 7.7 s), and
		// without jitter a lockstep storm in which 136 clients give up.
		// A jitter storm beats the simulation's median about half the
		// time, so this one is a lucky seed (7.0 s): its 2400 attempts,
		// six a client, still give it away.
		{"Retry-After ignored", func() []*results.Storm {
			s := task4ReferenceStorms()
			s[2] = storm4(2, 7.0, 400, t4JitterBins)
			s[3] = storm4(3, 31.696, 264, t4LockstepBins())
			return s
		}, []string{t4All, t4RA}, []string{t4Fast, t4Few, t4Spread, t4Slow, t4Waves, t4OnAtt}},
		// Only 429 retried, not the shedding server's 503: in every storm
		// the 8 slots and the line of 16 serve 24 clients in 0.3 s and the
		// other 376 give up at once, after one attempt each.
		{"503 never retried", func() []*results.Storm {
			s := make([]*results.Storm, 4)
			for i := range s {
				s[i] = storm4(i, 0.3, 24, []int64{400})
			}
			return s
		}, []string{t4Fast, t4Few, t4Slow, t4Waves, t4All, t4RA}, []string{t4OnAtt}},
		// The jitter multiplied by time.Second once too often
		// (rand.N(ceiling) × time.Second): every jittered wait is years
		// long, so the jittered storms hit the 150 s limit after the first
		// 24 clients, and every other call ends there with ctx.
		{"jitter in the wrong unit", func() []*results.Storm {
			s := task4ReferenceStorms()
			for _, i := range []int{0, 2} {
				s[i] = storm4(i, task4StormLimit.Seconds(), 24, []int64{400})
				s[i].TimedOut = true
			}
			return s
		}, []string{t4Fast, t4Few, t4All, t4RA}, []string{t4Slow, t4Waves, t4OnAtt}},
		// A request without a body refused for want of GetBody (which only
		// a request with a body needs): every call fails at once and sends
		// nothing, in every storm.
		{"GET refused for want of GetBody", func() []*results.Storm {
			s := make([]*results.Storm, 4)
			for i := range s {
				s[i] = storm4(i, 0.001, 0, nil)
			}
			return s
		}, []string{t4Few, t4Spread, t4Slow, t4Waves, t4All}, []string{t4OnAtt}},
	}
	// The bins give the empty shares the storm binary computed from them.
	ref := task4ReferenceStorms()
	for i, want := range []float64{0, 0.9344262295081968, 0, 0} {
		assert.InDelta(t, want, ref[i].EmptyShare, 1e-9, ref[i].Name)
	}
	assert.Equal(t, []int64{2402, 3448, 778, 776}, []int64{ref[0].ServerReceived, ref[1].ServerReceived, ref[2].ServerReceived, ref[3].ServerReceived})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks := task4Checks(t, func(g *grading) { checkTask4Storms(g, tt.storms(), simJit, simLock) })
			require.Len(t, checks, len(stormNames), "checks recorded: %v", checks)
			pass := tt.pass
			if pass == nil {
				for _, n := range stormNames {
					if !slices.Contains(tt.fail, n) {
						pass = append(pass, n)
					}
				}
			}
			wantTask4Statuses(t, checks, tt.fail, pass)
		})
	}
}

// t4Samples are the server's received counts every 500 ms from 1 ms, up to
// until seconds, as received gives them.
func t4Samples(until float64, received func(i int, ts float64) int64) []results.Sample {
	var out []results.Sample
	for i := 0; 0.001+0.5*float64(i) <= until; i++ {
		ts := 0.001 + 0.5*float64(i)
		out = append(out, results.Sample{TS: ts, Stats: results.ServerStats{Received: received(i, ts)}})
	}
	return out
}

// amplify4 is one amplifier row: 1,000 calls at 100/s for 10 s.
func amplify4(name string, received int64, s []results.Sample) *results.Storm {
	return &results.Storm{
		Name: name, Kind: "amplify", Clients: 1000, OfferedRPS: 100, DurationS: 10, MaxTries: 4,
		Attempts: received, ServerReceived: received, SampleEveryMS: 500, ServerSamples: s,
	}
}

// The reference's amplifier rows as measured (reports/testdata/task4.json):
// the server's received count at each 500 ms sample.
var (
	t4NaiveReceived  = []int64{0, 49, 99, 149, 200, 250, 300, 350, 400, 450, 547, 646, 793, 944, 1142, 1344, 1541, 1740, 1940, 2140, 2340, 2491, 2641, 2742, 2842, 2893, 2943, 2944, 2944}
	t4BudgetReceived = []int64{0, 50, 99, 149, 199, 249, 299, 349, 400, 450, 514, 568, 622, 678, 732, 788, 843, 899, 954, 1009, 1062, 1064, 1064}
)

func t4MeasuredSamples(counts []int64) []results.Sample {
	return t4Samples(float64(len(counts)-1)*0.5+0.001, func(i int, _ float64) int64 { return counts[i] })
}

func TestCheckTask4Amplify(t *testing.T) {
	refNaive := func() *results.Storm {
		return amplify4("amplifier 100/s, immediate retries ×3", 2944, t4MeasuredSamples(t4NaiveReceived))
	}
	refBudget := func() *results.Storm {
		s := amplify4("amplifier 100/s, backoff, jitter, 10% budget", 1064, t4MeasuredSamples(t4BudgetReceived))
		s.Budget, s.Jitter = 0.1, true
		return s
	}
	// Each call sent once and never again: the server receives the
	// offered 100/s throughout, and the line drains after the flood.
	once := func() *results.Storm {
		return amplify4("amplifier 100/s, immediate retries ×3", 1000, t4Samples(12, func(_ int, ts float64) int64 { return int64(100 * min(ts, 10)) }))
	}
	tests := []struct {
		name          string
		naive, budget func() *results.Storm
		fail          []string
	}{
		{"the reference as measured", refNaive, refBudget, nil},
		// Timeouts not retried (the loop asks the error whether a deadline
		// passed instead of asking ctx, and takes the client's 1 s timeout
		// for the caller's cancellation): no call is ever sent again.
		{"timeouts not retried", once, func() *results.Storm {
			s := once()
			s.Name, s.Budget, s.Jitter = "amplifier 100/s, backoff, jitter, 10% budget", 0.1, true
			return s
		}, []string{t4Multiply}},
		// The storm binary lost the server's samples: nothing to judge on.
		{"no samples", func() *results.Storm {
			s := refNaive()
			s.ServerSamples = nil
			return s
		}, refBudget, []string{t4Multiply}},
		// The budget ignored: backoff only delays the same three retries
		// of every call that times out (by at most 0.1 + 0.2 + 0.4 s), so
		// the server receives about what the immediate retries sent.
		{"budget ignored", refNaive, func() *results.Storm {
			s := refBudget()
			s.ServerReceived, s.Attempts = 2900, 2900
			return s
		}, []string{t4Budget}},
		// The budget asked before every attempt, the first included: once
		// its 10 retries are spent, only one call in ten (the 0.1 each
		// deposits) is sent at all, about 10 + 0.1 × 1000 attempts.
		{"budget spent on first attempts", refNaive, func() *results.Storm {
			s := refBudget()
			s.ServerReceived, s.Attempts = 110, 110
			return s
		}, []string{t4Budget}},
		// A budget that lets the retries reach a fifth of the traffic
		// (ratio 0.2 for 0.1): 1,200 attempts.
		{"twice the budget", refNaive, func() *results.Storm {
			s := refBudget()
			s.ServerReceived, s.Attempts = 1210, 1210
			return s
		}, []string{t4Budget}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks := task4Checks(t, func(g *grading) { checkTask4Amplify(g, tt.naive(), tt.budget()) })
			require.Len(t, checks, 2, fmt.Sprint(checks))
			var pass []string
			for _, n := range []string{t4Multiply, t4Budget} {
				if !slices.Contains(tt.fail, n) {
					pass = append(pass, n)
				}
			}
			wantTask4Statuses(t, checks, tt.fail, pass)
		})
	}
}

// The names above are the ones task 4 plans: a renamed check must not
// leave these tests judging nothing.
func TestTask4CheckNamesArePlanned(t *testing.T) {
	planned := map[string]bool{}
	for _, p := range task4Planned() {
		planned[p.name] = true
	}
	for _, n := range []string{t4Fast, t4Few, t4Spread, t4Slow, t4Waves, t4All, t4OnAtt, t4RA, t4Multiply, t4Budget} {
		assert.True(t, planned[n], "%q is not a planned check of task 4", n)
	}
}

// The names of task 4's checks from the server's record of each call.
const (
	t4Open  = "storms: no client has two attempts open at once (as the server saw)"
	t4Tries = "storms: no client sends more than MaxTries attempts (as the server saw)"
	t4Early = "storm, Retry-After honoured: no client comes back before the time the server gave it"
)

// task4Calls is the server's record of st's calls as a correct loop leaves
// it: one call per client, its attempts spread evenly over them, one open
// at a time; every return after a Retry-After of 1 s comes 3 ms past it
// (the reference's extra is uniform over a second: its smallest of 380 is
// a few milliseconds).
func task4Calls(st *results.Storm) *results.CallStats {
	cs := &results.CallStats{Capacity: fakegpu.CallCapacity}
	n := int64(st.Clients)
	for i := range st.Clients {
		a := st.ServerReceived / n
		if int64(i) < st.ServerReceived%n {
			a++
		}
		c := results.CallRecord{ID: scenario.StormCallID(i), Attempts: a, MaxOpen: 1, Gaps: a - 1}
		if a > 1 {
			c.MinGapMS = 0.2
			c.RetryAfterReturns, c.WorstRetryAfterS, c.WorstGapMS = a-1, 1, 1003
		}
		cs.Calls = append(cs.Calls, c)
	}
	return cs
}

func TestCheckTask4Calls(t *testing.T) {
	summarise := func(cs *results.CallStats) *results.CallSummary {
		return summariseCalls(cs, task4Cap, task4EarlyTolerance)
	}
	all := []string{t4Open, t4Tries, t4Early}
	tests := []struct {
		name string
		// change alters the calls of storm row (in task4Storms order); nil
		// leaves that storm without a record.
		row    int
		change func(st *results.Storm, cs *results.CallStats)
		fail   []string
	}{
		{"the reference", 0, func(*results.Storm, *results.CallStats) {}, nil},
		// Told 7 s, more than Cap: the contract caps it at 5 s.
		{"a header past Cap counts as Cap", 2, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[3].WorstRetryAfterS, cs.Calls[3].WorstGapMS = 7, 5010
		}, nil},
		// A loop that starts its wait when it sent a shed attempt.
		{"back within the tolerance", 3, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[3].WorstRetryAfterS, cs.Calls[3].WorstGapMS = 2, 1970
		}, nil},
		// The reference gives up after exactly MaxTries without jitter.
		{"exactly MaxTries", 1, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[0].Attempts, cs.Calls[1].Attempts = cs.Calls[0].Attempts+cs.Calls[1].Attempts-12, 12
		}, nil},
		// Hedging: one client sent its next attempt while the last waited
		// in line.
		{"a client hedges", 0, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[7].MaxOpen = 2
		}, []string{t4Open}},
		{"a client hedges without jitter", 1, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[399].MaxOpen = 3
		}, []string{t4Open}},
		// One try too many, where clients give up.
		{"MaxTries+1", 1, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[1].Attempts -= 13 - cs.Calls[0].Attempts
			cs.Calls[0].Attempts = 13
		}, []string{t4Tries}},
		// Retry-After ignored: back within the backoff.
		{"Retry-After ignored", 2, func(_ *results.Storm, cs *results.CallStats) {
			for i := range cs.Calls {
				cs.Calls[i].WorstGapMS = 80
			}
		}, []string{t4Early}},
		// Read a second short, by one client only, without jitter.
		{"Retry-After a second short", 3, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[5].WorstRetryAfterS, cs.Calls[5].WorstGapMS = 3, 2004
		}, []string{t4Early}},
		// A loop that drops the request's headers on retries: the server
		// cannot tell its calls apart, and must not pass it for that.
		{"retries without the call's id", 0, func(_ *results.Storm, cs *results.CallStats) {
			for i := range cs.Calls {
				cs.Calls[i].Attempts = 1
			}
		}, all},
		{"no record at all", 3, nil, all},
		// Each attempt a call of its own: more calls than clients.
		{"a new id every attempt", 2, func(_ *results.Storm, cs *results.CallStats) {
			cs.Calls[0].Attempts--
			cs.Calls = append(cs.Calls, results.CallRecord{ID: "x", Attempts: 1, MaxOpen: 1})
		}, all},
	}
	simJit, simLock := task4Sims(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			storms := task4ReferenceStorms()
			for i, st := range storms {
				cs := task4Calls(st)
				switch {
				case i != tt.row:
				case tt.change == nil:
					cs = nil // the server recorded nothing
				default:
					tt.change(st, cs)
				}
				st.Calls = summarise(cs)
			}
			checks := task4Checks(t, func(g *grading) {
				checkTask4Storms(g, storms, simJit, simLock)
				checkTask4Calls(g, storms)
			})
			var pass []string
			for _, name := range all {
				if !slices.Contains(tt.fail, name) {
					pass = append(pass, name)
				}
			}
			wantTask4Statuses(t, checks, tt.fail, pass)
			for _, c := range tt.fail {
				t.Logf("%s: %s", c, checks[c].Message)
			}
		})
	}
}
