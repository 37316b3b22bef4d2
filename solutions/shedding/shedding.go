// Package shedding is the reference for task 2: the admission logic that
// decides, for each /generate request of the fake GPU, whether it is refused
// at once or waits for a slot and gets worked on.
//
// The order matters, and it always goes from cheap to expensive:
//
//  1. In the bucket modes, the client's own token bucket: a client over its
//     allowance gets 429 Too Many Requests, whatever the server's load.
//  2. The length of the line: when MaxWaiting requests already wait, the
//     server is full for everyone, and a newcomer gets 503 Service
//     Unavailable before it costs anything (load shedding).
//  3. The wait for a slot, which ends early if the client hangs up.
//  4. The deadline: a request that waited so long that its client has most
//     likely given up is dropped with 503 instead of being worked on.
//  5. The work itself, and 200.
//
// Every refusal is one short line of plain text (text/plain, as http.Error
// writes it). Except when the client has already gone or the server is
// closing, it also carries a Retry-After header in whole seconds
// (RetryAfterSeconds): for a 429 the wait the limiter reported, for a 503
// of a full line the DrainTime of that line, and for a 503 past the deadline
// the DrainTime of the line still waiting behind the request.
package shedding

import (
	"net/http"
	"strconv"
	"time"

	"ratelab/fakegpu"
	"ratelab/lab"
)

// Admit must fit the server's Admission hook exactly.
var _ fakegpu.AdmissionFunc = Admit

// neverRetryAfter is the Retry-After, in seconds, of a 429 whose limiter
// reported lab.InfDuration: the request can never fit in the client's bucket
// as configured. No wait fixes that, but a Retry-After of 292 years is not
// advice anyone can act on, and leaving the header out invites an instant
// retry. A minute asks the client to back off hard while an operator fixes
// the limit.
const neverRetryAfter = 60

// RetryAfterSeconds returns d as whole seconds for a Retry-After header:
// rounded UP, and never below 1.
//
// Rounding up matters because Retry-After promises that a retry before then
// is pointless: a client told "0" after a 300 ms wait would come straight
// back and be refused again. The result never overflows, even for
// lab.InfDuration.
func RetryAfterSeconds(d time.Duration) int {
	if d <= time.Second {
		return 1 // also covers 0 and negative waits
	}
	// d/time.Second truncates; add one for any remainder. Unlike
	// (d+time.Second-1)/time.Second, this cannot overflow near MaxInt64.
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int(s)
}

// DrainTime returns how long the line in front of a new arrival takes to
// clear: waiting requests / capacity, where capacity is cfg.Slots / cfg.Work
// requests per second. That is waiting × Work / Slots, exact to the
// nanosecond: exactly that when it is a whole number of nanoseconds (16
// waiting on 8 slots of 100 ms is 200 ms, not 199.999999 ms), otherwise
// rounded down or up to one. It returns 0 for waiting ≤ 0 or a config with
// no slots or no work. When waiting × Work overflows a Duration it returns
// lab.InfDuration (or the exact quotient, if it fits and is computed
// without overflow), never a wrapped value.
func DrainTime(waiting int, cfg fakegpu.Config) time.Duration {
	if waiting <= 0 || cfg.Slots <= 0 || cfg.Work <= 0 {
		return 0
	}
	// Integer nanoseconds keep it exact; check before multiplying so the
	// product cannot wrap.
	n := time.Duration(waiting)
	if n > lab.InfDuration/cfg.Work {
		return lab.InfDuration
	}
	return n * cfg.Work / time.Duration(cfg.Slots)
}

// Admit implements fakegpu.Admission's order for one request: the client's
// bucket (bucket modes only, 429), the length of the line (503), the wait for
// a slot, the deadline (503), then the work (200). See the package comment.
//
// Admit never returns holding a slot: every path after Acquire releases it.
func Admit(w http.ResponseWriter, r *http.Request, job *fakegpu.Job) {
	cfg := job.Config()

	// 1. The client's allowance. job.Limiter() is nil in ModeShed, so shed
	// mode never consults (or drains) a bucket. A refusal here is the
	// client's own doing (429), and it costs the server nothing: no place
	// in the line, no slot. It comes before the line check so that a client
	// over its limit hears "you, slow down" rather than "we are busy", even
	// while the line is full.
	if lim := job.Limiter(); lim != nil {
		if ok, wait := lim.TryTake(job.ClientKey(), 1); !ok {
			retry := neverRetryAfter
			if wait != lab.InfDuration {
				retry = RetryAfterSeconds(wait)
			}
			refuse(w, http.StatusTooManyRequests, retry, "too many requests from this client")
			return
		}
	}

	// 2. Load shedding: look at the line BEFORE joining it. Refusing now
	// costs a few bytes; joining a full line costs the client a wait it
	// will probably not survive, and refusing after taking a slot would
	// have made the slot sit idle. The newcomer can come back once the
	// requests ahead of it have drained.
	if waiting := job.Waiting(); waiting >= cfg.MaxWaiting {
		refuse(w, http.StatusServiceUnavailable, RetryAfterSeconds(DrainTime(waiting, cfg)),
			"server busy: too many requests waiting")
		return
	}

	// 3. Wait for a slot with the request's own context. It ends when the
	// client disconnects, so a client that gives up also leaves the line, instead of being served later to
	// nobody: that dead work is exactly what made the unprotected server
	// collapse. context.Background() would keep it waiting regardless. The
	// deadline is not folded into this context on purpose: step 4 needs to
	// see the request reach the front, so the server can count it as
	// expired.
	if err := job.Acquire(r.Context()); err != nil {
		// The client has gone, or the server is closing. Nobody is likely
		// to read this answer; it exists so the handler always answers.
		http.Error(w, "gave up waiting for a slot: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// From here on the job holds a slot. Release does nothing when no slot
	// is held, so this costs nothing on the paths below, which release
	// early; it only matters if something panics in between. A slot that is
	// never given back is lost for good.
	defer job.Release()

	// 4. The deadline. A request that waited longer than Deadline has most
	// likely been abandoned by its client, so 100 ms of GPU time on it
	// would be wasted. Give the slot to the next request first, then
	// answer. Deadline 0 turns the check off.
	if cfg.Deadline > 0 && time.Since(job.Arrived()) > cfg.Deadline {
		job.Release()
		refuse(w, http.StatusServiceUnavailable, RetryAfterSeconds(DrainTime(job.Waiting(), cfg)),
			"server busy: waited past the deadline")
		return
	}

	// 5. The work. Release before writing, so the next request in line
	// starts while this answer is on its way.
	job.Work()
	job.Release()
	fakegpu.WriteOK(w)
}

// refuse answers status with a Retry-After of retryAfter seconds and msg as a
// plain-text body.
func refuse(w http.ResponseWriter, status, retryAfter int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	http.Error(w, msg, status)
}
