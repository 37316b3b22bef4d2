package suitekit

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// PropertyOf runs a rapid property test of f over inputs drawn from gen,
// with the run's seed. rapid draws each input on its own goroutine, where
// it can also shrink a failing one (rapid steers drawing and shrinking by
// panicking, which must not happen inside a bubble's goroutine), then f
// checks it in a synctest bubble of its own whose clock has moved on by a
// random stretch of up to 40 years, drawn per case. f reports a broken
// property by returning a non-empty description.
func PropertyOf[V any](t *testing.T, gen *rapid.Generator[V], f func(t *testing.T, v V) string) {
	t.Helper()
	NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		v := gen.Draw(rt, "input")
		offset := time.Duration(rapid.Int64Range(0, int64(maxStartOffset)).Draw(rt, "start offset"))
		var msg string
		Bubble(t, func(t *testing.T) {
			time.Sleep(offset)
			msg = f(t, v)
		})
		if msg != "" {
			rt.Fatal(msg)
		}
	})
}
