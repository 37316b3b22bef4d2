package scenario

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The disagreement's trace is the seed's alone, in time order, with about
// the clients' rates.
func TestDisagreementTrace(t *testing.T) {
	a := disagreementTrace(7, 100, 10, 500*time.Millisecond, 3*time.Second)
	b := disagreementTrace(7, 100, 10, 500*time.Millisecond, 3*time.Second)
	require.Equal(t, a, b)
	assert.NotEqual(t, a, disagreementTrace(8, 100, 10, 500*time.Millisecond, 3*time.Second))
	assert.True(t, slices.IsSortedFunc(a, func(x, y arrival) int { return int(x.at - y.at) }))
	// 100 clients at 0.8 to 1.2 × 20/s for 3 s: about 6,000.
	assert.InDelta(t, 6000, len(a), 600)
}

// The definitions the disagreement is measured against, at a boundary: the
// log refuses the second burst for a whole window, the counter lets
// through ⌊prev × e/window⌋ more.
func TestCountingModels(t *testing.T) {
	const w = int64(time.Second)
	start := 1000*w - w/10 // 100 ms before a boundary
	lm, cm := newLogModel(10, time.Second), newCounterModel(10, time.Second)
	for range 10 {
		assert.True(t, lm.allow(1, start))
		assert.True(t, cm.allow(1, start))
	}
	assert.False(t, lm.allow(1, start+w/5))
	// 100 ms into the next window the previous 10 weigh 9: one more fits.
	assert.True(t, cm.allow(1, start+w/5))
	assert.False(t, cm.allow(1, start+w/5))
	// The log frees all ten exactly one window after they were admitted.
	assert.False(t, lm.allow(1, start+w-1))
	assert.True(t, lm.allow(1, start+w))
	// Clients are independent.
	assert.True(t, lm.allow(2, start+w/5))
	assert.True(t, cm.allow(2, start+w/5))
}
