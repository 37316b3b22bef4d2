package grader

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"ratelab/internal/redisenv"
	"ratelab/results"
)

// A primary killed mid-flood (issue 30, part 3). Each simulated worker runs
// the learner's script as the plumbing (redisbucket.go) does: the
// plumbing's timeout per call (redisenv.Timeout), and after a failure a
// local bucket per key for the plumbing's back-off, one probe at a time.
// One primary is killed with SIGKILL partway through; its replica takes over
// once the others have counted it failed (cluster-node-timeout), and the
// cluster clients follow the new slot map.
//
// What the learner's script decides here is the state the replica serves
// from: a script whose writes reach the replica (every Redis 7 script's do,
// as their effects) hands it each bucket as it was, so the lost clients'
// buckets carry on across the failover; one that keeps its writes from the
// replicas (redis.set_repl) hands it nothing, and every lost client gets a
// full burst again. The timeout, the local backstop and the back-off are
// the plumbing's, which the unit suites judge (Miniredis/FailOpen,
// Redis/FailOpen): here they are the grader's model of it, measured and
// recorded (results.Failover), not scored.

// The failover flood's schedule and buckets.
const (
	failoverClients  = 48
	failoverDuration = 8 * time.Second
	failoverKillAt   = 1500 * time.Millisecond
	// failoverRate and failoverBurst make a bucket that a failover cannot
	// refill: burst / rate = 10 s against a failover of about 2.5 s, so a
	// replica that starts from empty buckets gives each lost client about
	// burst − rate × 2.5 s = 15 admissions too many, where a replica that
	// has the buckets gives none. Its keys (expiry burst/rate + 1 s after
	// each take) outlive the failover.
	failoverRate, failoverBurst = 2.0, 20.0
	// failoverSendRate is each client's calls a second, ten times its rate,
	// so that its bucket is empty by the kill (20 tokens at 18/s net).
	failoverSendRate = 20.0
	// failoverBackoff is the plumbing's redisbucket.DefaultBackoff (a test
	// keeps the two equal): after a failure a worker answers locally for
	// this long before one call tries Redis again.
	failoverBackoff = 500 * time.Millisecond
	// failoverLostTakes is how many admissions of each lost client the
	// bound forgives: replication is asynchronous, so the kill can take with
	// it a take the primary had answered but not yet sent to the replica.
	// At failoverSendRate and with an empty bucket a client is admitted
	// about every half second, and loopback replication lags by well under
	// a millisecond, so one take at most.
	failoverLostTakes = 1
)

// failover is what a flood that lost a primary measured.
type failover struct {
	results.Failover
	// promotedAfter and servedAgain are results.Failover's PromotedAfterS
	// and ServedAgainAfterS; longest is the longest decision.
	promotedAfter, servedAgain, longest time.Duration
	// lost is each lost client's tally of what Redis decided.
	lost []clientTally
	// mostOver is the lost client furthest over its bound, and by how much.
	mostOver     string
	mostOverBy   float64
	clientsOver  int
	lostAdmitted int64 // admissions Redis decided for the lost clients
}

// localBucket is one worker's backstop bucket of one key, refilled lazily.
type localBucket struct {
	tokens float64
	at     time.Time
}

// take spends a token if there is one at now.
func (b *localBucket) take(now time.Time, rate, burst float64) bool {
	if b.at.IsZero() {
		b.tokens, b.at = burst, now
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// failoverWorker is one simulated worker's plumbing: its cluster client,
// its local buckets and its back-off.
type failoverWorker struct {
	rdb       *redis.ClusterClient
	mu        sync.Mutex
	backstops map[string]*localBucket
	retryAt   time.Time // zero while Redis works
}

// tryRedis reports whether a call at now goes to Redis: yes unless the
// worker is backing off; when the back-off is over, the first call probes
// and moves its end on, as the plumbing's CompareAndSwap does.
func (w *failoverWorker) tryRedis(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.retryAt.IsZero():
		return true
	case now.Before(w.retryAt):
		return false
	}
	w.retryAt = now.Add(failoverBackoff)
	return true
}

// answered records Redis's answer (err nil) or failure at now.
func (w *failoverWorker) answered(now time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.retryAt = time.Time{}
	} else {
		w.retryAt = now.Add(failoverBackoff)
	}
}

// local answers id from the worker's own bucket.
func (w *failoverWorker) local(id string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.backstops[id]
	if b == nil {
		b = &localBucket{}
		w.backstops[id] = b
	}
	return b.take(now, failoverRate, failoverBurst)
}

// measureFailover floods c with failoverClients clients running src,
// kills the first primary at failoverKillAt, and measures the failover.
// c has lost a primary when it returns.
func measureFailover(ctx context.Context, c *redisenv.Cluster, src string, rng *mrand.Rand) (failover, error) {
	out := failover{Failover: results.Failover{
		DurationS: failoverDuration.Seconds(), Clients: failoverClients, RatePerS: failoverRate, Burst: failoverBurst,
		CallTimeoutMS: float64(redisenv.Timeout) / float64(time.Millisecond),
	}}
	workers := make([]*failoverWorker, task6Workers)
	for i := range workers {
		opt := &redis.ClusterOptions{Addrs: []string{c.Nodes[1].Addr, c.Nodes[2].Addr}}
		redisenv.TuneCluster(opt)
		workers[i] = &failoverWorker{rdb: redis.NewClusterClient(opt), backstops: map[string]*localBucket{}}
		defer workers[i].rdb.Close()
	}
	for _, n := range c.Primaries() {
		if err := n.Client.ScriptLoad(ctx, src).Err(); err != nil {
			return out, fmt.Errorf("SCRIPT LOAD on %s: %w", n.Addr, err)
		}
	}
	script := redis.NewScript(src)
	victim := c.Nodes[0]
	var replica *redisenv.ClusterNode
	for _, n := range c.Nodes {
		if !n.Primary && n.PrimaryOf == 0 {
			replica = n
		}
	}
	out.Killed = victim.Addr
	if replica != nil {
		out.Promoted = replica.Addr
	}

	rateArg, burstArg := strconv.FormatFloat(failoverRate, 'f', -1, 64), strconv.FormatFloat(failoverBurst, 'f', -1, 64)
	tag := fmt.Sprintf("%04x", rng.Uint32()>>16) // the grading's own cluster: from its seed, as measureCluster's
	ids := make([]string, failoverClients)
	lost := make([]bool, failoverClients)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%x", tag, rng.Uint64())
		slot, err := c.Client.ClusterKeySlot(ctx, task6KeyPrefix+ids[i]).Result()
		if err != nil {
			return out, fmt.Errorf("CLUSTER KEYSLOT: %w", err)
		}
		lost[i] = c.NodeOfSlot(int(slot)) == victim
		if lost[i] {
			out.LostClients++
		}
	}

	start := time.Now()
	killDue := start.Add(failoverKillAt)
	var mu sync.Mutex
	var killed time.Time   // when the victim was gone, once it is
	var served []time.Time // sends of lost-slot calls Redis decided after the kill was due
	var openLostAt []time.Time
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) / failoverSendRate)
	for i, id := range ids {
		wg.Go(func() {
			var t clientTally // Redis's decisions
			t.id = id
			var admitted, calls, openN, admittedOpen int64
			var longest time.Duration
			var first, last, lastOpen time.Time
			offset := every * time.Duration(i) / time.Duration(len(ids))
			for k := 0; ; k++ {
				at := start.Add(offset + time.Duration(k)*every)
				if at.Sub(start) >= failoverDuration || ctx.Err() != nil {
					break
				}
				time.Sleep(time.Until(at))
				w := workers[(i+k)%len(workers)]
				sent := time.Now()
				if first.IsZero() {
					first = sent
				}
				ok, open := false, true
				if w.tryRedis(sent) {
					cctx, cancel := context.WithTimeout(ctx, redisenv.Timeout)
					reply, err := script.Run(cctx, w.rdb, []string{task6KeyPrefix + id}, rateArg, burstArg, "1").Slice()
					cancel()
					w.answered(time.Now(), err)
					if err == nil {
						open, ok = false, len(reply) > 0 && reply[0] == int64(1)
						if t.firstSend.IsZero() {
							t.firstSend = sent
						}
						t.lastEnd = time.Now()
						if ok {
							t.admitted++
						} else {
							t.refused++
						}
						if lost[i] && sent.After(killDue) {
							mu.Lock()
							served = append(served, sent)
							mu.Unlock()
						}
					}
				}
				if open {
					openN++
					ok = w.local(id, time.Now())
					if ok {
						admittedOpen++
					}
					lastOpen = time.Now()
				}
				last = time.Now()
				longest = max(longest, last.Sub(sent))
				calls++
				if ok {
					admitted++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			out.Decisions += calls
			out.AdmittedOpen += admittedOpen
			out.longest = max(out.longest, longest)
			if bound := failoverBurst + failoverRate*last.Sub(first).Seconds(); float64(admitted) > bound {
				out.OverBound += float64(admitted) - bound
			}
			if lost[i] {
				out.OpenLost += openN
				out.lost = append(out.lost, t)
				if !lastOpen.IsZero() {
					openLostAt = append(openLostAt, lastOpen)
				}
			} else {
				out.OpenSurviving += openN
			}
		})
	}
	// What the replica holds of the lost clients' buckets just before the
	// kill, then the kill, then the replica's promotion, watched from it.
	time.Sleep(time.Until(killDue) - 20*time.Millisecond)
	if replica != nil {
		out.ReplicaKeys = replicaKeys(ctx, replica, ids, lost)
	}
	time.Sleep(time.Until(killDue))
	victim.Stop()
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	out.KilledAt, out.KilledAtS = killed.UTC(), killed.Sub(start).Seconds()
	for replica != nil && ctx.Err() == nil && time.Since(killed) < failoverDuration {
		pctx, cancel := context.WithTimeout(ctx, redisenv.Timeout)
		info, err := replica.Client.Info(pctx, "replication").Result()
		cancel()
		if err == nil && strings.Contains(info, "role:master") {
			out.promotedAfter = time.Since(killed)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	for _, at := range served {
		if d := at.Sub(killed); d > 0 && (out.servedAgain == 0 || d < out.servedAgain) {
			out.servedAgain = d
		}
	}
	for _, at := range openLostAt {
		out.OpenLastAfterS = max(out.OpenLastAfterS, at.Sub(killed).Seconds())
	}
	out.PromotedAfterS, out.ServedAgainAfterS = out.promotedAfter.Seconds(), out.servedAgain.Seconds()
	out.LongestCallMS = float64(out.longest) / float64(time.Millisecond)
	out.judgeBound()
	return out, ctx.Err()
}

// replicaKeys counts the lost clients' buckets that replica holds, read on
// a connection of its own in READONLY mode (a replica otherwise redirects
// every key to its primary). Keys are counted as the replica answers them,
// so a bucket the script wrote only on its primary is not.
func replicaKeys(ctx context.Context, replica *redisenv.ClusterNode, ids []string, lost []bool) int {
	conn := replica.Client.Conn()
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		return 0
	}
	n := 0
	for i, id := range ids {
		if lost[i] && conn.Exists(ctx, task6KeyPrefix+id).Val() == 1 {
			n++
		}
	}
	return n
}

// judgeBound finds the lost clients whose admissions, as Redis decided
// them across the failover, exceed burst + rate × time plus the takes
// replication may lose.
func (f *failover) judgeBound() {
	f.RedisOverBound, f.clientsOver, f.mostOver, f.mostOverBy, f.lostAdmitted = 0, 0, "", 0, 0
	for _, c := range f.lost {
		f.lostAdmitted += c.admitted
		if c.firstSend.IsZero() {
			continue
		}
		bound := f.Burst + f.RatePerS*c.lastEnd.Sub(c.firstSend).Seconds() + failoverLostTakes
		if over := float64(c.admitted) - bound; over > 0 {
			f.clientsOver++
			f.RedisOverBound += over
			if over > f.mostOverBy {
				f.mostOver, f.mostOverBy = c.id, over
			}
		}
	}
}

// String sums f up in a line.
func (f failover) String() string {
	return fmt.Sprintf("primary %s killed %.3f s into the flood: its replica was primary %v later, a key of its slots decided in Redis again after %v; "+
		"the replica held %d of the %d lost clients' buckets at the kill; Redis admitted %.1f over burst + rate × time + %d for the lost clients (%d clients over); "+
		"%d of %d decisions made open (%d for keys of the lost slots, the last %.2f s after the kill, %d for the others), %d admitted; "+
		"%.1f admissions over burst + rate × time over the whole run; longest decision %.0f ms",
		f.Killed, f.KilledAtS, f.promotedAfter.Round(time.Millisecond), f.servedAgain.Round(time.Millisecond),
		f.ReplicaKeys, f.LostClients, f.RedisOverBound, failoverLostTakes, f.clientsOver,
		f.OpenLost+f.OpenSurviving, f.Decisions, f.OpenLost, f.OpenLastAfterS, f.OpenSurviving, f.AdmittedOpen,
		f.OverBound, f.LongestCallMS)
}
