package grader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/results"
)

// measuredTask1 returns runs shaped like a real task 1 on a 2-core machine.
func measuredTask1() []*results.Run {
	mk := func(name string, rate, timeout float64, ok, waiting, dead int64, p99 float64) *results.Run {
		issued := int64(rate * 10)
		return &results.Run{
			Name: name, OfferedRPS: rate, DurationS: 10, TimeoutS: timeout,
			Expected: issued, Issued: issued, OK: ok, GoodputRPS: float64(ok) / 10, P99MS: p99, Reliable: true,
			ServerAfterFlood: results.ServerStats{Waiting: waiting},
			ServerFinal:      results.ServerStats{Dead: dead, Received: issued, Finished: issued},
			Counts:           map[results.Outcome]int64{results.OutcomeOK: ok, results.OutcomeTimeout: issued - ok},
			DrainedS:         float64(issued-ok) / 80,
		}
	}
	runs := []*results.Run{
		mk("80/s", 80, 1, 800, 0, 0, 191),
		mk("120/s", 120, 1, 216, 327, 984, 991),
		mk("160/s", 160, 1, 144, 726, 1456, 967),
		mk("240/s", 240, 1, 112, 1523, 2288, 978),
		mk("120/s, 30 s timeout", 120, 30, 1200, 0, 0, 5153),
	}
	predict(runs, 10*time.Second)
	return runs
}

// predict fills in each run's predictions for a flood of d.
func predict(runs []*results.Run, d time.Duration) {
	cfg := fakegpu.DefaultConfig()
	for i, r := range runs {
		p, err := task1Predicted(cfg, task1Rows[i], d)
		if err != nil {
			panic(err)
		}
		r.Predicted = p
	}
}

// The simulation predicts the 240/s row exactly as measured (112, a whole
// row of 8 slots above the closed form's 108), and the collapse counts do
// not depend on the flood's length.
func TestTask1Predicted(t *testing.T) {
	for _, d := range []time.Duration{10 * time.Second, QuickDuration} {
		runs := measuredTask1()
		predict(runs, d)
		assert.Equal(t, []float64{216, 144, 112}, []float64{runs[1].Predicted["ok"], runs[2].Predicted["ok"], runs[3].Predicted["ok"]}, "at %s", d)
		assert.Equal(t, 108.0, runs[3].Predicted["ok_closed_form"])
		assert.Equal(t, 80*d.Seconds(), runs[0].Predicted["ok"])
	}
}

func judgeTask1(runs []*results.Run) map[string]results.Check {
	g := &grading{task: tasks[0], doc: &results.Document{}}
	checkTask1(g, runs)
	out := map[string]results.Check{}
	for _, c := range g.doc.Checks {
		out[c.Name] = c
	}
	return out
}

func TestTask1ChecksPassOnMeasuredCollapse(t *testing.T) {
	for name, c := range judgeTask1(measuredTask1()) {
		assert.Equal(t, results.StatusPass, c.Status, "%s: %s", name, c.Message)
		assert.Positive(t, c.MaxScore, name)
	}
}

func TestTask1ChecksFail(t *testing.T) {
	type task1Case struct {
		name   string
		change func([]*results.Run)
		fails  string
		status results.Status
	}
	tests := []task1Case{
		{"a server that never collapses", func(r []*results.Run) { r[1].OK, r[1].GoodputRPS = 1200, 120 },
			"120/s: successes match the model", results.StatusFail},
		{"one request lost at capacity", func(r []*results.Run) { r[0].OK = 799 },
			"80/s: every request succeeds", results.StatusFail},
		{"queueing at capacity", func(r []*results.Run) { r[0].P99MS = 600 },
			"80/s: p99 of successes under 250 ms", results.StatusFail},
		{"a count just above the band", func(r []*results.Run) { r[3].OK = 119 },
			"240/s: successes match the model", results.StatusFail},
		{"a count just below the band", func(r []*results.Run) { r[3].OK = 105 },
			"240/s: successes match the model", results.StatusFail},
		{"no dead work", func(r []*results.Run) { r[2].ServerFinal.Dead = 0 },
			"160/s: the server keeps working for nobody", results.StatusFail},
		{"no backlog", func(r []*results.Run) { r[2].ServerAfterFlood.Waiting = 0 },
			"160/s: the server keeps working for nobody", results.StatusFail},
		{"flat goodput", func(r []*results.Run) { r[3].GoodputRPS = r[2].GoodputRPS },
			"goodput falls as offered load rises", results.StatusFail},
		{"a patient client dropped", func(r []*results.Run) { r[4].OK = 1199 },
			"Break It 4: with a 30 s timeout every request succeeds", results.StatusFail},
		{"no waiting with patient clients", func(r []*results.Run) { r[4].P99MS = 150 },
			"Break It 4: the p99 is seconds, as the model says", results.StatusFail},
		{"dead work short of the clients that left", func(r []*results.Run) { r[2].ServerFinal.Dead -= 9 },
			"160/s: every abandoned request is still worked", results.StatusFail},
		{"dead work beyond the clients that left", func(r []*results.Run) { r[3].ServerFinal.Dead += 9 },
			"240/s: every abandoned request is still worked", results.StatusFail},
		{"a line that never drained", func(r []*results.Run) { r[1].DrainedS, r[1].ServerFinal.Finished = -1, 900 },
			"120/s: every abandoned request is still worked", results.StatusFail},
		{"dead work is judged however late the generator", func(r []*results.Run) { r[1].Reliable, r[1].ServerFinal.Dead = false, 0 },
			"120/s: every abandoned request is still worked", results.StatusFail},
		{"an unreliable generator is not a verdict", func(r []*results.Run) { r[1].Reliable = false },
			"120/s: successes match the model", results.StatusError},
	}
	// Every collapse row, on two wrong servers: one that stops the work of a
	// client that hung up (no backlog, no dead work), and one with a slot
	// more than the lesson's 8 (about 9/8 of the successes).
	for i, row := range []string{"120/s", "160/s", "240/s"} {
		tests = append(tests,
			task1Case{"a server that cancels abandoned work, " + row, func(r []*results.Run) {
				r[i+1].ServerAfterFlood.Waiting, r[i+1].ServerFinal.Dead = 0, 0
			}, row + ": the server keeps working for nobody", results.StatusFail},
			task1Case{"nine slots, " + row, func(r []*results.Run) {
				r[i+1].OK = r[i+1].OK * 9 / 8
			}, row + ": successes match the model", results.StatusFail},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := measuredTask1()
			tt.change(runs)
			checks := judgeTask1(runs)
			c, ok := checks[tt.fails]
			require.True(t, ok, "no check named %q", tt.fails)
			assert.Equal(t, tt.status, c.Status, "%s: %s", c.Name, c.Message)
			assert.Zero(t, c.Score, "a check that did not pass scores 0")
			shownFailing(t, "task1", c)
		})
	}
}
