package grader

import (
	"hash/fnv"
	"math/rand/v2"
)

// draw returns a random source for the grading's draws named what (how
// many clients a burst has, their ids): from the grading's seed, so that
// `grade --seed N` replays the floods' draws as it replays the unit
// suites' inputs, and one stream per name, so that a draw added to one
// flood leaves every other flood's draws as they were.
func (g *grading) draw(what string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(what))
	return rand.New(rand.NewPCG(g.opts.Seed, h.Sum64()))
}
