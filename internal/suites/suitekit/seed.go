package suitekit

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid" // imported here so every suite's test binary knows -rapid.seed
)

// SeedEnv names the environment variable that fixes the seed of every
// random choice the suites make. The grader sets it (grade --seed N) and
// passes the same number as -rapid.seed; without it each run draws its
// own, so no two runs feed the code the same inputs.
const SeedEnv = "RATELAB_SEED"

var (
	seedOnce sync.Once
	seed     uint64
)

// Seed returns this run's seed: $RATELAB_SEED when it holds a number, else
// one drawn at random once per test binary.
func Seed() uint64 {
	seedOnce.Do(func() {
		if v, err := strconv.ParseUint(os.Getenv(SeedEnv), 10, 64); err == nil {
			seed = v
			return
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) >> 1 // rapid's -rapid.seed is an int64
	})
	return seed
}

// Rand returns a random source for test t, derived from the run's Seed and
// t's name, so that a replay with the same seed draws the same numbers in
// each test whatever ran before it. When t fails, the seed is printed with
// how to replay it.
func Rand(t testing.TB) *mrand.Rand {
	t.Helper()
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	NoteSeed(t)
	return mrand.New(mrand.NewPCG(Seed(), h.Sum64()))
}

// NoteSeed makes a failure of t print the run's seed and how to replay it.
func NoteSeed(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random inputs from seed %d: replay with `grade --seed %d` or %s=%d go test -rapid.seed=%d ...",
				Seed(), Seed(), SeedEnv, Seed(), Seed())
		}
	})
}

// maxStartOffset bounds the random fake time a bubble sleeps before a check
// starts: a synctest bubble's clock starts at midnight UTC on 1 January
// 2000, which code under test could recognise.
const maxStartOffset = 40 * 365 * 24 * time.Hour

// startOffset is how long a check's bubble sleeps before the check starts:
// up to 40 years, with a random fraction of a second, drawn from the run's
// seed and the check's name.
func startOffset(t testing.TB) time.Duration {
	h := fnv.New64a()
	fmt.Fprintf(h, "start offset %s", t.Name())
	r := mrand.New(mrand.NewPCG(Seed(), h.Sum64()))
	return time.Duration(r.Int64N(int64(maxStartOffset)))
}

// Property runs a rapid property test of f with the run's seed: rapid
// draws the inputs, shrinks a failing case to a small one and prints how to
// replay it. Each case runs in a synctest bubble of its own, started at a
// random instant, so fake time begins afresh for every case. f reports a
// broken property by returning a non-empty description instead of failing
// t itself: rapid must see the failure outside the bubble to shrink it.
func Property(t *testing.T, f func(rt *rapid.T, t *testing.T) string) {
	t.Helper()
	NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		var (
			msg      string
			panicked any
		)
		Bubble(t, func(t *testing.T) {
			// rapid stops a case by panicking, such as when a shrunk
			// input runs out of data to draw from; only rapid.Check can
			// recover that, so it is raised again outside the bubble.
			defer func() { panicked = recover() }()
			msg = f(rt, t)
		})
		if panicked != nil {
			panic(panicked)
		}
		if msg != "" {
			rt.Fatal(msg)
		}
	})
}
