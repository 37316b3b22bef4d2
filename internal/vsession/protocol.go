// The protocol between a grader and its session child: the requests it
// sends, one JSON object a line, and the replies it reads back.

package vsession

import (
	"encoding/json"
	"sync"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/redisenv"
	"ratelab/provider"
	"ratelab/results"
	"ratelab/scenario"
)

// The operations a Request may ask for, in the order a grader uses them:
// start a server, flood it once or more, finish, stop; then perhaps start
// another. The session ends at the end of its input.
const (
	// OpStart starts a fresh server configured as Request.Config. Only one
	// server runs at a time.
	OpStart = "start"
	// OpFlood runs Request.Floods at once against the server, each from
	// its own client, and replies with their runs (Reply.Runs, in order;
	// nil where a flood could not start, with Reply.Error saying why).
	OpFlood = "flood"
	// OpFinish waits, in virtual time, until the server holds no request
	// (at most DrainCap), and replies with its detailed stats
	// (Reply.Final), as /stats?detail=1 gives them.
	OpFinish = "finish"
	// OpStorm runs Request.Storm against the server with the graded retry
	// loop configured as Request.Retry, and replies with Reply.Storm.
	OpStorm = "storm"
	// OpAmplify runs Request.Amplify likewise, sampling the server's
	// counters as it goes.
	OpAmplify = "amplify"
	// OpScenario runs Request.Scenario, task 7's service and its dependency
	// with the graded breaker configured as Request.Breaker (none if nil),
	// on a network of its own; it needs no server. Reply.Scenario.
	OpScenario = "scenario"
	// OpJudge runs Request.Judge, task 5's strategies with the graded
	// polite client, against a fake Messages API configured as
	// Request.API on a network of its own; it needs no server.
	// Reply.Judge.
	OpJudge = "judge"
	// OpCounting runs task 8's measurements of Request.Counting on the
	// graded limiters; it needs no server. Reply.Counting.
	OpCounting = "counting"
	// OpCost measures on the wall clock, outside the bubble, what the
	// graded code costs per call (Request.Cost, Reply.Costs): computation
	// is free in virtual time. It needs no server.
	OpCost = "cost"
	// OpStop closes the server, if one runs.
	OpStop = "stop"
	// OpBurst sends one request from each client of Request.Burst to the
	// server, and waits for the answers (task 6's distinct clients).
	OpBurst = "burst"
	// OpFlush empties the session's Redis (task 6), starting it if need
	// be.
	OpFlush = "flush"
	// OpKeyspace lets Request.Wait pass, in virtual time, then reads
	// every key of the session's Redis with its PTTL (Reply.Keys): SCAN
	// and PTTL, Redis's own records.
	OpKeyspace = "keyspace"
)

// Request is one instruction from the grader.
type Request struct {
	// Op is one of OpStart, OpFlood, OpFinish and OpStop.
	Op string `json:"op"`
	// Config is OpStart's server.
	Config *fakegpu.Config `json:"config,omitempty"`
	// Workers is how many servers configured as Config OpStart starts
	// behind one listener, which hands them its connections in turn, as
	// worker processes sharing a port (task 6); 0 or 1 for one. In mode
	// redis they share the session's Redis (a miniredis whose clock is
	// the bubble's), each with a client of its own.
	Workers int `json:"workers,omitempty"`
	// ScanEvery, if set, makes OpFlood read the session's Redis (as
	// OpKeyspace does) every ScanEvery of virtual time while its floods
	// run; Reply.Keys holds every key read.
	ScanEvery time.Duration `json:"scan_every,omitempty"`
	// Burst is OpBurst's burst; its URL and Dial are set by the session.
	Burst *harness.BurstOptions `json:"burst,omitempty"`
	// Wait is how long OpKeyspace waits, in virtual time, before it
	// reads.
	Wait time.Duration `json:"wait,omitempty"`
	// NotBefore moves the bubble's clock forward to this instant before
	// the request is carried out, if it is still ahead. A bubble's clock
	// starts at midnight UTC on 2000-01-01, which code could recognise; a
	// grader passes the real time with every request that starts
	// something.
	NotBefore time.Time `json:"not_before,omitzero"`
	// Floods are OpFlood's floods. Their URL is set by the session (path
	// /generate on Addr); Stats, Progress and Dial are set there too.
	Floods []harness.Options `json:"floods,omitempty"`
	// Storm is OpStorm's storm; its BaseURL, Call and Dial are set by the
	// session.
	Storm *scenario.StormOptions `json:"storm,omitempty"`
	// Amplify is OpAmplify's run, set likewise (and its Stats).
	Amplify *scenario.AmplifyOptions `json:"amplify,omitempty"`
	// Retry configures the graded retry loop for OpStorm and OpAmplify.
	Retry *Retry `json:"retry,omitempty"`
	// Scenario is OpScenario's scenario; Listen, Dial and Breaker are set
	// by the session.
	Scenario *scenario.Dependency `json:"scenario,omitempty"`
	// Breaker configures the graded breaker for OpScenario; nil runs the
	// service without one.
	Breaker *Breaker `json:"breaker,omitempty"`
	// Judge is OpJudge's run; its URL, NewPolite, Client and Dial are set
	// by the session.
	Judge *scenario.JudgeOptions `json:"judge,omitempty"`
	// Cost is OpCost's measurement.
	Cost *CostRequest `json:"cost,omitempty"`
	// API is OpJudge's fake Messages API.
	API *provider.Config `json:"api,omitempty"`
	// Counting is OpCounting's measurements.
	Counting *scenario.CountingOptions `json:"counting,omitempty"`
}

// Breaker is how task 7's circuit breaker is configured (its
// BreakerSettings).
type Breaker struct {
	// Window is how many of the latest calls are judged.
	Window int `json:"window"`
	// FailureRatio opens the breaker when more than this share of the
	// window failed.
	FailureRatio float64 `json:"failure_ratio"`
	// MinCalls is the fewest calls judged at all.
	MinCalls int `json:"min_calls"`
	// Cooldown is how long the breaker stays open.
	Cooldown time.Duration `json:"cooldown"`
	// HalfOpenMax is how many trial calls may be out at once.
	HalfOpenMax int `json:"half_open_max"`
}

// Retry is how a storm's or an amplifier's clients retry (task 4's
// RetryOptions, without what the harness sets itself).
type Retry struct {
	// Tries counts every attempt of a call, the first included.
	Tries int `json:"tries"`
	// Base and Cap bound the backoff: attempt n waits up to min(Cap,
	// Base·2ⁿ).
	Base time.Duration `json:"base"`
	Cap  time.Duration `json:"cap"`
	// Jitter draws each wait uniformly below that bound (full jitter).
	Jitter bool `json:"jitter"`
	// HonorRetryAfter waits at least what a Retry-After header says.
	HonorRetryAfter bool `json:"honor_retry_after"`
	// Budget allows this many retries per first attempt; 0 for no budget.
	Budget float64 `json:"budget,omitempty"`
}

// Reply answers one Request.
type Reply struct {
	// Runs are OpFlood's runs, one per flood in the request's order.
	Runs []*results.Run `json:"runs,omitempty"`
	// Final is OpFinish's reading of the server (with several workers,
	// the sum of their counters, and Workers each one's).
	Final   *results.ServerStats  `json:"final,omitempty"`
	Workers []results.ServerStats `json:"workers,omitempty"`
	// Keys are what OpKeyspace, or OpFlood with ScanEvery, read of the
	// session's Redis.
	Keys []redisenv.KeyTTL `json:"keys,omitempty"`
	// Storm is OpStorm's or OpAmplify's result.
	Storm *results.Storm `json:"storm,omitempty"`
	// Scenario is OpScenario's result.
	Scenario *results.Scenario `json:"scenario,omitempty"`
	// Judge is OpJudge's result.
	Judge *results.JudgeReport `json:"judge,omitempty"`
	// Counting is OpCounting's result.
	Counting *results.Counting `json:"counting,omitempty"`
	// Costs are OpCost's measurements, one per part.
	Costs []Cost `json:"costs,omitempty"`
	// Now is the bubble's clock when the reply was written.
	Now time.Time `json:"now"`
	// Stalled says the bubble's clock stood still for StallLimit of real
	// time while the request was being carried out (Error is then
	// StallMessage): the session ends after this reply.
	Stalled bool `json:"stalled,omitempty"`
	// Error says why the request failed; empty on success.
	Error string `json:"error,omitempty"`
}

// replyWriter writes replies from the session and from its watchdog.
type replyWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *replyWriter) write(r Reply) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(r)
}
