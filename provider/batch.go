package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"ratelab/results"
)

// The Message Batches API: POST /v1/messages/batches creates a batch of up
// to Config.MaxBatchRequests requests; GET /v1/messages/batches/{id}
// retrieves it, GET /v1/messages/batches lists the key's batches (newest
// first, paged by limit, after_id and before_id), POST .../{id}/cancel
// cancels it and GET .../{id}/results answers one JSON line per request
// once it has ended. The shapes are the official Go SDK's
// (anthropic-sdk-go/v2 messagebatch.go: MessageBatch,
// MessageBatchIndividualResponse, MessageBatchNewParams).
//
// Processing, like the buckets, is computed lazily from the clock, with no
// goroutine: a key's batched requests are processed one after another, in
// the order their batches were created, each taking 1/BatchRequestsPerSecond,
// so a batch's state at any instant follows from when it was created, what
// was queued before it and when it was cancelled. That works the same on the
// real clock and in a testing/synctest bubble, and Close leaves nothing
// behind.
//
// Batched requests are charged neither the rate limits nor the spend limit,
// and cost results.BatchPriceFraction of the price. Unlike the real API,
// they read and write no cache (all their input is input_tokens), and a
// batch never expires (at the default 100 requests a second a full queue
// of 100,000 takes under 17 minutes, far from the real API's 24 hours).

// Values of Batch.ProcessingStatus.
const (
	BatchInProgress = "in_progress"
	BatchCanceling  = "canceling"
	BatchEnded      = "ended"
)

// Values of BatchResult.Type.
const (
	BatchSucceeded = "succeeded"
	BatchErrored   = "errored"
	BatchCanceled  = "canceled"
	BatchExpired   = "expired" // never sent by this fake
)

// A BatchRequest is one request of a batch: Params is the body it would
// have as POST /v1/messages, and CustomID (1 to 64 letters, digits, - or _,
// unique in the batch) names its result.
type BatchRequest struct {
	CustomID string        `json:"custom_id"`
	Params   MessageParams `json:"params"`
}

// BatchCreateParams is the body of POST /v1/messages/batches.
type BatchCreateParams struct {
	Requests []BatchRequest `json:"requests"`
}

// BatchRequestCounts tallies a batch's requests. As in the real API, every
// request counts as Processing until the whole batch has ended.
type BatchRequestCounts struct {
	Processing int64 `json:"processing"`
	Succeeded  int64 `json:"succeeded"`
	Errored    int64 `json:"errored"`
	Canceled   int64 `json:"canceled"`
	Expired    int64 `json:"expired"`
}

// Batch is a Message Batch as the API describes it. The times that are not
// yet known are null.
type Batch struct {
	ID                string             `json:"id"`
	Type              string             `json:"type"` // "message_batch"
	ProcessingStatus  string             `json:"processing_status"`
	RequestCounts     BatchRequestCounts `json:"request_counts"`
	CreatedAt         time.Time          `json:"created_at"`
	ExpiresAt         time.Time          `json:"expires_at"` // 24 h after creation
	EndedAt           *time.Time         `json:"ended_at"`
	CancelInitiatedAt *time.Time         `json:"cancel_initiated_at"`
	ArchivedAt        *time.Time         `json:"archived_at"`
	// ResultsURL is where the results are, once the batch has ended.
	ResultsURL *string `json:"results_url"`
}

// BatchList is the body of GET /v1/messages/batches: a page of batches,
// newest first.
type BatchList struct {
	Data    []Batch `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// BatchResponse is one line of a batch's results.
type BatchResponse struct {
	CustomID string      `json:"custom_id"`
	Result   BatchResult `json:"result"`
}

// BatchResult is a batched request's result: the Message if it succeeded,
// the error body if it errored, neither if it was canceled.
type BatchResult struct {
	Type    string     `json:"type"`
	Message *Message   `json:"message,omitempty"`
	Error   *ErrorBody `json:"error,omitempty"`
}

// batchExpiry is how long after creation a batch expires, as the API says.
const batchExpiry = 24 * time.Hour

// maxBatchBody is the largest batch-creation body accepted: the real API's
// 256 MB.
const maxBatchBody = 256 << 20

// customIDPattern is what a custom_id may look like, as in the API.
var customIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// batchItem is one request of a batch, reduced to what its result needs.
type batchItem struct {
	customID string
	model    string
	usage    Usage  // input side; OutputTokens filled too
	stop     string // stop_reason
	errMsg   string // set: the request is invalid and errors
}

// batch is one Message Batch of one key. Its schedule (start, end) is set
// by account.schedule.
type batch struct {
	id       string
	created  time.Time
	items    []batchItem
	succ     []int // succ[i]: how many of the first i items succeed
	in, out  []int64
	cancelAt time.Time // zero: not cancelled
	perItem  time.Duration

	start time.Time // processing begins
	end   time.Time // processing ends
}

// took is how long the first k items take to process.
func (b *batch) took(k int) time.Duration {
	return time.Duration(math.Ceil(float64(k) * float64(b.perItem)))
}

// done returns how many items are processed at now.
func (b *batch) done(now time.Time) int {
	n := len(b.items)
	if !b.cancelAt.IsZero() && b.cancelAt.Before(b.end) {
		if b.cancelAt.Before(b.start) {
			return 0
		}
		now = minTime(now, b.cancelAt)
	}
	if !now.Before(b.end) {
		return n
	}
	if now.Before(b.start) {
		return 0
	}
	return min(n, int(float64(now.Sub(b.start))/float64(b.perItem)))
}

// status returns the batch's processing_status at now.
func (b *batch) status(now time.Time) string {
	switch {
	case !now.Before(b.end):
		return BatchEnded
	case !b.cancelAt.IsZero() && !now.Before(b.cancelAt):
		return BatchCanceling
	}
	return BatchInProgress
}

// view returns b as the API shows it at now; host is the server's address
// for results_url.
func (b *batch) view(now time.Time, host string) Batch {
	v := Batch{ID: b.id, Type: "message_batch", ProcessingStatus: b.status(now),
		CreatedAt: b.created.UTC(), ExpiresAt: b.created.Add(batchExpiry).UTC()}
	if !b.cancelAt.IsZero() {
		t := b.cancelAt.UTC()
		v.CancelInitiatedAt = &t
	}
	if v.ProcessingStatus != BatchEnded {
		v.RequestCounts.Processing = int64(len(b.items))
		return v
	}
	t := b.end.UTC()
	v.EndedAt = &t
	u := "http://" + host + "/v1/messages/batches/" + b.id + "/results"
	v.ResultsURL = &u
	p := b.done(now)
	v.RequestCounts.Succeeded = int64(b.succ[p])
	v.RequestCounts.Errored = int64(p - b.succ[p])
	v.RequestCounts.Canceled = int64(len(b.items) - p)
	return v
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// schedule sets every batch's start and end: the key's one processor takes
// the batches in order of creation, each as soon as it exists and the one
// before is done; a cancelled batch ends one request's time after its
// cancel, and frees the processor then if it had started. Call with a.mu
// held.
func (a *account) schedule() {
	var free time.Time
	for _, b := range a.batches {
		b.start = maxTime(b.created, free)
		b.end = b.start.Add(b.took(len(b.items)))
		if !b.cancelAt.IsZero() && b.cancelAt.Before(b.end) {
			b.end = b.cancelAt.Add(b.took(1))
			if b.cancelAt.Before(b.start) {
				continue // never started: the processor is as free as before
			}
		}
		free = b.end
	}
}

// batchStats fills the batch counts of st from the key's batches at now.
// Call with a.mu held.
func (a *account) batchStats(st *results.APIKeyStats, now time.Time) {
	for _, b := range a.batches {
		p := b.done(now)
		st.Batches++
		st.BatchRequests += int64(len(b.items))
		st.BatchSucceeded += int64(b.succ[p])
		st.BatchErrored += int64(p - b.succ[p])
		if b.status(now) == BatchEnded {
			st.BatchCanceled += int64(len(b.items) - p)
		}
		st.BatchInputTokens += b.in[p]
		st.BatchOutputTokens += b.out[p]
	}
}

// queued returns how many batched requests of the key are not yet
// processed at now. Call with a.mu held.
func (a *account) queued(now time.Time) int {
	n := 0
	for _, b := range a.batches {
		if b.status(now) != BatchEnded {
			n += len(b.items) - b.done(now)
		}
	}
	return n
}

// find returns the key's batch id, or nil. Call with a.mu held.
func (a *account) find(id string) *batch {
	for _, b := range a.batches {
		if b.id == id {
			return b
		}
	}
	return nil
}

func (s *Server) handleBatchCreate(w http.ResponseWriter, r *http.Request) {
	key := caller(w, r)
	if key == "" {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBatchBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, ErrorRequestTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBatchBody), "")
			return
		}
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, "could not read the request body: "+err.Error(), "")
		return
	}
	var p BatchCreateParams
	if err := json.Unmarshal(body, &p); err != nil {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, "invalid JSON body: "+err.Error(), "")
		return
	}
	if msg := s.checkBatch(p); msg != "" {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, msg, "")
		return
	}
	b := &batch{id: s.newID("msgbatch"), items: make([]batchItem, len(p.Requests)),
		perItem: time.Duration(float64(time.Second) / s.cfg.BatchRequestsPerSecond)}
	b.succ = make([]int, len(p.Requests)+1)
	b.in = make([]int64, len(p.Requests)+1)
	b.out = make([]int64, len(p.Requests)+1)
	for i, req := range p.Requests {
		it := batchItem{customID: req.CustomID, model: req.Params.Model}
		ok := 0
		switch msg := check(req.Params, true); {
		case msg != "":
			it.errMsg = msg
		case req.Params.Stream:
			it.errMsg = "stream: batched requests cannot be streamed"
		default:
			out := ReplyTokens(req.Params)
			it.usage = Usage{InputTokens: CountTokens(req.Params), OutputTokens: out}
			it.stop = "end_turn"
			if out == req.Params.MaxTokens {
				it.stop = "max_tokens"
			}
			ok = 1
		}
		b.items[i] = it
		b.succ[i+1] = b.succ[i] + ok
		b.in[i+1] = b.in[i] + int64(it.usage.InputTokens)
		b.out[i+1] = b.out[i] + int64(it.usage.OutputTokens)
	}

	a := s.account(key)
	now := time.Now()
	a.mu.Lock()
	if q := a.queued(now); q+len(b.items) > s.cfg.MaxBatchQueue {
		a.mu.Unlock()
		writeError(w, http.StatusTooManyRequests, ErrorRateLimit, fmt.Sprintf(
			"This batch of %d requests would exceed your limit of %d batch requests in the processing queue (%d queued); wait for batches to end.",
			len(b.items), s.cfg.MaxBatchQueue, q), "")
		return
	}
	b.created = now
	a.batches = append(a.batches, b)
	a.schedule()
	v := b.view(now, r.Host)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

// checkBatch returns what is wrong with the batch as a whole, or "".
func (s *Server) checkBatch(p BatchCreateParams) string {
	switch n := len(p.Requests); {
	case n == 0:
		return "requests: at least one request is required"
	case n > s.cfg.MaxBatchRequests:
		return fmt.Sprintf("requests: a batch may hold at most %d requests; got %d", s.cfg.MaxBatchRequests, n)
	}
	seen := make(map[string]bool, len(p.Requests))
	for i, req := range p.Requests {
		if !customIDPattern.MatchString(req.CustomID) {
			return fmt.Sprintf("requests.%d.custom_id: want 1 to 64 letters, digits, - or _, got %q", i, req.CustomID)
		}
		if seen[req.CustomID] {
			return fmt.Sprintf("requests.%d.custom_id: %q is used by another request; custom IDs must be unique in a batch", i, req.CustomID)
		}
		seen[req.CustomID] = true
	}
	return ""
}

// batchOf answers the batch named by r's path for the caller: the account
// and the batch, or nils after answering 401, 400 or 404.
func (s *Server) batchOf(w http.ResponseWriter, r *http.Request) (*account, *batch) {
	key := caller(w, r)
	if key == "" {
		return nil, nil
	}
	a := s.account(key)
	id := r.PathValue("id")
	a.mu.Lock()
	b := a.find(id)
	a.mu.Unlock()
	if b == nil {
		writeError(w, http.StatusNotFound, ErrorNotFound, fmt.Sprintf("message batch %q: not found", id), "")
		return nil, nil
	}
	return a, b
}

func (s *Server) handleBatchGet(w http.ResponseWriter, r *http.Request) {
	a, b := s.batchOf(w, r)
	if b == nil {
		return
	}
	a.mu.Lock()
	v := b.view(time.Now(), r.Host)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

// handleBatchCancel cancels a batch that has not ended; a batch that has
// is answered as it is (this fake's choice).
func (s *Server) handleBatchCancel(w http.ResponseWriter, r *http.Request) {
	a, b := s.batchOf(w, r)
	if b == nil {
		return
	}
	now := time.Now()
	a.mu.Lock()
	if b.status(now) == BatchInProgress {
		b.cancelAt = now
		a.schedule()
	}
	v := b.view(now, r.Host)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleBatchList(w http.ResponseWriter, r *http.Request) {
	key := caller(w, r)
	if key == "" {
		return
	}
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, ErrorInvalidRequest, fmt.Sprintf("limit: want a whole number from 1 to 1000, got %q", v), "")
			return
		}
		limit = n
	}
	a := s.account(key)
	now := time.Now()
	a.mu.Lock()
	newest := make([]*batch, len(a.batches))
	for i, b := range a.batches {
		newest[len(a.batches)-1-i] = b
	}
	index := func(id string) int {
		for i, b := range newest {
			if b.id == id {
				return i
			}
		}
		return -1
	}
	var lo, hi int
	var more bool
	switch after, before := q.Get("after_id"), q.Get("before_id"); {
	case after != "":
		lo = index(after) + 1
		if lo == 0 {
			lo = len(newest)
		}
		hi = min(len(newest), lo+limit)
		more = hi < len(newest)
	case before != "":
		hi = max(0, index(before))
		lo = max(0, hi-limit)
		more = lo > 0
	default:
		hi = min(len(newest), limit)
		more = hi < len(newest)
	}
	page := BatchList{Data: make([]Batch, 0, hi-lo), HasMore: more}
	for _, b := range newest[lo:hi] {
		page.Data = append(page.Data, b.view(now, r.Host))
	}
	a.mu.Unlock()
	if n := len(page.Data); n > 0 {
		first, last := page.Data[0].ID, page.Data[n-1].ID
		page.FirstID, page.LastID = &first, &last
	}
	writeJSON(w, http.StatusOK, page)
}

// handleBatchResults answers one JSON line per request, in the batch's
// order: succeeded or errored for those processed, canceled for the rest.
// A batch that has not ended has no results yet: 400 (this fake's choice).
func (s *Server) handleBatchResults(w http.ResponseWriter, r *http.Request) {
	a, b := s.batchOf(w, r)
	if b == nil {
		return
	}
	now := time.Now()
	a.mu.Lock()
	status, done := b.status(now), b.done(now)
	a.mu.Unlock()
	if status != BatchEnded {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, fmt.Sprintf(
			"message batch %s is %s; its results are available once its processing_status is %q", b.id, status, BatchEnded), "")
		return
	}
	w.Header().Set("Content-Type", "application/x-jsonl")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for i, it := range b.items {
		line := BatchResponse{CustomID: it.customID}
		switch {
		case i >= done:
			line.Result.Type = BatchCanceled
		case it.errMsg != "":
			line.Result.Type = BatchErrored
			line.Result.Error = &ErrorBody{Type: "error", Error: ErrorDetail{Type: ErrorInvalidRequest, Message: it.errMsg}}
		default:
			line.Result.Type = BatchSucceeded
			line.Result.Message = &Message{
				ID: fmt.Sprintf("msg_%s_%06d", b.id, i), Type: "message", Role: "assistant", Model: it.model,
				Content: []TextBlock{Text(replyText(it.usage.OutputTokens))}, StopReason: it.stop, Usage: it.usage,
			}
		}
		if err := enc.Encode(line); err != nil {
			return // the client has gone
		}
	}
}
