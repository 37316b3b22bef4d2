package grader

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/results"
)

// judged runs one judging function on a fresh grading of task and returns
// the check it records under name.
func judged(t *testing.T, task int, name string, judge func(g *grading)) results.Check {
	t.Helper()
	g := &grading{task: tasks[task-1], doc: &results.Document{}}
	judge(g)
	for _, c := range g.doc.Checks {
		if c.Name == name {
			shownFailing(t, g.task.ID, c)
			return c
		}
	}
	require.Failf(t, "no check", "no check %q recorded", name)
	return results.Check{}
}

// wantStatus is the status a check called name should have in a test that
// expects the checks in fail to fail and every other to pass.
func wantStatus(name string, fail []string) results.Status {
	if slices.Contains(fail, name) {
		return results.StatusFail
	}
	return results.StatusPass
}

func bucketConfig(rate, burst float64) fakegpu.Config {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode, cfg.BucketRate, cfg.BucketBurst = fakegpu.ModeBucket, rate, burst
	return cfg
}

func TestCheckRefusals(t *testing.T) {
	ok := results.Refusals{Shed: results.RefusalCounts{Judged: 464}}
	tests := []struct {
		name   string
		r      *results.Refusals
		need   string
		status results.Status
	}{
		{"every shed 503 right", &ok, results.RefusalShed, results.StatusPass},
		{"one wrong", &results.Refusals{Shed: results.RefusalCounts{Judged: 464, Bad: 1},
			Bad: []results.BadRefusal{{Kind: "shed", Status: 503, Header: "0", WantMinS: 1, WantMaxS: 1, Why: "the line of 16 this request saw drains in 200ms"}}},
			results.RefusalShed, results.StatusFail},
		{"a wrong 429 beside right 503s", &results.Refusals{Shed: results.RefusalCounts{Judged: 10}, Limited: results.RefusalCounts{Judged: 5, Bad: 2}},
			results.RefusalShed, results.StatusFail},
		{"none of the kind the flood needs", &ok, results.RefusalExpired, results.StatusFail},
		{"refusals only to clients that had gone", &results.Refusals{Expired: results.RefusalCounts{Gone: 30}}, results.RefusalExpired, results.StatusFail},
		{"no record at all", nil, results.RefusalShed, results.StatusFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Exact accounting: judged even when the generator lagged.
			run := &results.Run{Name: "shed 240/s", Reliable: false, ServerFinal: results.ServerStats{Refusals: tt.r}}
			c := judged(t, 2, "x", func(g *grading) { g.checkRefusals("x", run, fakegpu.DefaultConfig(), tt.need) })
			assert.Equal(t, tt.status, c.Status, c.Message)
			assert.Equal(t, "shed 240/s", c.Run)
		})
	}
	c := judged(t, 2, "x", func(g *grading) {
		g.checkRefusals("x", &results.Run{ServerFinal: results.ServerStats{Refusals: &results.Refusals{Limited: results.RefusalCounts{Judged: 1, Bad: 1},
			Bad: []results.BadRefusal{{Kind: "limited", Status: 429, Header: "1", WantMinS: 2, WantMaxS: 2, Why: "the limiter's wait for this request was 1.3s"}}}}}, fakegpu.DefaultConfig())
	})
	assert.Contains(t, c.Message, `a 429 (limited) with Retry-After "1", want 2: the limiter's wait for this request was 1.3s`)
}

func clientsRun(counts ...results.ClientCount) *results.Run {
	return &results.Run{Name: "100 clients", Reliable: true, ServerFinal: results.ServerStats{Clients: &results.ClientStats{Clients: counts}}}
}

func TestCheckOwnBuckets(t *testing.T) {
	cfg := bucketConfig(0.4, 2)
	within := func(key string) results.ClientCount {
		// 2 + 0.4 × 2.99 = 3.196: three admissions fit.
		return results.ClientCount{Key: key, Requests: 6, Admitted: 3, Limited: 3, SpanS: 2.99}
	}
	tests := []struct {
		name string
		run  *results.Run
		pass bool
	}{
		{"every client within its bound", clientsRun(within("client-0"), within("client-1")), true},
		{"one admission too many", clientsRun(within("client-0"), results.ClientCount{Key: "client-1", Admitted: 4, Limited: 2, SpanS: 2.99}), false},
		{"a client the server never saw", clientsRun(within("client-0")), false},
		{"nobody was ever refused", clientsRun(results.ClientCount{Key: "client-0", Admitted: 2, SpanS: 1}, results.ClientCount{Key: "client-1", Admitted: 2, SpanS: 1}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := judged(t, 2, "own", func(g *grading) { checkOwnBuckets(g, "own", tt.run, cfg, 2, "client-") })
			assert.Equal(t, tt.pass, c.Status == results.StatusPass, c.Message)
		})
	}
	for _, change := range []func(*results.ClientStats){
		func(c *results.ClientStats) {
			c.OtherKeys, c.OtherKeyExample = 1, `asked about "127.0.0.1:5000" for a request of "client-0"`
		},
		func(c *results.ClientStats) { c.ExtraTokens = 3 },
	} {
		run := clientsRun(within("client-0"), within("client-1"))
		change(run.ServerFinal.Clients)
		c := judged(t, 2, "own", func(g *grading) { checkOwnBuckets(g, "own", run, cfg, 2, "client-") })
		assert.Equal(t, results.StatusFail, c.Status, c.Message)
	}
}

func TestCheckIdle(t *testing.T) {
	idle := func(name string, cpu float64) *results.Run {
		return &results.Run{Name: name, Idle: &results.IdleStats{WallS: 1.5, CPUS: cpu, Goroutines: 8}}
	}
	tests := []struct {
		name    string
		runs    []*results.Run
		missing []string
		pass    bool
	}{
		{"asleep", []*results.Run{idle("a", 0), idle("b", 0.003)}, nil, true},
		{"a spinning goroutine after one flood", []*results.Run{idle("a", 0), idle("b", 1.4)}, nil, false},
		{"half a core on a busy machine", []*results.Run{idle("a", 0.75)}, nil, false},
		{"a server that did not answer after its flood", []*results.Run{idle("a", 0)}, []string{"b"}, false},
		{"nothing measured", []*results.Run{{Name: "a"}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := judged(t, 2, "idle", func(g *grading) {
				g.doc.Runs, g.idleMissing = tt.runs, tt.missing
				g.checkIdle("idle")
			})
			assert.Equal(t, tt.pass, c.Status == results.StatusPass, c.Message)
		})
	}
}

func TestCheckTask2Patient(t *testing.T) {
	run := func(ok, n503, timeouts, expired int64) *results.Run {
		return &results.Run{
			Name: "line 300", Issued: 720, OK: ok, Reliable: true,
			Counts:      map[results.Outcome]int64{results.OutcomeOK: ok, results.OutcomeUnavailable: n503, results.OutcomeTimeout: timeouts},
			ServerFinal: results.ServerStats{Shed: n503 - expired, Expired: expired},
		}
	}
	for _, tt := range []struct {
		name string
		run  *results.Run
		pass bool
	}{
		{"everyone let in served", run(540, 180, 0, 0), true},
		{"a deadline where there is none", run(304, 416, 0, 236), false},
		{"patient clients timing out", run(530, 180, 10, 0), false},
	} {
		c := judged(t, 2, "line of 300: with no deadline, everyone let in is served", func(g *grading) { checkTask2Patient(g, tt.run) })
		assert.Equal(t, tt.pass, c.Status == results.StatusPass, "%s: %s", tt.name, c.Message)
	}
}

func memory(heap, goroutines, maxG, received int64) *results.MemoryStats {
	return &results.MemoryStats{HeapBytes: heap, Goroutines: goroutines, MaxGoroutines: maxG, Received: received}
}

func TestCheckTask3Memory(t *testing.T) {
	const name = "many clients: memory stays bounded"
	mib := int64(1 << 20)
	tests := []struct {
		name             string
		before, mid, end *results.MemoryStats
		status           results.Status
	}{
		// Measured on the reference: 0.25, 0.75 and 1.09 MB, 596 new
		// goroutines in the second half.
		{"the reference", memory(mib/4, 6, 6, 0), memory(3*mib/4, 6, 1200, 20700), memory(109*mib/100, 9, 1796, 41400), results.StatusPass},
		// Measured with a limiter that never forgets: +4.06 MB over the
		// second half, 2,070 new goroutines.
		{"keeps every key", memory(mib/4, 6, 6, 0), memory(357*mib/100, 9, 1500, 20700), memory(764*mib/100, 9, 3570, 41400), results.StatusFail},
		{"a goroutine per key", memory(mib/4, 6, 6, 0), memory(mib, 6, 1500, 20700), memory(mib, 20006, 21500, 41400), results.StatusFail},
		{"too few keys to tell", memory(mib/4, 6, 6, 0), memory(3*mib/4, 6, 1200, 20700), memory(8*mib, 9, 1796, 30000), results.StatusError},
		{"not measured", memory(mib/4, 6, 6, 0), nil, memory(mib, 9, 1796, 41400), results.StatusFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &results.Run{Name: "many", MemoryBefore: tt.before, MemoryMid: tt.mid, MemoryAfter: tt.end}
			c := judged(t, 3, name, func(g *grading) { checkTask3Memory(g, run, 40000) })
			assert.Equal(t, tt.status, c.Status, c.Message)
		})
	}
}

func TestCheckTask3Steady(t *testing.T) {
	const name = "many clients: a throttled client keeps its state"
	cfg := bucketConfig(70, 20)
	steady := func(a, b int64) *results.Run {
		return clientsRun(
			results.ClientCount{Key: "steady-a", Admitted: a, Limited: 300, SpanS: 4.98},  // bound 368.6
			results.ClientCount{Key: "steady-b", Admitted: b, Limited: 300, SpanS: 5.193}, // bound 383.51
		)
	}
	for _, tt := range []struct {
		name string
		run  *results.Run
		pass bool
	}{
		{"both within their bounds", steady(368, 383), true},
		{"one reset in the second half", steady(368, 402), false},
		{"one admission over", steady(369, 383), false},
		{"a steady client the server never saw", clientsRun(results.ClientCount{Key: "steady-a", Admitted: 368, Limited: 300, SpanS: 4.98}), false},
	} {
		c := judged(t, 3, name, func(g *grading) { checkTask3Steady(g, tt.run, cfg) })
		assert.Equal(t, tt.pass, c.Status == results.StatusPass, "%s: %s", tt.name, c.Message)
	}
}

func TestCheckTask3NewKeys(t *testing.T) {
	const name = "many clients: every new client starts with a full bucket"
	for _, tt := range []struct {
		keys, limited int64
		status        results.Status
	}{
		{40002, 0, results.StatusPass},
		{40002, 39297, results.StatusFail},
		{40002, 1, results.StatusFail},
		{9000, 0, results.StatusError},
	} {
		run := &results.Run{Name: "many", ServerFinal: results.ServerStats{Clients: &results.ClientStats{NewKeys: tt.keys, NewLimited: tt.limited}}}
		c := judged(t, 3, name, func(g *grading) { checkTask3NewKeys(g, run, 40000) })
		assert.Equal(t, tt.status, c.Status, fmt.Sprintf("%d new keys, %d limited: %s", tt.keys, tt.limited, c.Message))
	}
}

func TestCheckTask3Bucket(t *testing.T) {
	cfg := bucketConfig(70, 20)
	// run is one flood of a single client at rate for 3 s (100/s) or 10 s
	// (240/s): the server let it through admitted times, ok of them served,
	// its last admission spanS after its first request, and limitedBad of
	// its 429s carried a wait no bucket has.
	run := func(rate float64, admitted, ok int64, spanS float64, limitedBad int64) *results.Run {
		issued, predicted, bound := int64(300), 229.0, 230.0
		if rate == 240 {
			// 10 s: the simulation of the bucket in front of shedding
			// admits 718 of 2,400 (task3OKBelow); the bound is 20 + 70 × 10.
			issued, predicted, bound = 2400, 718, 720
		}
		return &results.Run{
			Name: fmt.Sprintf("bucket %g/s", rate), OfferedRPS: rate, DurationS: float64(issued) / rate, Issued: issued, OK: ok, Reliable: true,
			Counts:    map[results.Outcome]int64{results.OutcomeOK: ok, results.OutcomeTooMany: issued - admitted},
			Predicted: map[string]float64{"ok": predicted, "ok_bound": bound},
			ServerFinal: results.ServerStats{
				Clients:  &results.ClientStats{Clients: []results.ClientCount{{Key: "flood", Admitted: admitted, Limited: issued - admitted, SpanS: spanS}}},
				Refusals: &results.Refusals{Limited: results.RefusalCounts{Judged: issued - admitted, Bad: limitedBad}},
			},
		}
	}
	for _, tt := range []struct {
		name, check string
		run         *results.Run
		pass        bool
	}{
		{"the reference", "never more than burst + rate × time", run(100, 229, 229, 2.99, 0), true},
		{"refill rounded up to the millisecond", "never more than burst + rate × time", run(100, 238, 238, 2.99, 0), false},
		{"the reference", "429s say when to come back", run(100, 229, 229, 2.99, 0), true},
		{"waits in whole seconds", "429s say when to come back", run(100, 229, 229, 2.99, 71), false},
		// At 100/s over 3 s the simulation gives 229, want ≥ 209.
		{"the reference", "the limit is reached", run(100, 229, 229, 2.99, 0), true},
		// wrong/task3/forget-elapsed: a refusal sets last = now, so what
		// dripped in since the last grant is thrown away. At 100/s a call
		// comes every 10 ms and brings 0.7 of a token; once the burst is
		// spent, the fraction left plus 0.7 stays under 1 and every call
		// is refused for good. That bucket, fed the flood's even schedule,
		// admits 64, the last 0.63 s into the flood.
		{"a refusal forgets the time elapsed", "the limit is reached", run(100, 64, 64, 0.63, 0), false},

		// At 240/s for 10 s: the simulation of the reference admits 718,
		// the last 9.988 s after the first request (bound 719.2).
		{"the reference", "never more than burst + rate × time", run(240, 718, 718, 9.988, 0), true},
		{"the reference", "the limit is reached", run(240, 718, 718, 9.988, 0), true},
		{"the reference", "429s say when to come back", run(240, 718, 718, 9.988, 0), true},
		// wrong/task3/elapsed-ceil-ms-untested: the time since the last
		// grant is rounded up to the millisecond. At 240/s a grant comes
		// every 14.3 ms but each call is 4.17 ms after the one before, so
		// every grant gains up to 0.83 ms of tokens it never waited for:
		// that bucket, fed the flood's even schedule, admits 743 in 9.988 s,
		// 24 over the bound; the shedder still serves nearly all of them
		// (capacity 80/s).
		{"refill rounded up to the millisecond", "never more than burst + rate × time", run(240, 743, 741, 9.988, 0), false},
		// wrong/task3/forget-elapsed at 240/s: a call every 4.17 ms brings
		// 0.29 of a token, and every refusal throws it away: 27 admitted,
		// the last 0.108 s into the flood.
		{"a refusal forgets the time elapsed", "the limit is reached", run(240, 27, 27, 0.108, 0), false},
		// wrong/task3/elapsed-in-ms: elapsed time counted in whole
		// milliseconds, rounded down. Calls 4.17 ms apart lose up to a
		// millisecond of refill at every grant: 691 admitted of the 718 a
		// bucket gives, below the floor of 698. (At 100/s, calls 10 ms apart
		// lose next to nothing, 718 admitted: the faster flood shows it.)
		{"elapsed counted in whole milliseconds", "the limit is reached", run(240, 691, 691, 9.988, 0), false},
		// wrong/task3/wait-whole-seconds-untested: every 429 still reads
		// Retry-After: 1, but the wait the limiter reported for it is 1 s,
		// where one token is at most 14.3 ms away: every one of the 1,682
		// refusals is wrong.
		{"waits in whole seconds", "429s say when to come back", run(240, 718, 718, 9.988, 2400-718), false},
		// A server that sends no 429 at all (it queues instead, or answers
		// 503): nothing judged, so no evidence of a right Retry-After.
		{"no 429 judged", "429s say when to come back", func() *results.Run {
			r := run(240, 718, 718, 9.988, 0)
			r.ServerFinal.Refusals = nil
			return r
		}(), false},
	} {
		c := judged(t, 3, tt.run.Name+": "+tt.check, func(g *grading) { checkTask3Bucket(g, tt.run, cfg) })
		assert.Equal(t, tt.pass, c.Status == results.StatusPass, "%s, %s: %s", tt.name, c.Name, c.Message)
	}
}

// The plans of tasks 1 to 3 name each check once: the corpus names checks
// by these names.
func TestTask123PlansNameEachCheckOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		planned := map[string]bool{}
		for _, p := range tasks[n-1].planned() {
			assert.False(t, planned[p.name], "task%d plans %q twice", n, p.name)
			planned[p.name] = true
		}
		assert.NotEmpty(t, planned)
	}
}
