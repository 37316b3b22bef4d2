package grader

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"ratelab/internal/suites/suitekit"
)

// TestDrawReplaysFromTheSeed: a grading's draws come from its seed, so
// that --seed replays them, and each name is a stream of its own.
func TestDrawReplaysFromTheSeed(t *testing.T) {
	seq := func(seed uint64, what string) []int {
		g := &grading{opts: Options{Seed: seed}}
		r := g.draw(what)
		var out []int
		for range 8 {
			out = append(out, r.IntN(1000))
		}
		return out
	}
	assert.Equal(t, seq(42, "a"), seq(42, "a"), "the same seed and name replay the same draws")
	assert.NotEqual(t, seq(42, "a"), seq(43, "a"), "another seed draws otherwise")
	assert.NotEqual(t, seq(42, "a"), seq(42, "b"), "another name is another stream")
}

// testDraw is a test's source of the draws a grading takes from its seed:
// from the test run's seed, so that RATELAB_SEED replays it.
func testDraw(t *testing.T) *rand.Rand {
	g := &grading{opts: Options{Seed: suitekit.Seed()}}
	return g.draw(t.Name())
}
