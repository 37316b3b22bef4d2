package suitekit

import (
	"testing"

	"pgregory.net/rapid"
)

// PropertyOutside runs a rapid property test of f with the run's seed, as
// Property does, but on the real clock, outside any synctest bubble. It is
// for promises that need no fake time (a pure function, a lock) and that
// code could keep inside a bubble only: a check that runs both in a bubble
// and outside one catches code that behaves differently in the two. f
// reports a broken property by returning a non-empty description.
func PropertyOutside(t *testing.T, f func(rt *rapid.T) string) {
	t.Helper()
	NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		if msg := f(rt); msg != "" {
			rt.Fatal(msg)
		}
	})
}
