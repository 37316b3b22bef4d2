package redisbucket

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"ratelab/internal/redisenv"
)

// BenchmarkDecision compares this package's Limiter with go-redis/redis_rate
// (GCRA in a Lua script, the usual library choice) on the same real Redis
// and the same client: one caller, and 32 callers at once. Every operation
// is one decision, one round trip; decisions/s is the throughput.
//
// admit uses a limit so high that every call is let through; deny uses one
// so low that every call after the first is refused with a wait.
//
//	go test -run '^$' -bench Decision -benchtime 2s -count 5 ./solutions/redisbucket/
//
// It needs a real Redis, at REDIS_URL or 127.0.0.1:6379, and is skipped
// without one: miniredis would measure miniredis.
func BenchmarkDecision(b *testing.B) {
	rdb := benchRedis(b)
	limiters := benchLimiters(rdb, failOnce(b))
	var keys atomic.Int64
	key := func(name string) string { return benchKey(name, keys.Add(1)) }
	for _, lim := range limiters {
		for _, path := range []string{"admit", "deny"} {
			b.Run(lim.name+"/"+path+"/callers=1", func(b *testing.B) {
				try := lim.new(path == "admit")
				k := key(lim.name + "-" + path)
				try(k) // loads the script, and in deny spends the one token
				for b.Loop() {
					try(k)
				}
				reportRate(b)
			})
			b.Run(lim.name+"/"+path+"/callers=32", func(b *testing.B) {
				try := lim.new(path == "admit")
				k := key(lim.name + "-" + path)
				try(k)
				b.SetParallelism((32 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						try(k)
					}
				})
				reportRate(b)
			})
		}
	}
}

// A decide makes one decision for key.
type decide func(key string) (ok bool)

// A benchLimiter makes a decide that admits every call (admit) or refuses
// every call after the first (!admit).
type benchLimiter struct {
	name string
	new  func(admit bool) decide
}

// benchLimiters returns this package's Limiter and redis_rate's on rdb.
// Errors go to fail.
func benchLimiters(rdb *redis.Client, fail func(error)) []benchLimiter {
	ctx := context.Background()
	return []benchLimiter{
		{"lua", func(admit bool) decide {
			rate, burst := 1e-3, 1.0
			if admit {
				rate, burst = 1e9, 1e9
			}
			l := New(rdb, rate, burst)
			return func(key string) bool {
				ok, _, err := l.TryTakeCtx(ctx, key, 1)
				if err != nil {
					fail(err)
				}
				return ok
			}
		}},
		{"redis_rate", func(admit bool) decide {
			limit := redis_rate.Limit{Rate: 1, Burst: 1, Period: 1000 * time.Second}
			if admit {
				limit = redis_rate.PerSecond(1e9)
			}
			l := redis_rate.NewLimiter(rdb)
			return func(key string) bool {
				res, err := l.Allow(ctx, key, limit)
				if err != nil {
					fail(err)
					return false
				}
				return res.Allowed > 0
			}
		}},
	}
}

// failOnce returns a function that reports the first error it is given. It
// is safe in RunParallel's goroutines, unlike b.Fatal.
func failOnce(b *testing.B) func(error) {
	var failed atomic.Int64
	return func(err error) {
		if failed.Add(1) == 1 {
			b.Error(err)
		}
	}
}

// benchKey returns a key of this process's benchmarks.
func benchKey(name string, i int64) string {
	return "bench-" + strconv.Itoa(os.Getpid()) + "-" + name + "-" + strconv.FormatInt(i, 10)
}

// BenchmarkPaired runs the two limiters of BenchmarkDecision in turns, one
// decision of each per operation (which goes first alternates), so that both
// meet the same conditions. On a shared VM whose speed drifts from one second
// to the next, separate runs can differ by more than the limiters do; paired
// ones cannot. It reports the mean latency of a decision with each (lua-µs,
// redis_rate-µs) and their ratio; with 32 callers the latency includes
// queueing behind the other callers, of both kinds.
//
//	go test -run '^$' -bench Paired -benchtime 20000x -count 5 ./solutions/redisbucket/
func BenchmarkPaired(b *testing.B) {
	rdb := benchRedis(b)
	limiters := benchLimiters(rdb, failOnce(b))
	var keys atomic.Int64
	for _, path := range []string{"admit", "deny"} {
		for _, callers := range []int{1, 32} {
			b.Run(path+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				var tries [2]decide
				var ks [2]string
				for i, l := range limiters {
					tries[i] = l.new(path == "admit")
					ks[i] = benchKey(l.name+"-"+path, keys.Add(1))
					tries[i](ks[i])
				}
				var spent [2]atomic.Int64 // nanoseconds in each limiter
				// pair makes one decision with each limiter, first is first.
				pair := func(first int) {
					for j := range 2 {
						i := (first + j) % 2
						start := time.Now()
						tries[i](ks[i])
						spent[i].Add(int64(time.Since(start)))
					}
				}
				if callers == 1 {
					for first := 0; b.Loop(); first = 1 - first {
						pair(first)
					}
				} else {
					var turn atomic.Int64
					b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
					b.RunParallel(func(pb *testing.PB) {
						for first := int(turn.Add(1) % 2); pb.Next(); first = 1 - first {
							pair(first)
						}
					})
				}
				lua := float64(spent[0].Load()) / float64(b.N) / 1e3
				rr := float64(spent[1].Load()) / float64(b.N) / 1e3
				b.ReportMetric(lua, "lua-µs")
				b.ReportMetric(rr, "redis_rate-µs")
				b.ReportMetric(lua/rr, "lua/redis_rate")
			})
		}
	}
}

// reportRate adds decisions per second to b's results.
func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// benchRedis connects to the real Redis, with a pool large enough for 32
// callers, or skips b.
func benchRedis(b *testing.B) *redis.Client {
	b.Helper()
	url := os.Getenv("REDIS_URL")
	switch url {
	case "off":
		b.Skip("REDIS_URL=off: the benchmark compares limiters on a real Redis")
	case "":
		url = "redis://127.0.0.1:6379"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	redisenv.Tune(opt)
	opt.PoolSize = 64
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Skipf("no Redis at %s (%v): the benchmark compares limiters on a real Redis", url, err)
	}
	b.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, "*bench-"+strconv.Itoa(os.Getpid())+"-*", 100).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})
	return rdb
}
