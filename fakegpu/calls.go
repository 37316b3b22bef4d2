package fakegpu

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ratelab/results"
)

// The attempts of each call, as the server sees them: a client that names
// its call with the X-Call-Id header on every attempt (task 4's storm
// clients do; a retry loop resends one request, so the header survives)
// is held to what a retry loop promises, from the server's own clock: one
// attempt open at a time, and no return sooner than a Retry-After said.
// Nothing the client reports is used.

// CallIDHeader names the call an attempt belongs to: every attempt of one
// call, retries included, carries the same value.
const CallIDHeader = "X-Call-Id"

// CallCapacity is the most calls a Server records. Each costs a fixed
// record (about 150 bytes with its id), so the table stays under 200 KB
// however many calls come; the attempts of calls past it are only
// counted. A storm has 400 calls.
const CallCapacity = 1024

// callTable records the attempts of each call (see CallCapacity).
type callTable struct {
	mu        sync.Mutex
	calls     map[string]*callEntry
	untracked int64
}

// callEntry is one call's record. Durations are from the server's
// monotonic clock.
type callEntry struct {
	attempts, open, maxOpen int64
	lastEnd                 time.Time     // when the latest answer was committed; zero before any
	lastRA                  time.Duration // that answer's Retry-After; 0 if none or already judged
	gaps                    int64
	minGap                  time.Duration
	raReturns, early        int64
	worstRA, worstGap       time.Duration // the return that fell furthest short of its Retry-After
}

// callAttempt is one attempt's handle on its call's record.
type callAttempt struct {
	t     *callTable
	e     *callEntry
	ended atomic.Bool
}

// arrive records an attempt of call id that arrived at, and returns its
// handle, or nil if the table is full.
func (t *callTable) arrive(id string, at time.Time) *callAttempt {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = make(map[string]*callEntry)
	}
	e := t.calls[id]
	if e == nil {
		if len(t.calls) >= CallCapacity {
			t.untracked++
			return nil
		}
		e = &callEntry{}
		t.calls[strings.Clone(id)] = e
	}
	if !e.lastEnd.IsZero() {
		gap := at.Sub(e.lastEnd)
		if e.open == 0 {
			if e.gaps == 0 || gap < e.minGap {
				e.minGap = gap
			}
			e.gaps++
		}
		if e.lastRA > 0 {
			if e.raReturns == 0 || e.lastRA-gap > e.worstRA-e.worstGap {
				e.worstRA, e.worstGap = e.lastRA, gap
			}
			e.raReturns++
			if gap < e.lastRA {
				e.early++
			}
			e.lastRA = 0 // each answer is judged by the attempt that follows it
		}
	}
	e.attempts++
	e.open++
	e.maxOpen = max(e.maxOpen, e.open)
	return &callAttempt{t: t, e: e}
}

// end records that the attempt ended at: its answer was committed with
// header h (nil if the client hung up first). Only the first call counts.
func (a *callAttempt) end(at time.Time, h http.Header) {
	if a == nil || !a.ended.CompareAndSwap(false, true) {
		return
	}
	var ra time.Duration
	if h != nil {
		if s, ok := delaySeconds(h.Values("Retry-After")); ok && s <= int64(maxRetryAfterS) {
			ra = time.Duration(s) * time.Second
		}
	}
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	a.e.open--
	if !at.Before(a.e.lastEnd) {
		a.e.lastEnd, a.e.lastRA = at, ra
	}
}

// maxRetryAfterS is the longest Retry-After a call's record judges: a
// Duration holds 292 years.
const maxRetryAfterS = 1 << 32

// callArrived starts recording job as an attempt of the call its
// X-Call-Id names, if any. The attempt ends when its answer is committed
// (callAnswered), when the handler returns, or when the client hangs up,
// whichever is first; the returned func stops watching for the last.
func (s *Server) callArrived(j *Job) (stop func() bool) {
	id := j.r.Header.Get(CallIDHeader)
	if id == "" {
		return func() bool { return false }
	}
	j.call = s.calls.arrive(id, j.arrived)
	if j.call == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(j.r.Context(), func() { j.call.end(time.Now(), nil) })
}

// stats returns the table's records, or nil if no call was ever seen.
func (t *callTable) stats() *results.CallStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil && t.untracked == 0 {
		return nil
	}
	out := &results.CallStats{Capacity: CallCapacity, Calls: make([]results.CallRecord, 0, len(t.calls)), Untracked: t.untracked}
	for id, e := range t.calls {
		r := results.CallRecord{
			ID: id, Attempts: e.attempts, MaxOpen: e.maxOpen, Gaps: e.gaps,
			RetryAfterReturns: e.raReturns, Early: e.early,
		}
		if e.gaps > 0 {
			r.MinGapMS = milliseconds(e.minGap)
		}
		if e.raReturns > 0 {
			r.WorstRetryAfterS, r.WorstGapMS = int64(e.worstRA/time.Second), milliseconds(e.worstGap)
		}
		out.Calls = append(out.Calls, r)
	}
	slices.SortFunc(out.Calls, func(a, b results.CallRecord) int { return strings.Compare(a.ID, b.ID) })
	return out
}
