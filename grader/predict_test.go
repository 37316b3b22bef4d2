package grader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/results"
)

// The simulated storms land where the lesson and the floods on a 2-core
// machine did: full jitter 7.4–7.9 s and about 2,400 attempts; no jitter
// 31.7 s, 3,448 attempts, 136 clients giving up.
func TestSimStorm(t *testing.T) {
	jit, err := simStorm(shedConfig(), task4Clients, task4Tries, task4Base, task4Cap, true)
	require.NoError(t, err)
	assert.InDelta(t, 7.5, jit.MedianS, 0.5)
	assert.Greater(t, jit.HighS, jit.MedianS)
	assert.Less(t, task4JitterTimeSlack*jit.HighS, 10.5, "the bound stays near the lesson's 10 s")
	assert.InDelta(t, 2400, jit.MedianAttempts, 50)
	assert.Zero(t, jit.GaveUp)

	lock, err := simStorm(shedConfig(), task4Clients, task4Tries, task4Base, task4Cap, false)
	require.NoError(t, err)
	assert.InDelta(t, 31.6, lock.MedianS, 0.1)
	assert.Equal(t, 3448.0, lock.MedianAttempts)
	assert.Equal(t, 136, lock.GaveUp)
}

// Predictions follow the flood's length: the shedding server's successes
// are C·D + 16, the bucket's bound b + r·D, and the p99 does not change.
func TestPredictionsScaleWithDuration(t *testing.T) {
	for _, d := range []time.Duration{10 * time.Second, QuickDuration} {
		shed := shedConfig()
		ok, p99, err := simOne(shed, 240, d, time.Second)
		require.NoError(t, err)
		assert.Equal(t, int(80*d.Seconds())+16, ok, "shed at %s", d)
		assert.Equal(t, 300*time.Millisecond, p99)

		bucket := fakegpu.DefaultConfig()
		bucket.Mode = fakegpu.ModeBucket
		ok, _, err = simOne(bucket, 100, d, time.Second)
		require.NoError(t, err)
		bound := task3Bound(bucket, d)
		assert.LessOrEqual(t, float64(ok), bound)
		assert.GreaterOrEqual(t, float64(ok), bound-2, "a client over the limit gets nearly all of b + r·D")
	}
}

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
				} else if c.Name != tt.run.Name+": 503s answered at once" {
					assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
				}
			}
		})
	}
}
