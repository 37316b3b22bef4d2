package vsession

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/harness"
)

// windowScript is a stand-in for task 6's graded script (this package's
// tests must build without solutions/): a fixed window of ARGV[1] requests
// per second per key, whose key expires with the window.
var windowScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], 1000) end
if n <= tonumber(ARGV[1]) then return 1 end
return 0`)

// windowLimiter is windowScript as a fakegpu.Limiter on rdb.
type windowLimiter struct {
	rdb   *redis.Client
	limit int
}

func (l windowLimiter) TryTake(key string, _ float64) (bool, time.Duration) {
	ok, err := windowScript.Run(context.Background(), l.rdb, []string{"w:" + key}, l.limit).Int()
	return err == nil && ok == 1, time.Second
}

// windowHost serves windowLimiter in mode redis, admitting at once what
// it lets through (no slots: what is tested is the sharing).
func windowHost() Host {
	return Host{
		NewServer: unprotected,
		NewRedisServer: func(cfg fakegpu.Config, rdb *redis.Client, opts ...fakegpu.Option) (*fakegpu.Server, error) {
			lim := windowLimiter{rdb, 10}
			admit := fakegpu.AdmissionFunc(func(w http.ResponseWriter, r *http.Request, _ *fakegpu.Job) {
				if ok, _ := lim.TryTake(r.Header.Get("X-Client-Id"), 1); !ok {
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			return fakegpu.New(cfg, append(opts, fakegpu.WithAdmission(admit), fakegpu.WithLimiter(lim))...)
		},
	}
}

// Four workers in mode redis share the session's Redis, each over a client
// of its own, and take the connections in turn; the keyspace is read
// during the flood and after a burst of distinct clients, and its TTLs run
// on the bubble's clock: a key with 1 s to live is gone 1.5 s of virtual
// time later, though far less real time passed.
func TestSessionWorkersShareRedis(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = fakegpu.ModeRedis
	flood := []harness.Options{{Name: "shared", Rate: 100, Duration: 2 * time.Second, Timeout: time.Second,
		NewConnections: true, Header: http.Header{"X-Client-Id": {"alice"}}}}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = "client-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	start := time.Now()
	reps := converseWith(t, windowHost(),
		Request{Op: OpFlush},
		Request{Op: OpStart, Config: &cfg, Workers: 4},
		Request{Op: OpFlood, Floods: flood, ScanEvery: 500 * time.Millisecond},
		Request{Op: OpFinish},
		Request{Op: OpBurst, Burst: &harness.BurstOptions{IDs: ids}},
		Request{Op: OpKeyspace},
		Request{Op: OpKeyspace, Wait: 1500 * time.Millisecond},
		Request{Op: OpStop},
	)
	require.Len(t, reps, 8)
	for i, rep := range reps {
		require.Empty(t, rep.Error, "reply %d", i)
	}
	run := reps[2].Runs[0]
	assert.GreaterOrEqual(t, run.OK, int64(20), "10 a second, shared")
	assert.LessOrEqual(t, run.OK, int64(30), "10 a second, shared, not 10 per worker")
	require.Len(t, run.Workers, 4)
	for i, w := range run.Workers {
		assert.Equal(t, int64(50), w.Received, "worker %d: round robin hands each a quarter", i)
	}
	assert.Equal(t, int64(200), run.ServerFinal.Received, "the flood's stats are the workers' sum")
	require.Len(t, reps[3].Workers, 4)
	require.NotEmpty(t, reps[2].Keys, "the keyspace was read during the flood")
	for _, k := range reps[2].Keys {
		assert.Equal(t, "w:alice", k.Key)
		assert.True(t, k.PTTL > 0 && k.PTTL <= time.Second, "PTTL %v", k.PTTL)
	}
	assert.Len(t, reps[5].Keys, 100, "one key per client of the burst")
	assert.Empty(t, reps[6].Keys, "every key expired in virtual time")
	assert.Equal(t, 1500*time.Millisecond, reps[6].Now.Sub(reps[5].Now))
	t.Logf("in %s of real time", time.Since(start).Round(time.Millisecond))
}

// OpCost times a mode-redis server on the wall clock against a miniredis
// of its own, outside the bubble, whose clock stands still meanwhile.
func TestCostOfARedisLimiter(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = fakegpu.ModeRedis
	reps := converseWith(t, windowHost(),
		Request{Op: OpStop},
		Request{Op: OpCost, Cost: &CostRequest{Server: &cfg, Keys: 10}},
	)
	require.Len(t, reps, 2)
	require.Empty(t, reps[1].Error)
	require.Len(t, reps[1].Costs, 1)
	c := reps[1].Costs[0]
	assert.Equal(t, "server redis", c.Name)
	assert.Positive(t, c.PerCall)
	assert.Positive(t, c.Calls)
	assert.Equal(t, reps[0].Now, reps[1].Now, "the bubble's clock stood still")
	t.Logf("%s per request", c.PerCall)
}
