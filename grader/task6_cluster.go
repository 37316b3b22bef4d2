package grader

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"ratelab/fakegpu"
	"ratelab/internal/redisenv"
	"ratelab/results"
)

// Task 6 on a Redis Cluster, where a rate limiter goes once one Redis is
// not enough: the grader forms a private cluster of three primaries and
// three replicas (redisenv.StartCluster) and runs the learner's script on it
// through cluster clients, one per simulated worker, as the plumbing does
// (EVALSHA, EVAL when the node lacks the script), on the wall clock.
//
// The contract passes the script one key, KEYS[1] = "ratelab:bucket:" +
// the client's id, built by the plumbing the learner does not edit; no
// braces, so no hash tag. A script that touches only KEYS[1] runs on any
// cluster. One that builds another key (a second key per client, a global
// counter) reaches a slot another primary may own, and Redis refuses it
// there: the grader names that, and the fix, in the learner's file.

// Names of task 6's cluster checks.
const (
	task6CheckClusterRuns   = "Cluster: the script runs on a Redis Cluster, touching only its own key's slot"
	task6CheckClusterBound  = "Cluster: each of many clients over every slot stays within burst + rate × time"
	task6CheckClusterSpread = "Cluster: many clients spread the scripts over the three primaries"
	task6CheckClusterHot    = "Cluster: one hot client stays within its bound, all on one primary"
)

// task6ClusterPlanned lists the cluster checks, in the order they are
// recorded.
func task6ClusterPlanned() []planned {
	return []planned{
		{task6CheckClusterRuns, 1},
		{task6CheckClusterBound, 1},
		{task6CheckClusterSpread, 1},
		{task6CheckClusterHot, 1},
		{task6CheckClusterFailover, 1},
	}
}

// task6KeyPrefix is the plumbing's redisbucket.KeyPrefix: the cluster
// stage names each client's bucket as the plumbing does (a test keeps the
// two equal).
const task6KeyPrefix = "ratelab:bucket:"

// The cluster stage's two floods, each run from task6Workers cluster
// clients at once.
const (
	// task6ClusterClientsMin and task6ClusterClientsMax bound how many
	// clients the spread flood has (random between them): with 96 or more
	// ids hashed over three thirds of the slots, each primary's share is
	// within a few percent of a third.
	task6ClusterClientsMin, task6ClusterClientsMax = 96, 192
	// task6ClusterRate and task6ClusterBurst are the spread flood's
	// buckets, smaller than the lesson's so that every client's bound binds
	// at task6ClusterSendRate, four times the rate, without thousands of
	// calls a second per client.
	task6ClusterRate, task6ClusterBurst = 5.0, 5.0
	task6ClusterSendRate                = 20.0
	// task6ClusterDuration is how long each flood sends.
	task6ClusterDuration = 1500 * time.Millisecond
	// task6SpreadMin is the least share of the spread flood's scripts each
	// primary must run: a third is even; 96 random ids put each primary
	// below 15% about once in ten thousand.
	task6SpreadMin = 0.15
	// task6ClusterCallTimeout bounds each call: well above a loopback
	// round trip on a busy machine, so a call that runs out says the
	// machine, or a script that blocks Redis, not a verdict.
	task6ClusterCallTimeout = time.Second
)

// task6Cluster is what the cluster stage measured.
type task6Cluster struct {
	topology string // the cluster, for messages
	file     string // the learner's script, for messages
	spread   clusterFlood
	hot      clusterFlood
	hotSlot  int64
	hotNode  string
	// perPrimary is each primary's scripts (EVAL and EVALSHA calls, from
	// its own INFO commandstats) during the spread flood and the hot one.
	spreadCalls, hotCalls []nodeCalls
}

// nodeCalls is one primary's script calls as its INFO commandstats counts
// them over a flood.
type nodeCalls struct {
	addr                   string
	slots                  [2]int
	calls, failed, refused int64
}

// clusterFlood is one flood's tally, from the grader's calls.
type clusterFlood struct {
	rate, burst float64
	clients     []clientTally
	calls       int64 // calls answered, with a decision or an error
	errors      int64 // calls Redis answered with an error
	timeouts    int64 // calls not answered in task6ClusterCallTimeout
	firstError  string
	errorKey    string
}

// clientTally is one client's calls in a flood.
type clientTally struct {
	id                 string
	admitted, refused  int64
	firstSend, lastEnd time.Time
}

// bound is the most a correct bucket admits to c: burst + rate × the time
// from c's first send to its last answer, which contains every instant
// Redis's clock read for it.
func (f *clusterFlood) bound(c clientTally) float64 {
	return f.burst + f.rate*c.lastEnd.Sub(c.firstSend).Seconds()
}

// noCluster says why a grading with opts runs no cluster checks, or ""
// when it does.
func noCluster(opts Options) string {
	switch {
	case opts.NoCluster:
		return "the grading was asked not to form a Redis Cluster (--cluster=false)"
	case !redisenv.ServerAvailable():
		return "no redis-server is installed to form a Redis Cluster with (install Redis 7 to run these checks)"
	}
	return ""
}

// clusterPointsOff gives the cluster checks no points in g's expected
// checks when they cannot run (noCluster), however far the grading gets:
// a machine without redis-server, or a grading asked not to, scores out
// of the other checks alone.
func (g *grading) clusterPointsOff() {
	if noCluster(g.opts) == "" {
		return
	}
	for i, e := range g.expect {
		if slices.ContainsFunc(task6ClusterPlanned(), func(p planned) bool { return p.name == e.name }) {
			g.expect[i].points = 0
		}
	}
}

// clusterTask6 runs the cluster stage, or records its checks skipped (with
// no points) when there is no redis-server to form a cluster with, or the
// grading was asked not to (Options.NoCluster).
func clusterTask6(ctx context.Context, g *grading) error {
	skip := func(why string) error {
		g.logf("  cluster: skipped: %s", why)
		for _, c := range task6ClusterPlanned() {
			g.skipCheck(c.name, 0, why)
		}
		return nil
	}
	if why := noCluster(g.opts); why != "" {
		return skip(why)
	}
	src, err := g.learnerSource()
	if err != nil {
		return err
	}
	c, err := redisenv.StartCluster(ctx, filepath.Join(g.tmp, "redis-cluster"))
	switch {
	case errors.Is(err, redisenv.ErrNoServer):
		return skip(noCluster(Options{}))
	case err != nil:
		return err
	}
	defer c.Close()
	g.logf("  cluster: %s", c)
	g.doc.Notes = append(g.doc.Notes, "task 6's cluster checks ran on "+c.String()+", on the wall clock")
	m, err := measureCluster(ctx, c, src, g.draw("task6 cluster clients"))
	if err != nil {
		return err
	}
	m.file = g.file()
	checkTask6Cluster(g, m)
	g.doc.Cluster = clusterRecord(c)
	// The failover costs a flood of its own (failoverDuration) and the
	// cluster after it, so it runs only for work that failed none of the
	// other floods: work that failed one has a fix to make first, and the
	// corpus's flood-judged wrong variants, which nearly all do, skip it.
	if c := g.task6FloodFailed(); c != "" {
		g.skipCheck(task6CheckClusterFailover, 1, "the failover is judged only for work that fails none of the other floods, and "+c+" failed")
		return nil
	}
	g.logf("  cluster: killing a primary mid-flood ...")
	f, err := measureFailover(ctx, c, src, g.draw("task6 failover clients"))
	if err != nil {
		return err
	}
	g.logf("  cluster failover: %s", f)
	g.doc.Cluster.Failover = &f.Failover
	checkTask6Failover(g, m.file, f)
	return nil
}

// task6FloodFailed names the first of task 6's flood and cluster checks
// (task6Planned) recorded as failed, or returns "" when none was. A check
// left not judged (a busy machine) does not count, and neither do the unit
// checks: the floods never wait on those (the corpus floods its
// flood-judged variants with no unit subtest run).
func (g *grading) task6FloodFailed() string {
	for _, c := range g.doc.Checks {
		if c.Status == results.StatusFail && slices.ContainsFunc(task6Planned(), func(p planned) bool { return p.name == c.Name }) {
			return fmt.Sprintf("%q", c.Name)
		}
	}
	return ""
}

// learnerSource reads the graded script, as replaced if it is.
func (g *grading) learnerSource() (string, error) {
	p := g.file()
	if src, ok := g.opts.Replace[p]; ok {
		p = src
	} else {
		p = filepath.Join(g.opts.Root, filepath.FromSlash(p))
	}
	b, err := os.ReadFile(p)
	return string(b), err
}

// measureCluster runs the spread flood and the hot one on c.
func measureCluster(ctx context.Context, c *redisenv.Cluster, src string, rng *mrand.Rand) (task6Cluster, error) {
	m := task6Cluster{topology: c.String()}
	workers := make([]*redis.ClusterClient, task6Workers)
	for i := range workers {
		opt := &redis.ClusterOptions{Addrs: []string{c.Nodes[0].Addr}, ReadTimeout: task6ClusterCallTimeout, WriteTimeout: task6ClusterCallTimeout}
		redisenv.TuneCluster(opt)
		workers[i] = redis.NewClusterClient(opt)
		defer workers[i].Close()
	}
	script := redis.NewScript(src)
	// Loaded on every primary first, so that no EVALSHA meets NOSCRIPT and
	// the primaries' failed_calls count the script's own errors only.
	for _, n := range c.Primaries() {
		if err := n.Client.ScriptLoad(ctx, src).Err(); err != nil {
			return m, fmt.Errorf("SCRIPT LOAD on %s: %w", n.Addr, err)
		}
	}
	// The cluster is the grading's own, empty at the start, so its keys
	// may come from the grading's seed (a shared Redis needs tags no
	// earlier run used; this one does not): --seed replays which slots,
	// and so which primaries, the clients land on.
	tag := fmt.Sprintf("%08x", rng.Uint32())

	n := task6ClusterClientsMin + rng.IntN(task6ClusterClientsMax-task6ClusterClientsMin+1)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%x", tag, rng.Uint64())
	}
	before, err := primaryCalls(ctx, c)
	if err != nil {
		return m, err
	}
	m.spread = flood(ctx, workers, script, ids, task6ClusterRate, task6ClusterBurst, task6ClusterSendRate, 1)
	after, err := primaryCalls(ctx, c)
	if err != nil {
		return m, err
	}
	m.spreadCalls = diffCalls(before, after)

	cfg := fakegpu.DefaultConfig()
	hot := tag + "hot" + fmt.Sprintf("%04x", rng.Uint32()>>16)
	if m.hotSlot, err = c.Client.ClusterKeySlot(ctx, task6KeyPrefix+hot).Result(); err != nil {
		return m, fmt.Errorf("CLUSTER KEYSLOT: %w", err)
	}
	m.hotNode = c.NodeOfSlot(int(m.hotSlot)).Addr
	before = after
	m.hot = flood(ctx, workers, script, []string{hot}, cfg.BucketRate, cfg.BucketBurst, task6Rate/task6Workers, task6Workers)
	if after, err = primaryCalls(ctx, c); err != nil {
		return m, err
	}
	m.hotCalls = diffCalls(before, after)
	return m, ctx.Err()
}

// flood sends to each of ids at sendRate for task6ClusterDuration from
// senders goroutines (each its own schedule), dealing the calls over the
// workers in turn, and tallies the answers of a bucket of rate and burst.
func flood(ctx context.Context, workers []*redis.ClusterClient, script *redis.Script, ids []string, rate, burst, sendRate float64, senders int) clusterFlood {
	f := clusterFlood{rate: rate, burst: burst, clients: make([]clientTally, len(ids))}
	rateArg := strconv.FormatFloat(rate, 'f', -1, 64)
	burstArg := strconv.FormatFloat(burst, 'f', -1, 64)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	every := time.Duration(float64(time.Second) / sendRate)
	for i, id := range ids {
		f.clients[i].id = id
		for s := range senders {
			wg.Go(func() {
				var t clientTally
				var calls, errs, timeouts int64
				var firstErr string
				// Each sender starts at its own point of the interval, so
				// the calls of all the senders are spread evenly over it.
				offset := every * time.Duration(i*senders+s) / time.Duration(len(ids)*senders)
				for k := 0; ; k++ {
					at := start.Add(offset + time.Duration(k)*every)
					if at.Sub(start) >= task6ClusterDuration || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Until(at))
					w := workers[(i+s+k)%len(workers)]
					sent := time.Now()
					if t.firstSend.IsZero() {
						t.firstSend = sent
					}
					cctx, cancel := context.WithTimeout(ctx, task6ClusterCallTimeout)
					reply, err := script.Run(cctx, w, []string{task6KeyPrefix + id}, rateArg, burstArg, "1").Slice()
					cancel()
					t.lastEnd = time.Now()
					calls++
					switch {
					case err == nil && len(reply) > 0 && reply[0] == int64(1):
						t.admitted++
					case err == nil:
						t.refused++
					case timedOut(err):
						timeouts++
					default:
						errs++
						if firstErr == "" {
							firstErr = strings.TrimSuffix(err.Error(), ".")
						}
					}
				}
				mu.Lock()
				defer mu.Unlock()
				c := &f.clients[i]
				c.admitted += t.admitted
				c.refused += t.refused
				if c.firstSend.IsZero() || (!t.firstSend.IsZero() && t.firstSend.Before(c.firstSend)) {
					c.firstSend = t.firstSend
				}
				if t.lastEnd.After(c.lastEnd) {
					c.lastEnd = t.lastEnd
				}
				f.calls += calls
				f.errors += errs
				f.timeouts += timeouts
				if f.firstError == "" && firstErr != "" {
					f.firstError, f.errorKey = firstErr, task6KeyPrefix+id
				}
			})
		}
	}
	wg.Wait()
	return f
}

// timedOut reports whether err is a call that ran out of time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// primaryCalls reads every primary's INFO commandstats.
func primaryCalls(ctx context.Context, c *redisenv.Cluster) ([]nodeCalls, error) {
	var out []nodeCalls
	for _, n := range c.Primaries() {
		info, err := n.Client.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats on %s: %w", n.Addr, err)
		}
		nc := nodeCalls{addr: n.Addr, slots: n.Slots}
		for _, cmd := range []string{"eval", "evalsha"} {
			s := commandStats(info, cmd)
			nc.calls += s["calls"]
			nc.failed += s["failed_calls"]
			nc.refused += s["rejected_calls"]
		}
		out = append(out, nc)
	}
	return out, nil
}

// commandStats returns the counters of cmd in an INFO commandstats reply,
// such as calls=12,usec=340,...,rejected_calls=0,failed_calls=1 (whole
// numbers only; usec_per_call is left out).
func commandStats(info, cmd string) map[string]int64 {
	out := map[string]int64{}
	v := infoValue(info, "cmdstat_"+cmd)
	for field := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(field, "=")
		if n, err := strconv.ParseInt(val, 10, 64); ok && err == nil {
			out[k] = n
		}
	}
	return out
}

// infoValue returns the value of field in the text of an INFO reply.
func infoValue(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// diffCalls returns after − before, primary by primary.
func diffCalls(before, after []nodeCalls) []nodeCalls {
	out := make([]nodeCalls, len(after))
	for i, a := range after {
		b := before[i]
		out[i] = nodeCalls{addr: a.addr, slots: a.slots, calls: a.calls - b.calls, failed: a.failed - b.failed, refused: a.refused - b.refused}
	}
	return out
}
