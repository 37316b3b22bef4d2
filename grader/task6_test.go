package grader

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/redisenv"
	"ratelab/results"
)

func task6Task(t *testing.T) Task {
	t.Helper()
	task, ok := Lookup("task6")
	require.True(t, ok)
	return task
}

// measuredTask6 is a pair of floods of task 6 as a 2-core machine measured
// them in 10 s.
func measuredTask6() (local, shared *results.Run) {
	local = &results.Run{Name: "4 workers, a limiter each", Reliable: true, OK: 2750, GoodputRPS: 275}
	shared = &results.Run{Name: "4 workers, one bucket in Redis", Reliable: true, OK: 715, GoodputRPS: 71.5}
	return local, shared
}

// goodKeys is what Redis's records say of a correct script.
func goodKeys() task6Keys {
	return task6Keys{
		on: "a private redis-server", refill: 285714285 * time.Nanosecond, scanned: "the whole keyspace",
		reads: 2400, longest: redisenv.KeyTTL{Key: "ratelab:bucket:ab12", PTTL: 1286 * time.Millisecond},
		clients: 2300, burstRan: true, afterBurst: 2300,
	}
}

func TestTask6KeyspaceChecks(t *testing.T) {
	tests := []struct {
		name string
		keys func(*task6Keys)
		fail []string // checks that must fail; the others pass
	}{
		{"a correct script", func(*task6Keys) {}, nil},
		{"keys without an expiry", func(k *task6Keys) {
			k.noExpiryCount, k.noExpiry = 2300, []string{"ratelab:bucket:ab12"}
			k.left = 2300
		}, []string{task6CheckTTL, task6CheckKeyset}},
		{"an expiry of 3 s", func(k *task6Keys) {
			k.longest.PTTL = 3 * time.Second
			k.left = 2300
		}, []string{task6CheckTTL, task6CheckKeyset}},
		{"an expiry 2 ms too long", func(k *task6Keys) { k.longest.PTTL = 1288 * time.Millisecond }, []string{task6CheckTTL}},
		{"a key per request that outlives the bucket", func(k *task6Keys) { k.left = 17 }, []string{task6CheckKeyset}},
		{"no key at all", func(k *task6Keys) { *k = task6Keys{on: k.on, refill: k.refill, burstRan: true, clients: 2000} }, []string{task6CheckTTL}},
		{"the burst did not run", func(k *task6Keys) { k.burstRan = false }, []string{task6CheckKeyset}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, shared := measuredTask6()
			k := goodKeys()
			tt.keys(&k)
			g := &grading{task: task6Task(t), doc: &results.Document{}}
			checkTask6(g, local, shared, 720, 10*time.Second, redisSeen{}, k)
			require.Len(t, g.doc.Checks, len(task6Planned())-1-len(task6ClusterPlanned()), "every check but the cost check (checkTask6Cost) and the cluster checks")
			for _, c := range g.doc.Checks {
				want := wantStatus(c.Name, tt.fail)
				assert.Equal(t, want, c.Status, "%s: %s", c.Name, c.Message)
				if want == results.StatusFail {
					shownFailing(t, "task6", c)
				}
			}
		})
	}
}

func TestTask6RedisGoneIsNotTheLearners(t *testing.T) {
	local, shared := measuredTask6()
	shared.OK = 2100 // every worker answered from its own bucket
	shared.ServerFinal.FailOpen = 1900
	g := &grading{task: task6Task(t), doc: &results.Document{}}
	k := goodKeys()
	k.burstRan = false
	gone := "Redis at redis://127.0.0.1:40123 stopped answering during the flood (dial tcp 127.0.0.1:40123: connect: connection refused)"
	checkTask6(g, local, shared, 720, 10*time.Second, redisSeen{gone: gone}, k)
	for _, c := range g.doc.Checks {
		if c.Name == task6CheckLeak {
			assert.Equal(t, results.StatusPass, c.Status, c.Message)
			continue
		}
		assert.Equal(t, results.StatusError, c.Status, "%s: %s", c.Name, c.Message)
		assert.Contains(t, c.Message, gone)
		assert.Contains(t, c.Message, "this is not your code")
		assert.NotContains(t, c.Message, "busy machine")
	}
}

// In virtual time Redis answers every call at once, so a limiter that
// failed open did so because its script failed: the shared bound is
// judged on the counts as they are, and fails.
func TestTask6FailOpenInVirtualTimeIsTheLearners(t *testing.T) {
	local, shared := measuredTask6()
	shared.Clock = results.ClockVirtual
	shared.OK = 2100 // every worker answered from its own bucket
	shared.ServerFinal.FailOpen = 1900
	g := &grading{task: task6Task(t), doc: &results.Document{}}
	checkTask6(g, local, shared, 720, 10*time.Second, redisSeen{}, goodKeys())
	assert.True(t, shared.Reliable)
	assert.Contains(t, strings.Join(shared.Warnings, "\n"), "the script returned an error")
	c := findCheck(g.doc, task6CheckBound)
	require.NotNil(t, c)
	assert.Equal(t, results.StatusFail, c.Status, c.Message)
	shownFailing(t, "task6", *c)
}

// TestTask6RedisKilledMidFlood kills the private redis-server while the
// shared flood runs: the checks that needed it are errors that say so, not
// a verdict on the code and not "a busy machine".
func TestTask6RedisKilledMidFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and floods it")
	}
	if !redisenv.ServerAvailable() {
		t.Skip("no redis-server in PATH: the grader would use miniredis")
	}
	ctx := context.Background()
	g := &grading{
		task: task6Task(t),
		opts: Options{Impl: Solutions, Root: repoRoot(t), Quick: true, Log: testLog{t}},
		doc:  &results.Document{},
		tmp:  t.TempDir(),
	}
	r, err := g.openRedis(ctx)
	require.NoError(t, err)
	defer r.close()
	require.Equal(t, results.RedisPrivate, r.kind)
	require.NotNil(t, g.doc.Redis)
	assert.Equal(t, results.RedisPrivate, g.doc.Redis.Kind)
	assert.Contains(t, g.doc.Notes[0], "a private redis-server")
	bin, err := g.server(ctx)
	require.NoError(t, err)
	g.sharedFloodStarts = func() {
		time.Sleep(time.Second)
		r.srv.Stop()
	}
	require.NoError(t, floodTask6(ctx, g, bin, r))
	for _, name := range []string{task6CheckBound, task6CheckShare, task6CheckTTL, task6CheckKeyset} {
		c := findCheck(g.doc, name)
		require.NotNil(t, c, name)
		assert.Equal(t, results.StatusError, c.Status, "%s: %s", name, c.Message)
		assert.Contains(t, c.Message, "Redis at "+r.url+" stopped answering during the flood", name)
		assert.NotContains(t, c.Message, "busy machine", name)
	}
}

// TestTask6FloodChecks feeds the flood checks of task 6 the counts of
// wrong scripts and wrong servers; the keyspace is a correct script's.
func TestTask6FloodChecks(t *testing.T) {
	tests := []struct {
		name   string
		floods func(local, shared *results.Run)
		fail   []string // checks that must fail; the others pass
	}{
		{"the reference, as measured", func(_, _ *results.Run) {}, nil},
		// The demonstration needs four limiters. With every connection
		// handed to one worker (the workers not sharing the port with
		// SO_REUSEPORT, or a flood that keeps one keep-alive connection),
		// the client meets one bucket: 718 served, not about 4 × 720.
		{"one worker takes every connection", func(local, _ *results.Run) {
			local.OK, local.GoodputRPS = 718, 71.8
		}, []string{task6CheckLeak}},
		// Connections spread over two of the four workers only: 2 × 720.
		{"two workers of four get the connections", func(local, _ *results.Run) {
			local.OK, local.GoodputRPS = 1436, 143.6
		}, []string{task6CheckLeak}},
		// The script reads TIME's microseconds as milliseconds: (now − ts)
		// × rate / 1000 refills a thousand times too fast, so every request
		// passes the limiter and the four workers serve what their slots
		// allow, 4 × 80/s: 3,150 of 4,000 in 10 s.
		{"microseconds read as milliseconds", func(_, shared *results.Run) {
			shared.OK, shared.GoodputRPS = 3150, 315
		}, []string{task6CheckBound}},
		// The Go side puts the worker's process id in the key: four
		// buckets in Redis, one per worker, which is Break It 1 again.
		{"a key per worker", func(_, shared *results.Run) {
			shared.OK, shared.GoodputRPS = 2740, 274
		}, []string{task6CheckBound}},
		// Lost updates: a read and a write in separate calls let two
		// workers spend the same token, here 9 times.
		{"a few tokens spent twice", func(_, shared *results.Run) {
			shared.OK, shared.GoodputRPS = 729, 72.9
		}, []string{task6CheckBound}},
		// The script reads the microseconds as nanoseconds: it refills a
		// thousand times too slowly, 0.07 tokens a second, so the client
		// gets the burst and nothing after: 20.
		{"microseconds read as nanoseconds", func(_, shared *results.Run) {
			shared.OK, shared.GoodputRPS = 20, 2
		}, []string{task6CheckShare}},
		// A refusal writes ts = now (task 3's forget-elapsed in Lua): at
		// 400/s a request comes every 2.5 ms with 0.175 of a token, which
		// each refusal throws away, so after the burst almost nothing
		// passes: 24.
		{"a refusal writes the time", func(_, shared *results.Run) {
			shared.OK, shared.GoodputRPS = 24, 2.4
		}, []string{task6CheckShare}},
		// A refill 6% short (66/s where 70/s is asked): 20 + 66 × 10 =
		// 680, under the floor of 684 (95% of the bound).
		{"a bucket that refills at 66/s", func(_, shared *results.Run) {
			shared.OK, shared.GoodputRPS = 680, 68
		}, []string{task6CheckShare}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, shared := measuredTask6()
			tt.floods(local, shared)
			g := &grading{task: task6Task(t), doc: &results.Document{}}
			checkTask6(g, local, shared, 720, 10*time.Second, redisSeen{}, goodKeys())
			require.Len(t, g.doc.Checks, len(task6Planned())-1-len(task6ClusterPlanned()), "every check but the cost check (checkTask6Cost) and the cluster checks")
			for _, c := range g.doc.Checks {
				want := results.StatusPass
				if slices.Contains(tt.fail, c.Name) {
					want = results.StatusFail
					shownFailing(t, "task6", c)
				}
				assert.Equal(t, want, c.Status, "%s: %s", c.Name, c.Message)
			}
		})
	}
}

// Task 6 runs in virtual time unless it is given a Redis, which keeps real
// time.
func TestTask6GivenRedisKeepsTheWallClock(t *testing.T) {
	for url, virtual := range map[string]bool{"": true, RedisOff: true, "redis://127.0.0.1:6379": false} {
		g := &grading{task: task6Task(t), opts: Options{Virtual: true, RedisURL: url}}
		_, inSession := g.runner().(virtualRunner)
		assert.Equal(t, virtual, inSession, "--redis %q", url)
		g = &grading{task: task6Task(t), opts: Options{RedisURL: url}}
		_, inSession = g.runner().(virtualRunner)
		assert.False(t, inSession, "--real --redis %q", url)
	}
}
