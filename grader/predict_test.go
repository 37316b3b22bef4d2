package grader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/model/ties"
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
		assert.InDelta(t, 300*time.Millisecond, p99, float64(ties.Grid), "p99 to within the schedule's grid")

		bucket := fakegpu.DefaultConfig()
		bucket.Mode = fakegpu.ModeBucket
		ok, _, err = simOne(bucket, 100, d, time.Second)
		require.NoError(t, err)
		bound := task3Bound(bucket, d)
		assert.LessOrEqual(t, float64(ok), bound)
		assert.GreaterOrEqual(t, float64(ok), bound-2, "a client over the limit gets nearly all of b + r·D")
	}
}
