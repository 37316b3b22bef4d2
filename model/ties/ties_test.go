package ties

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The offsets keep the simulation's order at one grid instant: calls
// started at once (up to 2,000) come first, then clients giving up, then
// periodic readings, then one-off readings, all before the next grid
// point; and a restarting timer's offset is coprime with the grid.
func TestOffsetsKeepTheOrder(t *testing.T) {
	assert.Less(t, Start(2000), giveUp)
	assert.Less(t, giveUp, ReadPhase)
	assert.Less(t, ReadPhase, oneOff)
	assert.Less(t, oneOff, Grid)
	assert.Less(t, Schedule(8), Grid, "nine schedules stay within a grid step")
	a, b := int64(restart), int64(Grid)
	for b != 0 {
		a, b = b, a%b
	}
	assert.Equal(t, int64(1), a, "gcd(restart, Grid)")
}

// Send is on the grid, one interval in, and never goes backwards.
func TestSend(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		rate := 0.1 + rng.Float64()*10000
		seq := rng.Uint64N(1 << 20)
		at := Send(rate, seq)
		assert.Zero(t, at%Grid, "Send(%v, %d) = %s off the grid", rate, seq, at)
		want := float64(seq+1) / rate
		assert.InDelta(t, want, at.Seconds(), Grid.Seconds()/2+1e-12, "Send(%v, %d)", rate, seq)
		assert.LessOrEqual(t, Send(rate, seq), Send(rate, seq+1))
	}
	assert.Equal(t, 333330*time.Microsecond, Send(3, 0))
}

// NextRead waits at most a grid step, to an instant oneOff past the grid.
func TestNextRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		elapsed := time.Duration(rng.Int64N(int64(time.Hour)))
		w := NextRead(elapsed)
		assert.Greater(t, w, time.Duration(0))
		assert.LessOrEqual(t, w, Grid)
		assert.Equal(t, oneOff, (elapsed+w)%Grid, "NextRead(%s)", elapsed)
	}
}
