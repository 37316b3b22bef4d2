package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// measuredShed is a shedding row as a 2-core machine measured it.
func measuredShed(d float64, ok int64, p99 float64) *results.Run {
	return &results.Run{
		Name: "shed 240/s", OfferedRPS: 240, DurationS: d, TimeoutS: 1, Reliable: true,
		Issued: int64(240 * d), OK: ok, P99MS: p99,
		Counts:      map[results.Outcome]int64{results.OutcomeOK: ok, results.OutcomeUnavailable: int64(240*d) - ok},
		ServerFinal: results.ServerStats{MaxWaiting: 16},
	}
}

func TestTask2ShedChecks(t *testing.T) {
	tests := []struct {
		name      string
		run       *results.Run
		failCheck string // "" if all pass
	}{
		{"measured in 10 s", measuredShed(10, 814, 304.9), ""},
		{"measured in a practice run", measuredShed(3, 255, 303), ""},
		{"too few", measuredShed(10, 790, 304), "successes pinned at capacity"},
		{"a 3 s run that served as many as a 10 s one", measuredShed(3, 816, 304), "successes pinned at capacity"},
		{"a line shorter than asked", measuredShed(10, 808, 200), "p99 of successes as simulated"},
		{"a line longer than asked", measuredShed(10, 830, 420), "p99 of successes as simulated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, predictTask2Shed(tt.run, shedConfig()))
			g := &grading{task: tasks[1], doc: &results.Document{}}
			checkTask2Shed(g, tt.run, shedConfig())
			for _, c := range g.doc.Checks {
				if tt.failCheck != "" && c.Name == tt.run.Name+": "+tt.failCheck {
					assert.Equal(t, results.StatusFail, c.Status, c.Message)
					shownFailing(t, "task2", c)
				} else if c.Name != tt.run.Name+": 503s answered at once" {
					assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
				}
			}
		})
	}
}
