// Package shedding is task 2: the admission logic that decides, for each
// /generate request of the fake GPU, whether it is refused at once or waits
// for a slot and gets worked on.
//
// Goal: protect the server so that, however much is thrown at it, it spends
// its slots only on requests that can still be answered in time, and tells
// everyone else "no" at once, in a way a client can act on. Check from cheap
// to expensive:
//
//  1. In the bucket modes, the client's own token bucket: over its allowance
//     means 429 Too Many Requests.
//  2. The length of the line: full means 503 Service Unavailable, before the
//     request joins it (load shedding).
//  3. The wait for a slot, which should end if the client hangs up.
//  4. The deadline: a request that waited too long is dropped with 503
//     instead of being worked on.
//  5. The work, and 200.
//
// Every refusal is one short line of plain text (text/plain, as http.Error
// writes it). Except when the client has already gone or the server is
// closing, it also carries a Retry-After header in whole seconds
// (RetryAfterSeconds): for a 429 the wait the limiter reported, for a 503
// of a full line the DrainTime of that line, and for a 503 past the deadline
// the DrainTime of the line still waiting behind the request.
//
// Run the tests with: go test -tags exercises ./exercises/shedding
package shedding

import (
	"net/http"
	"time"

	"ratelab/fakegpu"
	"ratelab/lab"
)

// Admit must fit the server's Admission hook exactly.
var _ fakegpu.AdmissionFunc = Admit

// RetryAfterSeconds returns d as whole seconds for a Retry-After header:
// rounded UP, and never below 1. The result never overflows, even for
// lab.InfDuration.
func RetryAfterSeconds(d time.Duration) int {
	// Goal: a Retry-After a client can trust. Retrying before it must be
	// pointless, so any fraction of a second counts as a whole one, and
	// "0" would invite an instant retry.
	//
	// TODO(task2): return d in whole seconds, rounded up, at least 1. Think
	// about 0, negative waits, and lab.InfDuration: the largest Duration
	// must not overflow on the way.
	lab.NotImplemented(2, "RetryAfterSeconds")
	return 0
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
	// Goal: turn a length of line into a time, which is what a client
	// refused with 503 wants to know (Little's Law from the previous
	// lesson).
	//
	// TODO(task2): divide the waiting requests by the server's capacity.
	// Keep it exact, in integer Durations rather than floating point: 16
	// waiting on 8 slots of 100 ms is exactly 200 ms. An empty line drains
	// in no time, and a product too large for a Duration must not wrap.
	lab.NotImplemented(2, "DrainTime")
	return 0
}

// Admit implements fakegpu.Admission's order for one request: the client's
// bucket (bucket modes only, 429), the length of the line (503), the wait for
// a slot, the deadline (503), then the work (200).
//
// Admit never returns holding a slot: every path after Acquire releases it.
func Admit(w http.ResponseWriter, r *http.Request, job *fakegpu.Job) {
	// Goal: the five steps of the package comment, in that order. job is
	// your only handle on the GPU: job.Config() for the settings,
	// job.Limiter(), job.ClientKey(), job.Waiting(), job.Acquire(ctx),
	// job.Arrived(), job.Work(), job.Release(), and fakegpu.WriteOK for the
	// 200. The server counts what you do from the status you answer and
	// whether you took a slot.
	//
	// TODO(task2): 1. In the bucket modes job.Limiter() is not nil: take
	// one token from the bucket of job.ClientKey(). If you may not, answer
	// 429 with a Retry-After for the wait the limiter reported. Decide, and
	// say in a comment, what to send when that wait is lab.InfDuration.
	//
	// TODO(task2): 2. If job.Waiting() has already reached cfg.MaxWaiting,
	// answer 503 at once, without touching a slot, with a Retry-After of
	// the line's DrainTime.
	//
	// TODO(task2): 3. Wait for a slot with job.Acquire. Choose its context
	// so that a request whose client hangs up leaves the line instead of
	// being served to nobody. If Acquire fails, answer 503.
	//
	// TODO(task2): 4. Once you hold the slot: if cfg.Deadline is on (not 0)
	// and the request has waited longer than it since job.Arrived(), give
	// the slot back and answer 503 without doing the work, with a
	// Retry-After of the DrainTime of the line still waiting.
	//
	// TODO(task2): 5. Otherwise do the work, give the slot back, and
	// answer with fakegpu.WriteOK.
	lab.NotImplemented(2, "Admit")
}
