package grader

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
	"ratelab/scenario"
)

// Task 8's server mode: each of the four limiters stands where task 3's
// bucket does, in front of task 2's shedding (the reference's, unless the
// graded tree has no solutions/), keyed by X-Client-Id, and is flooded as
// task 3's bucket is: by harness.Flood against the fake GPU, in virtual
// time by default and on the wall clock under --real. The checks judge
// the server's own records: its count of each client's answers and its
// judgement of every 429's Retry-After (fakegpu.Config.Counting).
const (
	// Each key may send task8ServerLimit requests per task8ServerWindow, an
	// average of 5/s; the token bucket refills at that rate and holds
	// task8ServerBurst. A window of 2 s makes a fixed window's waits run
	// from 0 to 2 s, so Retry-After takes the values 1 and 2 and a wait
	// that ignores the boundary shows.
	task8ServerLimit  = 10
	task8ServerWindow = 2 * time.Second
	task8ServerBurst  = 2
	// task8ServerClients clients share the flood in turn, each at
	// task8ServerRate/task8ServerClients = 20/s, four times its limit:
	// every limiter refuses most of it. Together they are 80/s, the
	// GPU's capacity, so the line stays short and 429s, not 503s, do the
	// refusing. Over 10 s each client is admitted about 50 times.
	task8ServerClients  = 4
	task8ServerRate     = 80.0
	task8ServerDuration = 10 * time.Second
	task8ServerTimeout  = time.Second
	task8ServerPrefix   = "client"
)

// The names of task 8's server checks.
const (
	task8CheckServerBound      = "server: each client admitted within its limiter's bound"
	task8CheckServerRetryAfter = "server: every 429's Retry-After is a wait the limiter can have, rounded up"
)

// task8CheckServerPlays judges the graded token bucket on the lesson's two
// plays (scenario.LessonPlays) over HTTP.
const task8CheckServerPlays = "server: the token bucket admits the lesson's steady and spiky plays as its schedule replayed"

// The bucket of the lesson's plays: refill task8PlayLimit tokens per
// task8PlayWindow (4/s), burst task8PlayBurst (scenario.PlayBucketRate and
// PlayBucketBurst). Task 8's bucket takes its rate as a limit per window
// and a burst of at most the limit: 40 per 10 s is the 4/s with room for
// the burst of 10.
const (
	task8PlayLimit  = int(scenario.PlayBucketRate * 10)
	task8PlayWindow = 10 * time.Second
	task8PlayBurst  = int(scenario.PlayBucketBurst)
)

// task8PlayTolerance is how far from the schedule replayed against the
// bucket (model.BucketAdmits) a correct bucket may land in one play: the
// steady play's requests (every 1/6 s) meet the refill (every 1/4 s) at
// exact instants every half second, where a bucket that keeps integer
// nanoseconds and one that keeps floating-point tokens may decide a tie
// differently; each such tie moves the count by at most one, and after it
// the two agree again within a token. The spikes' 30 requests leave 10 µs
// apart, far from any tie: 10 of each, exactly, either way.
const task8PlayTolerance = 1

// task8ServerPlanned lists the server checks.
func task8ServerPlanned() []planned {
	return []planned{{task8CheckServerBound, 1}, {task8CheckServerRetryAfter, 1}, {task8CheckServerPlays, 1}}
}

// task8PlayConfig is the server with the graded token bucket of the
// lesson's plays in front of shedding.
func task8PlayConfig() fakegpu.Config {
	cfg := task8ServerConfig("bucket")
	cfg.CountingLimit, cfg.CountingWindow = task8PlayLimit, task8PlayWindow
	cfg.BucketRate, cfg.BucketBurst = float64(task8PlayLimit)/task8PlayWindow.Seconds(), float64(task8PlayBurst)
	return cfg
}

// playTask8 floods the graded token bucket with each of the lesson's plays
// and judges it against the schedule replayed.
func playTask8(ctx context.Context, g *grading, bin string) error {
	cfg := task8PlayConfig()
	var plays []*results.BucketPlay
	var scheduled []int64
	var last *results.Run
	for _, play := range scenario.LessonPlays() {
		got, err := g.floodChild(ctx, bin, cfg, scenario.PlayOptions(play))
		if err != nil {
			return fmt.Errorf("the %s play: %w", play.Name, err)
		}
		p, err := scenario.PlayResult(play, cfg.BucketRate, cfg.BucketBurst, got[0])
		if err != nil {
			return err
		}
		last = got[0]
		plays, scheduled = append(plays, p), append(scheduled, got[0].Expected)
		g.doc.BucketPlays = append(g.doc.BucketPlays, p)
		g.logf("    play %s: sent %d, admitted %d (replayed %d), refused %d", p.Name, p.Sent, p.Admitted, p.Predicted, p.Refused)
	}
	checkTask8Plays(g, plays, scheduled, last)
	return nil
}

// checkTask8Plays judges the plays: every request of the schedule
// (scheduled, per play) reached the server, and the bucket admitted what
// the schedule replayed against a bucket of the same refill and burst
// admits, within task8PlayTolerance.
func checkTask8Plays(g *grading, plays []*results.BucketPlay, scheduled []int64, run *results.Run) {
	chk := results.Check{Name: task8CheckServerPlays, MaxScore: 1, Measured: map[string]float64{}, Expected: map[string]float64{}}
	pass := len(plays) == len(scenario.LessonPlays()) && len(scheduled) == len(plays)
	var parts []string
	for i, p := range plays {
		ok := i < len(scheduled) && p.Sent == scheduled[i] && p.Sent > 0 && p.Admitted >= p.Predicted-task8PlayTolerance && p.Admitted <= p.Predicted+task8PlayTolerance
		pass = pass && ok
		mark := ""
		if !ok {
			mark = " (wrong)"
		}
		parts = append(parts, fmt.Sprintf("%s: %d of %d admitted, replayed %d%s", p.Name, p.Admitted, p.Sent, p.Predicted, mark))
		chk.Measured[p.Name+"_admitted"], chk.Measured[p.Name+"_refused"] = float64(p.Admitted), float64(p.Refused)
		chk.Expected[p.Name+"_admitted"] = float64(p.Predicted)
	}
	chk.Message = fmt.Sprintf("one client against the token bucket (%d per %s, burst %d) in front of shedding: steady at 6/s for 10 s, and spikes of 30 at once every 6 s for 12 s (5/s on average, barely over the refill); the server counted %s; want what the schedule replayed against a bucket of that refill and burst admits, within %d (a tie between a request and a refill may go either way)",
		task8PlayLimit, task8PlayWindow, task8PlayBurst, strings.Join(parts, "; "), task8PlayTolerance)
	g.checkExact(chk, pass, run)
}

// task8Server is one limiter of the server floods: its name in
// fakegpu.Config.Counting and in results.
var task8Server = []struct{ counting, limiter string }{
	{"fixed", results.LimiterFixed},
	{"log", results.LimiterLog},
	{"counter", results.LimiterCounter},
	{"bucket", results.LimiterBucket},
}

// task8ServerConfig is the server with limiter counting in front of
// shedding.
func task8ServerConfig(counting string) fakegpu.Config {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode, cfg.Counting = fakegpu.ModeBucket, counting
	cfg.CountingLimit, cfg.CountingWindow = task8ServerLimit, task8ServerWindow
	cfg.BucketRate = float64(task8ServerLimit) / task8ServerWindow.Seconds()
	cfg.BucketBurst = task8ServerBurst
	return cfg
}

// serverBound returns the most limiter may admit to one key over span
// seconds from its first request to its last admission, with the reason.
// Windows are aligned on the Unix epoch; a span of S touches at most
// ⌊S/W⌋ + 2 of them and is covered by ⌊S/W⌋ + 1 stretches one window long.
func serverBound(counting string, span float64) (float64, string) {
	L, W := float64(task8ServerLimit), task8ServerWindow.Seconds()
	n := math.Floor(span / W)
	switch counting {
	case "fixed":
		return L * (n + 2), fmt.Sprintf("%d per window, and a span of %.2f s touches at most %.0f windows", task8ServerLimit, span, n+2)
	case "log":
		return L * (n + 1), fmt.Sprintf("%d in any stretch of %.0f s, and %.0f such stretches cover a span of %.2f s", task8ServerLimit, W, n+1, span)
	case "counter":
		return L * (n + 2), fmt.Sprintf("this window's count is part of its estimate, so at most %d per window, and a span of %.2f s touches at most %.0f windows", task8ServerLimit, span, n+2)
	case "bucket":
		return math.Floor(task8ServerBurst + L/W*span), fmt.Sprintf("burst %d + %.0f/s × a span of %.2f s", task8ServerBurst, L/W, span)
	}
	return 0, "unknown limiter"
}

// floodTask8Server floods a server with each limiter in turn and judges
// them, recording the figures in c.
func floodTask8Server(ctx context.Context, g *grading, bin string, c *results.Counting) error {
	d := g.floodDuration(task8ServerDuration)
	var runs []*results.Run
	for _, x := range task8Server {
		cfg := task8ServerConfig(x.counting)
		got, err := g.floodChild(ctx, bin, cfg, harness.Options{
			Name: "server, " + x.limiter, Rate: task8ServerRate, Duration: d, Timeout: task8ServerTimeout,
			Clients: task8ServerClients, ClientPrefix: task8ServerPrefix,
		})
		if err != nil {
			return fmt.Errorf("flood the server with the %s: %w", x.limiter, err)
		}
		run := got[0]
		runs = append(runs, run)
		c.Server = append(c.Server, serverRecord(x.counting, x.limiter, run))
	}
	checkTask8Server(g, c.Server, runs)
	return playTask8(ctx, g, bin)
}

// serverRecord is what the server counted of run, with each client's bound.
func serverRecord(counting, limiter string, run *results.Run) results.CountingServer {
	s := results.CountingServer{
		Limiter: limiter, Run: run.Name, Limit: task8ServerLimit, WindowMS: float64(task8ServerWindow.Milliseconds()),
		RatePerClient: task8ServerRate / task8ServerClients, DurationS: run.DurationS,
	}
	if counting == "bucket" {
		s.Burst = task8ServerBurst
	}
	for i := range uint64(task8ServerClients) {
		key := harness.ClientID(task8ServerPrefix, task8ServerClients, i)
		cc := results.CountingServerClient{Key: key}
		if p := run.ServerFinal.Clients.Client(key); p != nil {
			cc.Admitted, cc.Limited, cc.SpanS = p.Admitted, p.Limited, p.SpanS
			s.MaxRetryAfterS = max(s.MaxRetryAfterS, int64(math.Ceil(p.MaxWaitMS/1000)))
		}
		cc.Bound, _ = serverBound(counting, cc.SpanS)
		s.Clients = append(s.Clients, cc)
	}
	if r := run.ServerFinal.Refusals; r != nil {
		s.Limited429, s.BadRetryAfter, s.Gone = r.Limited.Judged, r.Limited.Bad, r.Limited.Gone
	}
	return s
}

// countingOf returns the Config.Counting name of a limiter's record name.
func countingOf(limiter string) string {
	for _, x := range task8Server {
		if x.limiter == limiter {
			return x.counting
		}
	}
	return ""
}

// checkTask8Server judges the server floods, one record and run per
// limiter, from the server's own records.
func checkTask8Server(g *grading, recs []results.CountingServer, runs []*results.Run) {
	var run *results.Run
	if len(runs) > 0 {
		run = runs[0]
	}
	chk := results.Check{Name: task8CheckServerBound, MaxScore: 1, Measured: map[string]float64{}, Expected: map[string]float64{}}
	pass := len(recs) == len(task8Server)
	seconds := task8ServerDuration.Seconds()
	if len(recs) > 0 {
		seconds = recs[0].DurationS
	}
	var parts []string
	for _, s := range recs {
		var span float64
		for _, cl := range s.Clients {
			span = max(span, cl.SpanS)
		}
		_, why := serverBound(countingOf(s.Limiter), span)
		var cs []string
		for _, cl := range s.Clients {
			ok := cl.Admitted > 0 && cl.Limited > 0 && float64(cl.Admitted) <= cl.Bound
			pass = pass && ok
			mark := ""
			if !ok {
				mark = " (wrong)"
			}
			cs = append(cs, fmt.Sprintf("%d/%.0f in %.2f s%s", cl.Admitted, cl.Bound, cl.SpanS, mark))
			k := keyOf(s.Limiter) + "_" + cl.Key
			chk.Measured[k+"_admitted"], chk.Measured[k+"_limited"], chk.Expected[k+"_admitted_max"] = float64(cl.Admitted), float64(cl.Limited), cl.Bound
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s", s.Limiter, why, strings.Join(cs, ", ")))
	}
	chk.Message = fmt.Sprintf("%d clients each sent %g/s for %.0f s to the fake GPU with each limiter (%d per %.0f s per client; the bucket %d/s, burst %d) in front of shedding; the server counted, per client, admitted/most its limiter allows from the client's first request to its last admission: %s; want every client refused sometimes and never over",
		task8ServerClients, task8ServerRate/task8ServerClients, seconds, task8ServerLimit, task8ServerWindow.Seconds(),
		task8ServerLimit/int(task8ServerWindow.Seconds()), task8ServerBurst, strings.Join(parts, "; "))
	if len(recs) != len(task8Server) {
		chk.Message = fmt.Sprintf("%d of the %d limiters were flooded (a grader bug)", len(recs), len(task8Server))
	}
	g.checkExact(chk, pass, run)

	chk = results.Check{Name: task8CheckServerRetryAfter, MaxScore: 1, Measured: map[string]float64{}, Expected: map[string]float64{"bad": 0}}
	pass = len(runs) == len(task8Server)
	parts = parts[:0]
	var bad []string
	for i, s := range recs {
		pass = pass && s.Limited429 > 0 && s.BadRetryAfter == 0
		parts = append(parts, fmt.Sprintf("%s %d judged, %d wrong, at most %d s", s.Limiter, s.Limited429, s.BadRetryAfter, s.MaxRetryAfterS))
		k := keyOf(s.Limiter)
		chk.Measured[k+"_judged"], chk.Measured[k+"_bad"], chk.Measured[k+"_max_retry_after_s"] = float64(s.Limited429), float64(s.BadRetryAfter), float64(s.MaxRetryAfterS)
		if i < len(runs) && runs[i].ServerFinal.Refusals != nil {
			for _, b := range runs[i].ServerFinal.Refusals.Bad {
				if b.Kind == results.RefusalLimited && len(bad) < 3 {
					bad = append(bad, s.Limiter+": "+describeBad(b))
				}
			}
		}
	}
	chk.Message = fmt.Sprintf("the server judged every 429 as it went out: %s. Want each with one Retry-After of whole seconds, at least 1, equal to the limiter's wait for that request rounded up, and that wait one the limiter can truly have: a fixed window's exactly until the next boundary (a client retrying then finds a fresh window), a log's exactly until the oldest of the client's %d latest admissions, as the server saw them, stops counting (a client retrying then is admitted), a counter's more than 0 and no later than the next window's start plus %.1f s (a full window's weight falling by one request), a bucket's at most one token (%.1f s); 1 µs of slack for the clock readings, no other tolerance, since a client told less comes back too soon and one told more waits for nothing",
		strings.Join(parts, ", "), task8ServerLimit, task8ServerWindow.Seconds()/task8ServerLimit, task8ServerWindow.Seconds()/task8ServerLimit)
	if len(bad) > 0 {
		chk.Message += ". Wrong: " + strings.Join(bad, "; ")
	}
	g.checkExact(chk, pass, run)
}
