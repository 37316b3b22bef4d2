package provider

import (
	"fmt"
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ratelab/results"
)

// Stats is the body of GET /stats: the limits, and what each key did.
// GET /stats?key=K reports only key K.
type Stats struct {
	Limits results.APILimits              `json:"limits"`
	Keys   map[string]results.APIKeyStats `json:"keys"`
}

// Server is the fake API. Create it with New; it is an http.Handler and is
// safe for concurrent use. It runs no goroutine of its own: buckets refill
// lazily, batches progress lazily (see batch.go) and each request waits out
// its own latency, so it works inside a testing/synctest bubble.
type Server struct {
	cfg       Config
	start     time.Time
	mux       *http.ServeMux
	closing   chan struct{} // closed by Close: replies being generated give up
	closeOnce sync.Once
	ids       atomic.Uint64

	mu   sync.Mutex
	keys map[string]*account // guarded by mu

	parsed paramsMemo
}

// New returns a Server for cfg, or the error of cfg.Validate.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	cfg.Overloaded = append([]Episode(nil), cfg.Overloaded...)
	s := &Server{
		cfg:     cfg,
		start:   time.Now(),
		mux:     http.NewServeMux(),
		closing: make(chan struct{}),
		keys:    make(map[string]*account),
		parsed:  paramsMemo{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}},
	}
	s.mux.HandleFunc("POST /v1/messages", s.handleMessages)
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.handleCountTokens)
	s.mux.HandleFunc("POST /v1/messages/batches", s.handleBatchCreate)
	s.mux.HandleFunc("GET /v1/messages/batches", s.handleBatchList)
	s.mux.HandleFunc("GET /v1/messages/batches/{id}", s.handleBatchGet)
	s.mux.HandleFunc("POST /v1/messages/batches/{id}/cancel", s.handleBatchCancel)
	s.mux.HandleFunc("GET /v1/messages/batches/{id}/results", s.handleBatchResults)
	s.mux.HandleFunc("GET /stats", s.handleStats)
	s.mux.HandleFunc("PUT /faults", s.handleFaults)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, ErrorNotFound, fmt.Sprintf("%s %s: no such endpoint", r.Method, r.URL.Path), "")
	})
	return s, nil
}

// Config returns the server's settings.
func (s *Server) Config() Config { return s.cfg }

// ServeHTTP answers one request. Every answer, an unknown path's 404
// included, carries a request-id header, which the Go SDK copies into
// Error.RequestID (anthropic-sdk-go/v2 internal/requestconfig/requestconfig.go,
// apiError).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderRequestID, s.newID("req"))
	s.mux.ServeHTTP(w, r)
}

// Close makes the replies being generated give up at once (their clients get
// 500 api_error). It is idempotent. It does not stop a listener; see
// Instance.Close.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.closing) }) }

// Stats returns the limits and a copy of every key's counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	accounts := make(map[string]*account, len(s.keys))
	for k, a := range s.keys {
		accounts[k] = a
	}
	s.mu.Unlock()
	st := Stats{Limits: s.cfg.Limits(), Keys: make(map[string]results.APIKeyStats, len(accounts))}
	now := time.Now()
	for k, a := range accounts {
		st.Keys[k] = s.keyStats(a, now)
	}
	return st
}

// keyStats returns a's counts at now, with the batches' progress and the
// costs at the server's prices.
func (s *Server) keyStats(a *account, now time.Time) results.APIKeyStats {
	a.mu.Lock()
	k := a.stats
	k.Faults = k.Faults.Clone()
	a.batchStats(&k, now)
	a.mu.Unlock()
	p := s.cfg.Prices
	k.CostUSD = p.Cost(k.InputTokens, k.CacheCreationInputTokens, k.CacheReadInputTokens, k.OutputTokens)
	k.BatchCostUSD = results.BatchPriceFraction * p.Cost(k.BatchInputTokens, 0, 0, k.BatchOutputTokens)
	return k
}

// KeyStats returns what key did; a key never used has all zeros.
func (s *Server) KeyStats(key string) results.APIKeyStats {
	s.mu.Lock()
	a := s.keys[key]
	s.mu.Unlock()
	if a == nil {
		return results.APIKeyStats{}
	}
	return s.keyStats(a, time.Now())
}

func (s *Server) overloaded(now time.Time) bool {
	since := now.Sub(s.start)
	for _, e := range s.cfg.Overloaded {
		if since >= e.Start && since < e.Start+e.Length {
			return true
		}
	}
	return false
}

func (s *Server) newID(prefix string) string {
	return fmt.Sprintf("%s_fake%016x", prefix, s.ids.Add(1))
}

// maxBody is the largest request body accepted.
const maxBody = 8 << 20

// caller returns the API key of r, from x-api-key or Authorization: Bearer,
// after checking that r has one and an anthropic-version header. Otherwise
// it answers r (401 or 400) and returns "".
func caller(w http.ResponseWriter, r *http.Request) string {
	key := r.Header.Get(HeaderAPIKey)
	if key == "" {
		// The Go SDK v2's option.WithAPIKey sends "authorization: Bearer
		// KEY" (anthropic-sdk-go/v2 option/requestoption.go).
		if auth, ok := strings.CutPrefix(r.Header.Get(HeaderAuthorization), "Bearer "); ok {
			key = strings.TrimSpace(auth)
		}
	}
	if key == "" {
		writeError(w, http.StatusUnauthorized, ErrorAuthentication, "x-api-key header is required", "")
		return ""
	}
	if r.Header.Get(HeaderVersion) == "" {
		writeError(w, http.StatusBadRequest, ErrorInvalidRequest, "anthropic-version: header is required", "")
		return ""
	}
	return key
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	key := caller(w, r)
	if key == "" {
		return
	}
	a := s.account(key)
	a.mu.Lock()
	a.stats.Requests++
	a.mu.Unlock()

	req, id, status, msg := s.parsed.read(w, r, true)
	p := req.p
	if status != 0 {
		a.mu.Lock()
		a.stats.Invalid++
		a.setHeaders(w.Header(), time.Now())
		a.mu.Unlock()
		typ := ErrorInvalidRequest
		if status == http.StatusRequestEntityTooLarge {
			typ = ErrorRequestTooLarge
		}
		writeError(w, status, typ, msg, "")
		return
	}

	now := time.Now()
	a.mu.Lock()
	kind, after, faulty := a.fault(now, id)
	if faulty && kind != results.FaultTimeout {
		a.setHeaders(w.Header(), now)
	}
	a.mu.Unlock()
	if faulty {
		s.serveFault(w, r, a, kind, after)
		return
	}

	if s.overloaded(now) {
		a.mu.Lock()
		a.stats.Overloaded++
		a.setHeaders(w.Header(), now)
		a.mu.Unlock()
		writeError(w, StatusOverloaded, ErrorOverloaded, "Overloaded", "")
		return
	}

	a.mu.Lock()
	adm := a.admit(now, req)
	if adm.spend || adm.wait > 0 {
		a.setHeaders(w.Header(), now)
		a.mu.Unlock()
		if adm.spend {
			writeError(w, http.StatusTooManyRequests, ErrorRateLimit,
				"This request would exceed your API key's spend limit. Raise the limit or wait for it to reset; retrying will not help.", ErrorCodeSpendLimit)
			return
		}
		w.Header().Set(HeaderRetryAfter, strconv.FormatInt(int64(math.Ceil(adm.wait.Seconds())), 10))
		writeError(w, http.StatusTooManyRequests, ErrorRateLimit, fmt.Sprintf(
			"This request would exceed your rate limit for %s per minute. The limit is a token bucket that refills continuously; slow down, or retry after %s.",
			adm.limitedBy, adm.wait.Round(time.Millisecond)), "")
		return
	}
	a.mu.Unlock()

	out := ReplyTokens(p)
	if p.Stream {
		s.stream(w, r, a, now, p, out, adm)
		return
	}
	// Generate the reply: BaseLatency, then PerTokenLatency per token.
	took := a.baseLatency + time.Duration(out)*a.tokenLatency
	timer := time.NewTimer(took)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		s.abandon(a, now, p.MaxTokens, out)
		return
	case <-s.closing:
		s.abandon(a, now, p.MaxTokens, out)
		writeError(w, http.StatusInternalServerError, ErrorAPI, "the server is shutting down", "")
		return
	}

	done := time.Now()
	a.mu.Lock()
	a.finish(done, p.MaxTokens, out, true, adm.writes)
	a.setHeaders(w.Header(), done)
	a.mu.Unlock()
	stop := "end_turn"
	if out == p.MaxTokens {
		stop = "max_tokens"
	}
	usage := adm.usage
	usage.OutputTokens = out
	writeJSON(w, http.StatusOK, Message{
		ID: s.newID("msg"), Type: "message", Role: "assistant", Model: p.Model,
		Content: []TextBlock{Text(replyText(out))}, StopReason: stop, Usage: usage,
	})
}

// abandon settles a request whose reply was cut short at time.Now(): it is
// charged the tokens generated so far.
func (s *Server) abandon(a *account, started time.Time, maxTokens, out int) {
	now := time.Now()
	generated := 0
	if a.tokenLatency > 0 {
		generated = int((now.Sub(started) - a.baseLatency) / a.tokenLatency)
	}
	generated = min(max(generated, 0), out)
	a.mu.Lock()
	a.finish(now, maxTokens, generated, false, nil)
	a.mu.Unlock()
}

func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	key := caller(w, r)
	if key == "" {
		return
	}
	a := s.account(key)
	a.mu.Lock()
	a.stats.CountTokensCalls++
	a.mu.Unlock()
	req, _, status, msg := s.parsed.read(w, r, false)
	if status != 0 {
		typ := ErrorInvalidRequest
		if status == http.StatusRequestEntityTooLarge {
			typ = ErrorRequestTooLarge
		}
		writeError(w, status, typ, msg, "")
		return
	}
	writeJSON(w, http.StatusOK, TokenCount{InputTokens: req.tokens})
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	if key := r.URL.Query().Get("key"); key != "" {
		st.Keys = map[string]results.APIKeyStats{key: st.Keys[key]}
	}
	writeJSON(w, http.StatusOK, st)
}
