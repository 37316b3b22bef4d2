package model

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"ratelab/model/ties"
	"slices"
	"time"
)

// Sim is a deterministic discrete-event simulation of the fake GPU server in
// virtual time: Slots requests worked on at once for Work each, a FIFO line
// in front of them, and open-loop clients that give up after their timeout.
// Optionally the line is bounded (load shedding), requests that waited past
// a deadline are dropped unworked, each client has a token bucket, and
// clients retry with exponential backoff.
//
// It runs the same mechanism as the closed form Unprotected, one request at
// a time instead of as a fluid, so it also covers the cases the closed form
// does not (shedding, deadlines, buckets, retries) and gives every request's
// outcome and latency. For the unprotected server its successes are the
// closed form's rounded up to a whole row of Slots, because the server
// starts Slots requests at a time where the fluid drains smoothly: 216, 144
// and 112 at 120, 160 and 240 per second (8 slots of 100 ms, T = 1 s,
// D = 10 s), against the closed form's 216, 144 and 108. The real flood
// measures 112 too. With shedding it gives the lesson's 816 successes and a
// p99 of 300 ms.
//
// It has no randomness except the jitter of retries, which comes from a
// seeded generator: the same Sim always gives the same result.
//
// Ties are decided by package ties, as the floods decide them: client i
// sends request seq at ties.Send(Rate, seq) + ties.Schedule(i), an answer
// due at exactly the client's timeout is a timeout (ties.GiveUp), and at
// one instant timeouts are handled first, then slots that finish, then
// arrivals. The simulation needs none of the harness's timers: its storm (a
// flood at 400,000/s for 1 ms) takes arrivals due at one instant in
// sequence order, as ties.Start makes the measured storm do.
type Sim struct {
	Slots int           // requests worked on at once (8)
	Work  time.Duration // how long one request holds a slot (100 ms)
	// MaxWaiting bounds the line: an arrival that finds MaxWaiting requests
	// waiting is shed, answered 503 at once. 0 means no bound.
	MaxWaiting int
	// Deadline is the longest a request may wait for a slot and still be
	// worked on: one that waited longer is answered 503 when it reaches the
	// front, without taking the slot. 0 turns the check off.
	Deadline time.Duration
	// DropAbandoned makes the server notice clients that gave up: their
	// requests leave the line. The protected modes do this (they wait with
	// the request's context). The unprotected server does not: it works on
	// every request it accepted, and the work done after its client left is
	// dead work.
	DropAbandoned bool
	// BucketRate and BucketBurst give each client (by name) a token bucket
	// that starts full, refills at BucketRate tokens per second up to
	// BucketBurst, and costs one token per request; a request finding less
	// than one token is answered 429 at once. BucketRate 0 means no bucket.
	BucketRate  float64
	BucketBurst float64
	// Clients are the open-loop senders.
	Clients []SimClient
	// SampleEvery, if positive, records the line's length and the dead work
	// so far at every multiple of it, until the last request is done.
	SampleEvery time.Duration
	// Overload, if set, adds the overload refinements of task 9: the
	// line's order, a queue timeout, client deadlines, a line bounded in
	// time, priority and a per-client cap (see Overload).
	Overload *Overload
}

// SimClient is one open-loop sender: Rate requests per second for Duration,
// floor(Rate·Duration) in all, each giving up after Timeout.
type SimClient struct {
	Name     string        // its bucket's key
	Rate     float64       // requests per second
	Duration time.Duration // how long it sends
	Timeout  time.Duration // each attempt's timeout
	Retry    Retry         // what it does after a 429, a 503 or a timeout
	// Batch marks a client whose requests wait behind every interactive
	// one; it changes nothing unless Overload.Priority is on.
	Batch bool
}

// Retry is a client's retry policy. The zero value never retries.
type Retry struct {
	// MaxAttempts counts every attempt, the first included; 0 or 1 means no
	// retries.
	MaxAttempts int
	// Attempt n (0 for the first retry) waits min(Cap, Base·2ⁿ), or with
	// Jitter a uniformly random time between 0 and that ("full jitter").
	Base, Cap time.Duration
	Jitter    bool
	// HonorRetryAfter waits at least the server's Retry-After.
	HonorRetryAfter bool
	// Seed seeds the jitter; the same seed gives the same delays.
	Seed uint64
}

// SimOutcome is how a simulated request ended, named as results.Outcome.
type SimOutcome string

// The outcomes of a simulated request.
const (
	SimOK      SimOutcome = "200"     // answered in time
	SimLimited SimOutcome = "429"     // its client's bucket was empty
	SimShed    SimOutcome = "503"     // the line was full, or it waited past the deadline
	SimTimeout SimOutcome = "timeout" // its client gave up
)

// SimRequest is one request of a client, retries included.
type SimRequest struct {
	Client   int           // index into Sim.Clients
	Seq      int           // its place in the client's schedule, from 0
	Sent     time.Duration // when its first attempt was sent
	Outcome  SimOutcome    // the outcome of its last attempt
	Latency  time.Duration // from Sent to the last answer, or to the last timeout
	Attempts int
	// Waited is how long the last attempt that got a slot waited in line
	// for it: its queue delay.
	Waited time.Duration
}

// SimStats are the server's counts, named as results.ServerStats.
type SimStats struct {
	Received   int // attempts that reached the server
	Finished   int // work completed, dead included
	Dead       int // work completed after the client had gone
	Shed       int // 503 without a slot: the line was full
	Expired    int // 503 at the front of the line: waited past the deadline
	Limited    int // 429
	MaxWaiting int // the longest the line was
	// QueueTimedOut counts 503s of Overload's queue timeout, and
	// InFlightLimited its per-client cap's 429s (also in Limited).
	QueueTimedOut, InFlightLimited int
	// MaxClientInFlight is the most requests one client (by name) had in
	// the server at once, in line or in a slot: counted only while
	// Overload's per-client cap is on, 0 otherwise.
	MaxClientInFlight int
}

// SimSample is the server at one instant.
type SimSample struct {
	At      time.Duration
	Waiting int // requests in line
	Dead    int // dead work so far
}

// SimResult is what a Sim run produced.
type SimResult struct {
	Requests []SimRequest // every request, ordered by first send time
	Stats    SimStats
	// SendEnd is when the last first attempt was sent. ClientsDone is when
	// the last client had its answer or gave up, and WaitingAtClientsDone
	// how many requests still waited in line then (the flood's
	// server_after_flood). Done is when the last thing happened: the last
	// work finished or the last client gave up.
	SendEnd, ClientsDone, Done time.Duration
	WaitingAtClientsDone       int
	Samples                    []SimSample
}

// Count returns how many requests of client c (or of all clients, for c < 0)
// ended in outcome o.
func (r *SimResult) Count(c int, o SimOutcome) int {
	n := 0
	for _, q := range r.Requests {
		if (c < 0 || q.Client == c) && q.Outcome == o {
			n++
		}
	}
	return n
}

// Attempts returns how many attempts the clients sent, retries included.
func (r *SimResult) Attempts() int {
	n := 0
	for _, q := range r.Requests {
		n += q.Attempts
	}
	return n
}

// Quantile returns the latency at quantile q (0 to 1) of client c's requests
// (all clients for c < 0) that ended in o, by nearest rank, or 0 if none did.
func (r *SimResult) Quantile(c int, o SimOutcome, q float64) time.Duration {
	var lat []time.Duration
	for _, x := range r.Requests {
		if (c < 0 || x.Client == c) && x.Outcome == o {
			lat = append(lat, x.Latency)
		}
	}
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := int(math.Ceil(q*float64(len(lat)))) - 1
	return lat[min(max(i, 0), len(lat)-1)]
}

// maxSimRequests bounds a run's size, so that a mistaken rate cannot eat the
// machine: at about a microsecond and a hundred bytes a request, 10 million
// take seconds and a gigabyte.
const maxSimRequests = 10_000_000

// Validate reports every setting that cannot describe a simulation.
func (s Sim) Validate() error {
	var errs []error
	if s.Slots < 1 {
		errs = append(errs, fmt.Errorf("slots %d: want at least 1", s.Slots))
	}
	if s.Work <= 0 {
		errs = append(errs, fmt.Errorf("work %s: want more than 0", s.Work))
	}
	if s.MaxWaiting < 0 || s.Deadline < 0 {
		errs = append(errs, fmt.Errorf("max waiting %d, deadline %s: want 0 (off) or more", s.MaxWaiting, s.Deadline))
	}
	if s.BucketRate < 0 || math.IsNaN(s.BucketRate) || math.IsInf(s.BucketRate, 0) ||
		(s.BucketRate > 0 && !(s.BucketBurst >= 1 && !math.IsInf(s.BucketBurst, 0))) {
		errs = append(errs, fmt.Errorf("bucket rate %v, burst %v: want rate 0 (off), or a positive rate and a burst of at least 1", s.BucketRate, s.BucketBurst))
	}
	if err := s.Overload.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(s.Clients) == 0 {
		errs = append(errs, errors.New("no clients"))
	}
	total := 0.0
	for i, c := range s.Clients {
		if !(c.Rate > 0) || math.IsInf(c.Rate, 0) || c.Duration <= 0 || c.Timeout <= 0 {
			errs = append(errs, fmt.Errorf("client %d: rate %v, duration %s, timeout %s: want all positive", i, c.Rate, c.Duration, c.Timeout))
		}
		if c.Retry.MaxAttempts > 1 && (c.Retry.Base < 0 || c.Retry.Cap < 0) {
			errs = append(errs, fmt.Errorf("client %d: retry base %s, cap %s: want 0 or more", i, c.Retry.Base, c.Retry.Cap))
		}
		total += math.Floor(c.Rate*c.Duration.Seconds()) * float64(max(c.Retry.MaxAttempts, 1))
	}
	if total > maxSimRequests {
		errs = append(errs, fmt.Errorf("up to %.0f attempts: want at most %d", total, maxSimRequests))
	}
	return errors.Join(errs...)
}

// sendAt is when request seq of client ci of the simulation is due.
func sendAt(rate float64, seq, ci int) time.Duration {
	return ties.Send(rate, uint64(seq)) + ties.Schedule(ci)
}

// Run simulates s and returns every request's outcome and the server's
// counts. It fails only if s does not validate.
func (s Sim) Run() (*SimResult, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("model: sim: %w", err)
	}
	r := &run{sim: s, res: &SimResult{}, free: s.Slots, buckets: map[string]*bucket{}, lines: lines{inFlight: map[string]int{}}}
	r.total = make([]int, len(s.Clients))
	r.rng = make([]*rand.Rand, len(s.Clients))
	r.next = make([]event, len(s.Clients))
	n := 0
	for ci, c := range s.Clients {
		r.total[ci] = int(math.Floor(c.Rate * c.Duration.Seconds()))
		n += r.total[ci]
		r.rng[ci] = rand.New(rand.NewPCG(c.Retry.Seed, uint64(ci)))
		if r.total[ci] > 0 {
			r.res.SendEnd = max(r.res.SendEnd, sendAt(c.Rate, r.total[ci]-1, ci))
			r.send(ci, 0)
		}
	}
	r.res.Requests = make([]SimRequest, 0, n)
	for {
		e, ok := r.pop()
		if !ok {
			break
		}
		r.sample(e.at)
		r.now = e.at
		switch e.kind {
		case evTimeout:
			r.timeout(e.att)
		case evExpire:
			r.expire(e.att)
		case evFinish:
			r.finish(e.att)
		case evArrive:
			r.arrive(e.att)
		}
		r.res.Done = max(r.res.Done, r.now)
	}
	r.sample(r.res.Done + r.sim.SampleEvery) // up to the first instant at or after Done
	slices.SortStableFunc(r.res.Requests, func(a, b SimRequest) int {
		if a.Sent != b.Sent {
			return cmp.Compare(a.Sent, b.Sent)
		}
		return a.Client - b.Client
	})
	return r.res, nil
}

// Event kinds, in the order they are handled at one instant.
const (
	evTimeout = iota
	evExpire  // Overload's queue timeout
	evFinish
	evArrive
)

type event struct {
	at   time.Duration
	kind int
	seq  uint64 // breaks ties: first scheduled, first handled
	att  *attempt
}

type events []event

// before orders events: by time, then kind, then when they were scheduled.
func before(a, b event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

func (h events) Len() int           { return len(h) }
func (h events) Less(i, j int) bool { return before(h[i], h[j]) }
func (h events) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)        { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// attempt is one try of a request.
type attempt struct {
	req      int           // index into SimResult.Requests
	client   int           // index into Sim.Clients
	seq      int           // the request's place in its client's schedule
	sent     time.Duration // when this attempt was sent
	n        int           // attempts before this one
	answered bool          // the client has its answer, or gave up
	inLine   bool
	left     bool          // left the line (its client gave up and the server noticed, or it timed out in line)
	arrived  time.Duration // when it joined the line
}

type bucket struct {
	tokens float64
	last   time.Duration
}

// run is the state of one simulation.
type run struct {
	sim     Sim
	res     *SimResult
	events  events
	seq     uint64
	now     time.Duration
	free    int   // idle slots
	lines   lines // the waiting requests
	waiting int   // in every line, not counting those that left
	// slotEnds holds when each busy slot's work ends, for the time bound.
	slotEnds []time.Duration
	buckets  map[string]*bucket
	total    []int        // requests per client
	rng      []*rand.Rand // each client's jitter
	// next holds each client's next first attempt (att nil once it has sent
	// them all). First attempts, most of the events under overload, wait
	// here instead of in the heap.
	next []event

	nextSample time.Duration
}

// send schedules the first attempt of client ci's request seq. Each client's
// arrivals are scheduled one at a time, each by the one before.
func (r *run) send(ci, seq int) {
	at := sendAt(r.sim.Clients[ci].Rate, seq, ci)
	r.seq++
	r.next[ci] = event{at: at, kind: evArrive, seq: r.seq, att: &attempt{req: -1, client: ci, seq: seq, sent: at}}
}

// pop takes the next event: the earliest of the heap's and the clients' next
// first attempts.
func (r *run) pop() (event, bool) {
	ci := -1
	for i, e := range r.next {
		if e.att != nil && (ci < 0 || before(e, r.next[ci])) {
			ci = i
		}
	}
	if len(r.events) > 0 && (ci < 0 || before(r.events[0], r.next[ci])) {
		return heap.Pop(&r.events).(event), true
	}
	if ci < 0 {
		return event{}, false
	}
	e := r.next[ci]
	r.next[ci] = event{}
	return e, true
}

func (r *run) push(at time.Duration, kind int, a *attempt) {
	r.seq++
	heap.Push(&r.events, event{at: at, kind: kind, seq: r.seq, att: a})
}

// sample records the state before the events at t, for every sample instant
// up to t.
func (r *run) sample(t time.Duration) {
	if r.sim.SampleEvery <= 0 {
		return
	}
	for r.nextSample < t {
		r.res.Samples = append(r.res.Samples, SimSample{At: r.nextSample, Waiting: r.waiting, Dead: r.res.Stats.Dead})
		r.nextSample += r.sim.SampleEvery
	}
}

// arrive handles an attempt reaching the server: the bucket, the bound on
// the line, then a slot or a place in line.
func (r *run) arrive(a *attempt) {
	if a.req < 0 { // a first attempt: record the request, schedule the next
		a.req = len(r.res.Requests)
		r.res.Requests = append(r.res.Requests, SimRequest{Client: a.client, Seq: a.seq, Sent: a.sent})
		if a.seq+1 < r.total[a.client] {
			r.send(a.client, a.seq+1)
		}
	}
	st := &r.res.Stats
	st.Received++
	c := r.sim.Clients[a.client]
	if s := r.sim; s.BucketRate > 0 {
		b := r.buckets[c.Name]
		if b == nil {
			b = &bucket{tokens: s.BucketBurst, last: r.now}
			r.buckets[c.Name] = b
		}
		b.tokens = math.Min(s.BucketBurst, b.tokens+s.BucketRate*(r.now-b.last).Seconds())
		b.last = r.now
		if b.tokens < 1 {
			st.Limited++
			r.answer(a, SimLimited, seconds((1-b.tokens)/s.BucketRate))
			return
		}
		b.tokens--
	}
	if r.sim.MaxWaiting > 0 && r.waiting >= r.sim.MaxWaiting && !r.shedBatchFor(a) {
		st.Shed++
		r.answer(a, SimShed, r.drain())
		return
	}
	if !r.admitOverload(a) {
		return
	}
	r.push(a.sent+ties.GiveUp(c.Timeout), evTimeout, a)
	r.enqueue(a)
	r.dispatch()
	// Counted after dispatch: a request that finds a free slot takes it
	// without ever waiting, as the server counts it.
	st.MaxWaiting = max(st.MaxWaiting, r.waiting)
}

// dispatch hands idle slots to the head of the line.
func (r *run) dispatch() {
	for r.free > 0 {
		a := r.serveNext()
		if a == nil {
			break
		}
		if d := r.sim.Deadline; d > 0 && r.now-a.sent > d || r.refuseAtFront(a) {
			r.res.Stats.Expired++
			r.gone(a)
			if !a.answered {
				r.answer(a, SimShed, r.drain())
			}
			continue
		}
		r.free--
		r.res.Requests[a.req].Waited = r.now - a.arrived
		r.slotEnds = append(r.slotEnds, r.now+r.sim.Work)
		r.push(r.now+r.sim.Work, evFinish, a)
	}
}

// finish handles a slot's work ending.
func (r *run) finish(a *attempt) {
	r.free++
	r.endSlot()
	r.gone(a)
	r.res.Stats.Finished++
	if a.answered {
		r.res.Stats.Dead++
	} else {
		r.answer(a, SimOK, 0)
	}
	r.dispatch()
}

// timeout handles a client giving up on attempt a, if it has no answer yet.
func (r *run) timeout(a *attempt) {
	if a.answered {
		return
	}
	if a.inLine && r.sim.DropAbandoned {
		r.leave(a)
	}
	r.answer(a, SimTimeout, 0)
}

// answer ends attempt a with outcome o, and retries it if its client would.
// retryAfter is the server's Retry-After, if any.
func (r *run) answer(a *attempt, o SimOutcome, retryAfter time.Duration) {
	a.answered = true
	r.res.ClientsDone, r.res.WaitingAtClientsDone = r.now, r.waiting
	req := &r.res.Requests[a.req]
	req.Outcome, req.Attempts = o, a.n+1
	req.Latency = r.now - req.Sent
	p := r.sim.Clients[a.client].Retry
	if o == SimOK || a.n+1 >= p.MaxAttempts {
		return
	}
	delay := min(p.Cap, p.Base<<min(a.n, 40))
	if p.Base > 0 && delay < 0 {
		delay = p.Cap // overflow
	}
	if p.Jitter && delay > 0 {
		delay = time.Duration(r.rng[a.client].Int64N(int64(delay) + 1))
	}
	if p.HonorRetryAfter {
		delay = max(delay, retryAfter)
	}
	next := &attempt{req: a.req, client: a.client, seq: a.seq, sent: r.now + delay, n: a.n + 1}
	r.push(next.sent, evArrive, next)
}

// drain is the Retry-After of a 503: how long the line takes to clear, in
// whole seconds rounded up, at least 1.
func (r *run) drain() time.Duration {
	return seconds(float64(r.waiting) * r.sim.Work.Seconds() / float64(r.sim.Slots))
}

// seconds rounds s up to whole seconds, at least 1, as Retry-After does.
func seconds(s float64) time.Duration {
	return time.Duration(math.Max(1, math.Ceil(s))) * time.Second
}
