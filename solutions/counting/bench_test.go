package counting

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks measure what a decision costs and what a client costs in
// memory, for the four limiters at the same settings. Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./solutions/counting/   # bytes per client
//	go test -run '^$' -bench Allow ./solutions/counting/             # time per decision

var sink atomic.Bool // keeps results alive

// limiters makes each of the four at limit per window, the bucket with a
// burst of limit, so that a client can reach its limit at one instant, as
// in the other three.
func limiters(limit int, window time.Duration) []struct {
	name string
	l    Limiter
} {
	return []struct {
		name string
		l    Limiter
	}{
		{"fixed-window", NewFixedWindow(limit, window)},
		{"sliding-log", NewSlidingLog(limit, window)},
		{"sliding-counter", NewSlidingCounter(limit, window)},
		{"token-bucket", NewTokenBucket(limit, window, limit)},
	}
}

// BenchmarkBytesPerClient fills each limiter with clients that have all
// sent their whole limit of 10,000 per minute and reports the live heap per
// client: what the limiter keeps of a busy client (its state, its key and
// the map entry). Use -benchtime 1x: one fill is a million calls.
func BenchmarkBytesPerClient(b *testing.B) {
	const (
		limit   = 10_000
		clients = 100
	)
	for i, c := range limiters(limit, time.Minute) {
		b.Run(c.name, func(b *testing.B) {
			var perClient float64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				l := limiters(limit, time.Minute)[i].l
				for k := range clients {
					key := "client-" + strconv.Itoa(1e6+k)
					for range limit {
						l.Allow(key)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(l)
				perClient = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / clients
			}
			b.ReportMetric(perClient, "B/client")
		})
	}
}

// BenchmarkAllow measures one decision for a known key: "admit" at a
// million per millisecond, so that every call passes (and the log holds
// what a millisecond of calls admitted), "refuse" at one per minute,
// reached by the first call.
func BenchmarkAllow(b *testing.B) {
	for _, run := range []struct {
		name   string
		limit  int
		window time.Duration
	}{{"admit", 1e6, time.Millisecond}, {"refuse", 1, time.Minute}} {
		for _, c := range limiters(run.limit, run.window) {
			b.Run(run.name+"/"+c.name, func(b *testing.B) {
				c.l.Allow("client")
				b.ReportAllocs()
				var ok bool
				for b.Loop() {
					ok, _ = c.l.Allow("client")
				}
				sink.Store(ok)
			})
		}
	}
}
