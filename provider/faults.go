// Faults on purpose: a key's fault plan (PUT /faults) fails some of its
// requests, so that a flood drives a client through every documented path
// and the API records how the client answered each.

package provider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"ratelab/results"
)

// Limits of a fault plan's bookkeeping.
const (
	// maxFaultMarks bounds the failed bodies remembered per key, waiting
	// for the client to send them again: a client that never retries
	// leaves at most this many.
	maxFaultMarks = 1 << 16
	// maxStall is the longest a FaultTimeout request is held when its
	// client never gives up.
	maxStall = 10 * time.Minute
)

// faultState is a key's fault plan and the failed bodies not yet sent
// again.
type faultState struct {
	plan  results.APIFaultPlan
	n     int64 // the key's requests counted since the plan was set
	marks map[paramsID]faultMark
}

// faultMark is one failed request: how it failed, when, and the
// retry-after it was given (0 for none).
type faultMark struct {
	kind       string
	at         time.Time
	retryAfter time.Duration
}

// withPlanDefaults checks p and fills in its defaults.
func withPlanDefaults(p results.APIFaultPlan) (results.APIFaultPlan, error) {
	if p.Every < 2 {
		return p, fmt.Errorf("every %d: want 2 or more (one request in every fails)", p.Every)
	}
	if len(p.Kinds) == 0 {
		p.Kinds = slices.Clone(results.FaultKinds)
	}
	for _, k := range p.Kinds {
		if !slices.Contains(results.FaultKinds, k) {
			return p, fmt.Errorf("fault kind %q: want one of %v", k, results.FaultKinds)
		}
	}
	switch {
	case p.RetryAfterSeconds < 0 || p.RetryAfterSeconds > 3600:
		return p, fmt.Errorf("retry_after_seconds %d: want 0 (default 1) to 3600", p.RetryAfterSeconds)
	case p.RetryAfterSeconds == 0:
		p.RetryAfterSeconds = 1
	}
	return p, nil
}

// handleFaults sets the fault plan of the key named by the query's key,
// counting its requests from 1 again, and answers with the plan in force.
func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, "key: the query must name the API key the plan is for", "")
		return
	}
	var p results.APIFaultPlan
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, "invalid fault plan: "+err.Error(), "")
		return
	}
	p, err := withPlanDefaults(p)
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, "invalid fault plan: "+err.Error(), "")
		return
	}
	a := s.account(key)
	a.mu.Lock()
	a.faults = &faultState{plan: p, marks: make(map[paramsID]faultMark)}
	a.stats.Faults = &results.APIFaultStats{
		Plan: p, Injected: make(map[string]int64), Retried: make(map[string]int64),
		MinRetryAfterGapMS: -1, RetryAfterMS: float64(p.RetryAfterSeconds) * 1000,
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, p)
}

// fault counts one valid request of body id at now against a's plan: it
// records whether the request is a retry of one failed earlier, and
// returns the fault to answer it with, if any, and the retry-after that
// fault gives (0 for none). Call with a.mu held.
func (a *account) fault(now time.Time, id paramsID) (kind string, after time.Duration, ok bool) {
	f := a.faults
	if f == nil {
		return "", 0, false
	}
	st := a.stats.Faults
	if m, ok := f.marks[id]; ok {
		delete(f.marks, id)
		st.Retried[m.kind]++
		if m.retryAfter > 0 {
			gap := now.Sub(m.at)
			if ms := float64(gap) / float64(time.Millisecond); st.MinRetryAfterGapMS < 0 || ms < st.MinRetryAfterGapMS {
				st.MinRetryAfterGapMS = ms
			}
			if gap < m.retryAfter {
				st.RetriedEarly++
			}
		}
	}
	f.n++
	every := int64(f.plan.Every)
	if f.n%every != 0 {
		return "", 0, false
	}
	kind = f.plan.Kinds[(f.n/every-1)%int64(len(f.plan.Kinds))]
	st.Injected[kind]++
	if kind == results.FaultRateLimit {
		after = time.Duration(f.plan.RetryAfterSeconds) * time.Second
		st.RetryAfterSent++
	}
	if len(f.marks) < maxFaultMarks {
		f.marks[id] = faultMark{kind: kind, at: now, retryAfter: after}
	}
	return kind, after, true
}

// serveFault answers a request that a's plan fails with kind, and a
// retry-after of after where the kind has one.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, a *account, kind string, after time.Duration) {
	switch kind {
	case results.FaultRateLimit:
		secs := int(after / time.Second)
		w.Header().Set(HeaderRetryAfter, strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, ErrorRateLimit,
			fmt.Sprintf("This request would exceed your rate limit. Retry after %d s.", secs), "")
	case results.FaultRateLimitBare:
		writeError(w, http.StatusTooManyRequests, ErrorRateLimit, "This request would exceed your rate limit. Slow down.", "")
	case results.FaultOverloaded:
		writeError(w, StatusOverloaded, ErrorOverloaded, "Overloaded", "")
	case results.FaultServerError:
		writeError(w, http.StatusInternalServerError, ErrorAPI, "Internal server error", "")
	case results.FaultTimeout:
		a.mu.Lock()
		a.stats.Faults.Stalled++
		a.stats.Faults.MaxStalled = max(a.stats.Faults.MaxStalled, a.stats.Faults.Stalled)
		a.mu.Unlock()
		t := time.NewTimer(maxStall)
		select {
		case <-r.Context().Done():
		case <-s.closing:
		case <-t.C:
		}
		t.Stop()
		a.mu.Lock()
		a.stats.Faults.Stalled--
		a.mu.Unlock()
		writeError(w, http.StatusGatewayTimeout, ErrorAPI, "the request was held on purpose until its client gave up", "")
	}
}
