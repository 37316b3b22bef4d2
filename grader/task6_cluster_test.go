package grader

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/grader/corpus"
	"ratelab/internal/redisenv"
	"ratelab/results"
	"ratelab/solutions/redisbucket"
)

func TestTask6ClusterNamesKeysAsThePlumbing(t *testing.T) {
	assert.Equal(t, redisbucket.KeyPrefix, task6KeyPrefix)
}

// goodCluster is what the cluster stage measures of a correct script.
func goodCluster() task6Cluster {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spread := clusterFlood{rate: task6ClusterRate, burst: task6ClusterBurst, calls: 5000}
	for i := range 120 {
		spread.clients = append(spread.clients, clientTally{id: "c" + string(rune('a'+i%26)), admitted: 15, refused: 25, firstSend: t0, lastEnd: t0.Add(2 * time.Second)})
	}
	hot := clusterFlood{rate: 70, burst: 20, calls: 800,
		clients: []clientTally{{id: "hot", admitted: 159, refused: 641, firstSend: t0, lastEnd: t0.Add(2 * time.Second)}}}
	return task6Cluster{
		topology: "a private Redis Cluster", file: "exercises/redisbucket/tokenbucket.lua",
		spread: spread, hot: hot, hotSlot: 7000, hotNode: "127.0.0.1:2",
		spreadCalls: []nodeCalls{{addr: "127.0.0.1:1", calls: 1700}, {addr: "127.0.0.1:2", calls: 1600}, {addr: "127.0.0.1:3", calls: 1700}},
		hotCalls:    []nodeCalls{{addr: "127.0.0.1:1"}, {addr: "127.0.0.1:2", calls: 800}, {addr: "127.0.0.1:3"}},
	}
}

// TestTask6ClusterChecks feeds the cluster checks the measurements of
// wrong scripts.
func TestTask6ClusterChecks(t *testing.T) {
	tests := []struct {
		name string
		m    func(*task6Cluster)
		fail []string
	}{
		{"a correct script", func(*task6Cluster) {}, nil},
		// A second key per client, refused on the primaries that do not
		// own its slot.
		{"a key outside the slot", func(m *task6Cluster) {
			m.spread.errors, m.spread.errorKey = 3300, "ratelab:bucket:ab"
			m.spread.firstError = "ERR Script attempted to access a non local key in a cluster node script: 1f0e, on @user_script:44."
		}, []string{task6CheckClusterRuns}},
		// A bucket that refills a thousand times too fast: every call
		// admitted.
		{"a refill far too fast", func(m *task6Cluster) {
			m.spread.clients[7].admitted, m.spread.clients[7].refused = 40, 0
			m.hot.clients[0].admitted = 800
		}, []string{task6CheckClusterBound, task6CheckClusterHot}},
		// A script that refuses a new client: no burst.
		{"an empty first bucket", func(m *task6Cluster) {
			for i := range m.spread.clients {
				m.spread.clients[i].admitted, m.spread.clients[i].refused = 3, 37
			}
		}, []string{task6CheckClusterBound}},
		// Every script on one primary (a cluster with all slots on one node).
		{"one primary does it all", func(m *task6Cluster) {
			m.spreadCalls[0].calls, m.spreadCalls[1].calls, m.spreadCalls[2].calls = 5000, 0, 0
		}, []string{task6CheckClusterSpread}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := goodCluster()
			tt.m(&m)
			g := &grading{task: task6Task(t), doc: &results.Document{}}
			checkTask6Cluster(g, m)
			require.Len(t, g.doc.Checks, len(task6ClusterPlanned())-1, "every cluster check but the failover's")
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

func TestTask6ClusterTimeoutsAreNotTheLearners(t *testing.T) {
	m := goodCluster()
	m.spread.timeouts = 3
	g := &grading{task: task6Task(t), doc: &results.Document{}}
	checkTask6Cluster(g, m)
	for _, c := range g.doc.Checks[:3] {
		assert.Equal(t, results.StatusError, c.Status, "%s: %s", c.Name, c.Message)
		assert.Contains(t, c.Message, "busy machine")
	}
}

// TestTask6ClusterReferenceAndSecondKey forms a real cluster and runs the
// reference script on it, then a script that keeps a second key per client:
// the reference passes every cluster check; the other fails the first,
// with a message that names the file and says what to do.
func TestTask6ClusterReferenceAndSecondKey(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a Redis Cluster and floods it")
	}
	if !redisenv.ServerAvailable() {
		t.Skip("no redis-server in PATH")
	}
	ctx := context.Background()
	root := repoRoot(t)
	c, err := redisenv.StartCluster(ctx, t.TempDir())
	require.NoError(t, err)
	defer c.Close()

	ref, err := os.ReadFile(filepath.Join(root, "solutions", "redisbucket", "tokenbucket.lua"))
	require.NoError(t, err)
	m, err := measureCluster(ctx, c, string(ref), testDraw(t))
	require.NoError(t, err)
	m.file = "solutions/redisbucket/tokenbucket.lua"
	g := &grading{task: task6Task(t), doc: &results.Document{}}
	checkTask6Cluster(g, m)
	for _, c := range g.doc.Checks {
		assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
		t.Logf("%s: %s", c.Name, c.Message)
	}

	variants, err := corpus.Load(root)
	require.NoError(t, err)
	var wrong *corpus.Variant
	for i, v := range variants {
		if v.ID() == "task6/ts-in-a-second-key" {
			wrong = &variants[i]
		}
	}
	require.NotNil(t, wrong)
	replace, err := wrong.Apply(root, t.TempDir())
	require.NoError(t, err)
	src, err := os.ReadFile(replace["exercises/redisbucket/tokenbucket.lua"])
	require.NoError(t, err)
	m, err = measureCluster(ctx, c, string(src), testDraw(t))
	require.NoError(t, err)
	m.file = "exercises/redisbucket/tokenbucket.lua"
	g = &grading{task: task6Task(t), doc: &results.Document{}}
	checkTask6Cluster(g, m)
	runs := findCheck(g.doc, task6CheckClusterRuns)
	require.NotNil(t, runs)
	assert.Equal(t, results.StatusFail, runs.Status, runs.Message)
	assert.Contains(t, runs.Message, "exercises/redisbucket/tokenbucket.lua")
	assert.Contains(t, runs.Message, "in braces")
	assert.Contains(t, runs.Message, "non local key")
	t.Logf("%s: %s", runs.Name, runs.Message)
}

// Without redis-server the cluster checks are skipped, with one line that
// says why, and cost no points.
func TestTask6ClusterSkippedWithoutServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	g := &grading{task: task6Task(t), opts: Options{Impl: Solutions, Root: repoRoot(t)}, doc: &results.Document{}, tmp: t.TempDir()}
	require.NoError(t, clusterTask6(context.Background(), g))
	require.Len(t, g.doc.Checks, len(task6ClusterPlanned()))
	for _, c := range g.doc.Checks {
		assert.Equal(t, results.StatusSkip, c.Status, c.Name)
		assert.Zero(t, c.MaxScore, c.Name)
		assert.Contains(t, c.Message, "no redis-server is installed", c.Name)
	}
	g = &grading{task: task6Task(t), opts: Options{Impl: Solutions, Root: repoRoot(t), NoCluster: true}, doc: &results.Document{}, tmp: t.TempDir()}
	require.NoError(t, clusterTask6(context.Background(), g))
	for _, c := range g.doc.Checks {
		assert.Equal(t, results.StatusSkip, c.Status, c.Name)
		assert.Contains(t, c.Message, "--cluster=false", c.Name)
	}
}

// TestTask6ClusterFailover kills a primary while the reference script
// floods the cluster, and judges it; then again with a script that keeps
// its writes from the replicas (wrong/task6/writes-not-replicated), which
// the failover check fails. The figures are logged.
func TestTask6ClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("forms a Redis Cluster, floods it and kills a primary")
	}
	if !redisenv.ServerAvailable() {
		t.Skip("no redis-server in PATH")
	}
	ctx := context.Background()
	root := repoRoot(t)
	ref, err := os.ReadFile(filepath.Join(root, "solutions", "redisbucket", "tokenbucket.lua"))
	require.NoError(t, err)
	wrong := variantSource(t, root, "task6/writes-not-replicated", "exercises/redisbucket/tokenbucket.lua")
	for _, tt := range []struct {
		name string
		src  string
		want results.Status
	}{{"the reference", string(ref), results.StatusPass}, {"writes kept from the replicas", wrong, results.StatusFail}} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := redisenv.StartCluster(ctx, t.TempDir())
			require.NoError(t, err)
			defer c.Close()
			f, err := measureFailover(ctx, c, tt.src, testDraw(t))
			require.NoError(t, err)
			t.Log(f)
			assert.Positive(t, f.promotedAfter, "the replica never said role:master")
			assert.Positive(t, f.servedAgain, "no key of the lost slots was decided in Redis again")
			assert.Positive(t, f.OpenLost, "no decision was made open while the primary was gone")
			// Every call is bounded by the plumbing's timeout; a hang would
			// take the rest of the flood.
			assert.Less(t, f.longest, failoverDuration/2, "the longest decision")
			g := &grading{task: task6Task(t), doc: &results.Document{}}
			checkTask6Failover(g, "exercises/redisbucket/tokenbucket.lua", f)
			require.Len(t, g.doc.Checks, 1)
			assert.Equal(t, tt.want, g.doc.Checks[0].Status, g.doc.Checks[0].Message)
			t.Log(g.doc.Checks[0].Message)
		})
	}
}

// variantSource returns file as the corpus variant id makes it.
func variantSource(t *testing.T, root, id, file string) string {
	t.Helper()
	variants, err := corpus.Load(root)
	require.NoError(t, err)
	for _, v := range variants {
		if v.ID() == id {
			replace, err := v.Apply(root, t.TempDir())
			require.NoError(t, err)
			b, err := os.ReadFile(replace[file])
			require.NoError(t, err)
			return string(b)
		}
	}
	t.Fatalf("no variant %s", id)
	return ""
}

// goodFailover is what the failover flood measures of a correct script.
func goodFailover() failover {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := failover{Failover: results.Failover{
		Killed: "127.0.0.1:1", KilledAtS: 1.5, Promoted: "127.0.0.1:4", PromotedAfterS: 2.4, ServedAgainAfterS: 2.5,
		DurationS: 6, Clients: 48, LostClients: 2, RatePerS: failoverRate, Burst: failoverBurst, ReplicaKeys: 2,
		Decisions: 5760, OpenLost: 700, OpenSurviving: 300, AdmittedOpen: 500, LongestCallMS: 210, CallTimeoutMS: 200,
	}, promotedAfter: 2400 * time.Millisecond, servedAgain: 2500 * time.Millisecond, longest: 210 * time.Millisecond}
	for _, id := range []string{"a", "b"} {
		// 20 + 2/s × 6 s = 32 at most; 30 from Redis.
		f.lost = append(f.lost, clientTally{id: id, admitted: 30, refused: 60, firstSend: t0, lastEnd: t0.Add(6 * time.Second)})
	}
	f.judgeBound()
	return f
}

// TestTask6FailoverCheck feeds the failover check the measurements of a
// correct script, of one whose buckets never reached the replica, and of
// failovers that cannot be judged.
func TestTask6FailoverCheck(t *testing.T) {
	tests := []struct {
		name string
		m    func(*failover)
		want results.Status
	}{
		{"a correct script", func(*failover) {}, results.StatusPass},
		{"one take lost in replication", func(f *failover) { f.lost[0].admitted = 33 }, results.StatusPass},
		// Every lost client's bucket full again after the failover.
		{"buckets not on the replica", func(f *failover) {
			f.ReplicaKeys = 0
			for i := range f.lost {
				f.lost[i].admitted += 15
			}
		}, results.StatusFail},
		{"no failover in time", func(f *failover) { f.servedAgain = 0 }, results.StatusError},
		// Served again with too little of the flood left to show a replica
		// that forgot its buckets: not judged, even with none over.
		{"a failover too slow to judge", func(f *failover) {
			f.ServedAgainAfterS = failoverDuration.Seconds() - f.KilledAtS - failoverJudgeable()/2
		}, results.StatusError},
		{"a slow machine", func(f *failover) { f.longest, f.LongestCallMS = 900*time.Millisecond, 900 }, results.StatusPass},
		{"no lost client", func(f *failover) { f.LostClients, f.lost = 0, nil }, results.StatusError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFailover()
			tt.m(&f)
			f.judgeBound()
			g := &grading{task: task6Task(t), doc: &results.Document{}}
			checkTask6Failover(g, "exercises/redisbucket/tokenbucket.lua", f)
			require.Len(t, g.doc.Checks, 1)
			c := g.doc.Checks[0]
			assert.Equal(t, tt.want, c.Status, c.Message)
			if c.Status == results.StatusFail {
				shownFailing(t, "task6", c)
				assert.Contains(t, c.Message, "redis.set_repl")
			}
		})
	}
}

func TestTask6FailoverBacksOffAsThePlumbing(t *testing.T) {
	assert.Equal(t, redisbucket.DefaultBackoff, failoverBackoff)
	assert.Equal(t, redisbucket.DefaultTimeout, redisenv.Timeout)
}

// A grading that cannot run the cluster checks gives them no points even
// when it stops before them.
func TestTask6ClusterPointsOffWhenItCannotRun(t *testing.T) {
	task := task6Task(t)
	g := &grading{task: task, opts: Options{NoCluster: true}, expect: expectedChecks(task, false)}
	g.clusterPointsOff()
	for _, e := range g.expect {
		cluster := false
		for _, p := range task6ClusterPlanned() {
			cluster = cluster || p.name == e.name
		}
		assert.Equal(t, cluster, e.points == 0, e.name)
	}
}

// The failover runs only for work that failed none of task 6's floods: a
// failed unit check, or a flood check left not judged, does not stop it.
func TestTask6FailoverGate(t *testing.T) {
	g := &grading{task: task6Task(t), doc: &results.Document{Checks: []results.Check{
		{Name: "unit: starts full, refills at its rate, capped at burst", Status: results.StatusFail},
		{Name: task6CheckBound, Status: results.StatusError},
		{Name: task6CheckClusterRuns, Status: results.StatusPass},
	}}}
	assert.Empty(t, g.task6FloodFailed())
	g.doc.Checks = append(g.doc.Checks, results.Check{Name: task6CheckTTL, Status: results.StatusFail})
	assert.Equal(t, `"`+task6CheckTTL+`"`, g.task6FloodFailed())
}
