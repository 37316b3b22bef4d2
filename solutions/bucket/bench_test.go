package bucket

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The benchmarks put the reference next to golang.org/x/time/rate and next to
// time.Now alone, which every call pays. Run them together:
//
//	go test -run '^$' -bench . -benchtime 1s ./solutions/bucket/
//
// "admit" uses a rate so high (1e12 tokens per second) that every call
// succeeds; "deny" uses a rate so low (one token per 1000s) that every call
// after the first is refused and computes its wait.

const (
	hugeRate = 1e12
	slowRate = 1e-3
)

var sink atomic.Bool // keeps results alive

func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	sink.Store(t.IsZero())
}

func BenchmarkTokenBucket(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64
	}{{"admit", hugeRate}, {"deny", slowRate}} {
		b.Run(c.name, func(b *testing.B) {
			tb := NewTokenBucket(c.rate, 1)
			b.ReportAllocs()
			var ok bool
			for b.Loop() {
				ok, _ = tb.TryTake(1)
			}
			sink.Store(ok)
		})
		b.Run(c.name+"-parallel", func(b *testing.B) {
			tb := NewTokenBucket(c.rate, 1)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var ok bool
				for pb.Next() {
					ok, _ = tb.TryTake(1)
				}
				sink.Store(ok)
			})
		})
	}
}

func BenchmarkRateLimiter(b *testing.B) {
	for _, c := range []struct {
		name string
		rate rate.Limit
	}{{"admit", hugeRate}, {"deny", slowRate}} {
		b.Run(c.name, func(b *testing.B) {
			lim := rate.NewLimiter(c.rate, 1)
			b.ReportAllocs()
			var ok bool
			for b.Loop() {
				ok = lim.Allow()
			}
			sink.Store(ok)
		})
		b.Run(c.name+"-parallel", func(b *testing.B) {
			lim := rate.NewLimiter(c.rate, 1)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var ok bool
				for pb.Next() {
					ok = lim.Allow()
				}
				sink.Store(ok)
			})
		})
	}
}

// BenchmarkKeyedLimiter measures calls for known keys: every key is used once
// before the timer starts. The burst is huge and the rate 1 token per second,
// so each call admits and no bucket is ever full again; a huge rate would
// refill every bucket at once, and the limiter drops full buckets, so each
// call would meet a new key. "new-key" measures that path: a fresh key each
// call, whose bucket is dropped at the next sweep.
func BenchmarkKeyedLimiter(b *testing.B) {
	for _, c := range []struct {
		name string
		keys int
	}{{"1-key", 1}, {"10k-keys", 10_000}} {
		keys := make([]string, c.keys)
		for i := range keys {
			keys[i] = "client-" + strconv.Itoa(1e9+i)
		}
		warm := func() *KeyedLimiter {
			l := NewKeyedLimiter(1, 1e12)
			for _, k := range keys {
				l.TryTake(k, 1)
			}
			return l
		}
		b.Run(c.name, func(b *testing.B) {
			l := warm()
			b.ReportAllocs()
			var ok bool
			i := 0
			for b.Loop() {
				ok, _ = l.TryTake(keys[i], 1)
				if i++; i == len(keys) {
					i = 0
				}
			}
			sink.Store(ok)
		})
		b.Run(c.name+"-parallel", func(b *testing.B) {
			l := warm()
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var ok bool
				i := int(next.Add(7919)) % len(keys) // spread the goroutines out
				for pb.Next() {
					ok, _ = l.TryTake(keys[i], 1)
					if i++; i == len(keys) {
						i = 0
					}
				}
				sink.Store(ok)
			})
		})
	}

	b.Run("new-key", func(b *testing.B) {
		keys := make([]string, 1<<20)
		for i := range keys {
			keys[i] = "client-" + strconv.Itoa(1e9+i)
		}
		l := NewKeyedLimiter(hugeRate, 2)
		b.ReportAllocs()
		var ok bool
		i := 0
		for b.Loop() {
			ok, _ = l.TryTake(keys[i], 1)
			if i++; i == len(keys) {
				i = 0
			}
		}
		sink.Store(ok)
	})
}
