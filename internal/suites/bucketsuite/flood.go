package bucketsuite

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"ratelab/internal/suites/suitekit"
)

// The keyed limiter promises two things at once under a flood of distinct
// keys: its memory stays bounded, and a key that still owes tokens keeps
// owing them. Either alone is easy to fake (keep everything; or forget
// everything past some size), so both are checked in the same flood, whose
// size is drawn between 300,000 and 700,000 keys: a limiter that clears its
// map past a threshold loses partial buckets if the flood passes it, and
// holds too much memory if it does not (keeping every key costs about 105
// bytes a key, so the bound is passed by 200,000). The heap is measured
// every 30,000 keys, not only at the end, so a limiter that sweeps only at
// long intervals shows the memory it holds in between.

// floodKeyBytes is how long the flood's keys are at most: a base-36 uint64.
const floodKeyBytes = 13

// heapGrowth returns how much the live heap has grown since before, after a
// collection.
func heapGrowth(before *runtime.MemStats) int64 {
	var now runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&now)
	return int64(now.HeapAlloc) - int64(before.HeapAlloc)
}

func (s *suite) memoryBounded(t *testing.T) {
	rng := suitekit.Rand(t)
	var (
		rate    = 500 + 4500*rng.Float64()       // tokens per second
		burst   = rate * (30 + 70*rng.Float64()) // 30 to 100 s to refill from empty
		keys    = 300_000 + rng.IntN(400_001)    // the flood's distinct keys
		partial = 1000 + rng.IntN(4001)          // keys that owe tokens
		ops     = 4 * partial                    // their calls, spread through the flood
	)
	const (
		batch = 1000                 // flood keys between sleeps
		gap   = 2 * time.Millisecond // a flood key's bucket is full again after 1/rate ≤ 2 ms
		every = 30_000               // flood keys between two measures of the heap
		limit = 20 << 20             // bytes
	)
	// Bound: a limiter that keeps every key holds at least 300,000 keys and
	// map entries, about 31 MB (a map of values or of pointers, measured);
	// one that drops full buckets keeps the few thousand partial ones and
	// the last batch, a megabyte or two, and one that sweeps them when its
	// map passes 100,000 keys about 13 MB.
	x := s.keyed(t, rate, burst)
	start := time.Now()
	partialKeys := make([]string, partial)
	for i := range partialKeys {
		partialKeys[i] = strconv.FormatUint(rng.Uint64(), 36)
	}
	models := make(map[string]*model, partial)
	opAt := make([]int, ops)
	for i := range opAt {
		opAt[i] = rng.IntN(keys)
	}
	slices.Sort(opAt)
	where := func(i int) string {
		return fmt.Sprintf("after %d of %d flood keys (rate=%v/s, burst=%v, %d keys owing tokens)", i, keys, rate, burst, partial)
	}
	// partialOp makes one call for a random partial key and checks it
	// against the exact model.
	partialOp := func(i int) {
		key := partialKeys[rng.IntN(partial)]
		var n float64
		switch r := rng.IntN(4); {
		case r < 2:
			n = burst * (0.05 + 0.55*rng.Float64())
		case r < 3:
			n = 10 * rng.Float64()
		default:
			n = burst
		}
		now := time.Since(start)
		m := models[key]
		if m == nil {
			m = newModel(rate, burst, now)
			models[key] = m
		}
		ok, wait := x.take(key, n)
		wantOK, wantWait, margin, exact := m.try(now, n)
		switch {
		case margin <= tokenSlack(burst):
			// a coin toss within rounding
		case ok != wantOK || !waitOK(wait, wantWait, exact, rate, burst):
			t.Fatalf("%s, at t=%v: TryTake(%q, %v) = (%v, %v); want (%v, %v)\n"+
				"a key that spent tokens keeps its bucket however many other keys come by: only full buckets may be dropped",
				where(i), now, key, n, ok, wait, wantOK, wantWait)
		}
		if ok {
			m.commit(now, n)
		}
	}

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 0, floodKeyBytes)
	next := 0
	x.guard(func() {
		for i := range keys {
			if i > 0 && i%batch == 0 {
				time.Sleep(gap)
			}
			if i > 0 && i%every == 0 {
				if grown := heapGrowth(&before); grown > limit {
					t.Fatalf("%s, each full again within 2 ms of its only take, the live heap grew by %.1f MB; want under %d MB at all times\n"+
						"drop buckets that have refilled to full (they are the same as no bucket), for instance in a sweep when the map grows",
						where(i), float64(grown)/(1<<20), limit>>20)
				}
			}
			buf = strconv.AppendUint(buf[:0], rng.Uint64(), 36)
			key := string(buf) // a fresh allocation the limiter may keep
			if ok, wait := x.fast(key, 1); !ok {
				t.Fatalf("%s: TryTake(%q, 1) = (%v, %v); want (true, 0s)\nthe first call for a key meets a full bucket",
					where(i), key, ok, wait)
			}
			for ; next < ops && opAt[next] == i; next++ {
				partialOp(i)
			}
		}
	})
	if grown := heapGrowth(&before); grown > limit {
		t.Fatalf("%s, each full again within 2 ms of its only take, the live heap grew by %.1f MB; want under %d MB\n"+
			"drop buckets that have refilled to full (they are the same as no bucket), for instance in a sweep when the map grows",
			where(keys), float64(grown)/(1<<20), limit>>20)
	}
	runtime.KeepAlive(x.k)

	// Every partial key still holds exactly what it should.
	time.Sleep(time.Second)
	now := time.Since(start)
	for _, key := range partialKeys {
		m := models[key]
		if m == nil {
			continue
		}
		ok, wait := x.take(key, burst)
		wantOK, wantWait, margin, exact := m.try(now, burst)
		if margin > tokenSlack(burst) && (ok != wantOK || !waitOK(wait, wantWait, exact, rate, burst)) {
			t.Fatalf("after the flood of %d keys, at t=%v: TryTake(%q, %v) = (%v, %v); want (%v, %v)\n"+
				"a key that spent tokens keeps its bucket however many other keys come by: only full buckets may be dropped",
				keys, now, key, burst, ok, wait, wantOK, wantWait)
		}
	}
}

func (s *suite) memoryBoundedRealClock(t *testing.T) {
	// The same promise on the real clock, outside any bubble, smaller: a
	// limiter that sweeps only in fake time, or only when the clock reads
	// a date the tests use, fails here. Flood keys refill in 5 to 10 µs;
	// the partial keys, which take half their burst or more, need at least
	// 30 s, longer than this check runs.
	rng := suitekit.Rand(t)
	var (
		rate    = 1e5 * (1 + rng.Float64())
		burst   = rate * (60 + 60*rng.Float64())
		keys    = 200_000 + rng.IntN(300_001)
		partial = 200 + rng.IntN(801)
	)
	const (
		every = 40_000
		limit = 16 << 20 // keeping all 200,000 keys takes about 27 MB
	)
	x := s.keyed(t, rate, burst)
	type owed struct {
		key   string
		n     float64
		taken time.Time // just before the call that took n
	}
	owing := make([]owed, partial)
	at := make(map[int]int, partial) // flood index → partial key
	for i := range owing {
		owing[i].key = strconv.FormatUint(rng.Uint64(), 36)
		owing[i].n = burst * (0.5 + 0.5*rng.Float64())
		at[rng.IntN(keys)] = i
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 0, floodKeyBytes)
	x.guard(func() {
		for i := range keys {
			if i > 0 && i%every == 0 {
				if grown := heapGrowth(&before); grown > limit {
					t.Fatalf("on the real clock, after %d distinct keys, each full again within 10 µs of its only take, the live heap grew by %.1f MB; want under %d MB\n"+
						"drop buckets that have refilled to full, whatever the clock says",
						i, float64(grown)/(1<<20), limit>>20)
				}
			}
			buf = strconv.AppendUint(buf[:0], rng.Uint64(), 36)
			key := string(buf)
			if ok, wait := x.fast(key, 1); !ok {
				t.Fatalf("on the real clock: TryTake(%q, 1) = (%v, %v); want (true, 0s)\nthe first call for a key meets a full bucket", key, ok, wait)
			}
			if p, ok := at[i]; ok {
				o := &owing[p]
				o.taken = time.Now()
				if ok, wait := x.take(o.key, o.n); !ok {
					t.Fatalf("on the real clock: TryTake(%q, %v) = (%v, %v); want (true, 0s)\nthe first call for a key meets a full bucket of %v",
						o.key, o.n, ok, wait, burst)
				}
			}
		}
	})
	if grown := heapGrowth(&before); grown > limit {
		t.Fatalf("on the real clock, after %d distinct keys, each full again within 10 µs of its only take, the live heap grew by %.1f MB; want under %d MB\n"+
			"drop buckets that have refilled to full, whatever the clock says",
			keys, float64(grown)/(1<<20), limit>>20)
	}
	runtime.KeepAlive(x.k)
	for _, o := range owing {
		if o.taken.IsZero() {
			continue
		}
		ok, wait := x.take(o.key, burst)
		since := time.Since(o.taken) // at least as long as had passed at the call
		missing := o.n - rate*since.Seconds()
		if missing <= 1e-6*burst {
			continue // refilled (a very slow machine): nothing to check
		}
		least := time.Duration(missing / rate * 1e9)
		most := time.Duration(math.Ceil(o.n/rate*1e9)) + time.Microsecond
		if ok || wait < least-time.Microsecond || wait > most {
			t.Fatalf("on the real clock, after %d distinct keys: TryTake(%q, %v) = (%v, %v); want (false, between %v and %v)\n"+
				"the key took %v tokens %v ago and still owes at least %.0f: only full buckets may be dropped",
				keys, o.key, burst, ok, wait, least, most, o.n, since, missing)
		}
	}
}
