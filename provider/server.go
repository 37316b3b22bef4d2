package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
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

// account is the state of one API key.
type account struct {
	mu                        sync.Mutex
	requests, input, output   bucket
	cache                     map[string]cacheEntry // prefix key → its entry
	admitted                  int                   // requests admitted, for the spend limit
	stats                     results.APIKeyStats
	requestsPM, inPM, outPM   float64 // the limits per minute, for the headers
	cacheMin                  int
	cacheTTL, cacheTTL1h      time.Duration
	spendLimit                int
	baseLatency, tokenLatency time.Duration
	batches                   []*batch // in order of creation
}

func (s *Server) account(key string) *account {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.keys[key]; a != nil {
		return a
	}
	now := time.Now()
	c := s.cfg
	a := &account{
		requests:     newBucket(c.RequestsPerMinute, c.capacity(c.RequestsPerMinute), now),
		input:        newBucket(c.InputTokensPerMinute, c.capacity(c.InputTokensPerMinute), now),
		output:       newBucket(c.OutputTokensPerMinute, c.capacity(c.OutputTokensPerMinute), now),
		cache:        make(map[string]cacheEntry),
		requestsPM:   c.RequestsPerMinute,
		inPM:         c.InputTokensPerMinute,
		outPM:        c.OutputTokensPerMinute,
		cacheMin:     c.CacheMinTokens,
		cacheTTL:     c.CacheTTL,
		cacheTTL1h:   c.CacheTTL1h,
		spendLimit:   c.SpendLimit,
		baseLatency:  c.BaseLatency,
		tokenLatency: c.PerTokenLatency,
	}
	s.keys[key] = a
	return a
}

// cacheEntry is one cached prefix.
type cacheEntry struct {
	expires time.Time
	ttl     time.Duration // how far each use pushes expires
}

// ttl is how long a prefix written with the TTL name lives.
func (a *account) ttl(name string) time.Duration {
	if name == TTL1h {
		return a.cacheTTL1h
	}
	return a.cacheTTL
}

// store caches a prefix for ttl from now, keeping a longer life it has.
func (a *account) store(key string, now time.Time, ttl time.Duration) {
	e := a.cache[key]
	e.ttl = max(e.ttl, ttl)
	if exp := now.Add(ttl); exp.After(e.expires) {
		e.expires = exp
	}
	a.cache[key] = e
}

// bucket is a token bucket that may go into debt: a request is admitted
// when the bucket holds min(cost, capacity), and then the whole cost is
// taken. A request bigger than the bucket can therefore pass when the bucket
// is full, and the debt delays whoever comes next, so the long-run rate
// holds whatever the sizes.
type bucket struct {
	rate     float64   // per second
	capacity float64   // the most it holds
	tokens   float64   // held at last; negative while in debt
	last     time.Time // when tokens was brought up to date
}

func newBucket(perMinute, capacity float64, now time.Time) bucket {
	return bucket{rate: perMinute / 60, capacity: capacity, tokens: capacity, last: now}
}

// advance adds what dripped in since last, capped at the capacity. A now
// before last changes nothing.
func (b *bucket) advance(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.capacity, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// wait returns how long until the bucket holds min(n, capacity), 0 if it
// does now. Call advance first.
func (b *bucket) wait(n float64) time.Duration {
	need := min(n, b.capacity)
	if b.tokens >= need {
		return 0
	}
	return time.Duration(math.Ceil((need - b.tokens) / b.rate * 1e9))
}

// give returns n to the bucket (n < 0 takes), capped at the capacity.
func (b *bucket) give(n float64) { b.tokens = min(b.capacity, b.tokens+n) }

// remaining is what the headers report: the whole tokens held, never below 0.
func (b *bucket) remaining() int64 { return int64(math.Floor(max(0, b.tokens))) }

// reset returns when the bucket will be full if nothing is taken.
func (b *bucket) reset(now time.Time) time.Time {
	if b.tokens >= b.capacity {
		return now
	}
	return now.Add(time.Duration(math.Ceil((b.capacity - b.tokens) / b.rate * 1e9)))
}

// resetFormat is RFC 3339 with milliseconds, which time.RFC3339 parses.
const resetFormat = "2006-01-02T15:04:05.000Z07:00"

// setHeaders brings the buckets up to now and writes the nine rate-limit
// headers. Call with a.mu held.
func (a *account) setHeaders(h http.Header, now time.Time) {
	for _, x := range []struct {
		b                       *bucket
		perMinute               float64
		limit, remaining, reset string
	}{
		{&a.requests, a.requestsPM, HeaderRequestsLimit, HeaderRequestsRemaining, HeaderRequestsReset},
		{&a.input, a.inPM, HeaderInputTokensLimit, HeaderInputTokensRemaining, HeaderInputTokensReset},
		{&a.output, a.outPM, HeaderOutputTokensLimit, HeaderOutputTokensRemaining, HeaderOutputTokensReset},
	} {
		x.b.advance(now)
		h.Set(x.limit, strconv.FormatInt(int64(x.perMinute), 10))
		h.Set(x.remaining, strconv.FormatInt(x.b.remaining(), 10))
		h.Set(x.reset, x.b.reset(now).UTC().Format(resetFormat))
	}
}

// admission is the fate of one request at the door.
type admission struct {
	spend     bool          // refused: spend limit
	wait      time.Duration // refused by a bucket: the longest of their waits
	limitedBy string        // the bucket with that wait, for the message
	usage     Usage         // admitted: the input side of the usage
	writes    []breakpoint  // admitted: prefixes to cache once the reply is done
}

// admit decides whether p may go now and, if so, charges it. Call with
// a.mu held.
func (a *account) admit(now time.Time, req parsed) admission {
	p := req.p
	a.requests.advance(now)
	a.input.advance(now)
	a.output.advance(now)
	if a.spendLimit > 0 && a.admitted >= a.spendLimit {
		a.stats.SpendLimited++
		return admission{spend: true}
	}

	// Caching: the longest prefix still cached that ends at a breakpoint,
	// or at one of the blocks just before one, is read for free; the last
	// marked prefix, if longer and big enough, is written (and charged) and
	// becomes readable once this reply is done. Tokens written up to the
	// last 1h breakpoint are written for an hour, the rest for 5 minutes.
	bps := req.breakpoints
	read := 0
	var readKey string
	hit := func(c prefix) {
		if e, ok := a.cache[c.key]; ok && now.Before(e.expires) && c.tokens > read {
			read, readKey = c.tokens, c.key
		}
	}
	for _, bp := range bps {
		hit(prefix{key: bp.key, tokens: bp.tokens})
		for _, c := range bp.lookback {
			hit(c)
		}
	}
	creation, creation1h := 0, 0
	var writes []breakpoint
	if n := len(bps); n > 0 && bps[n-1].tokens > read && bps[n-1].tokens >= a.cacheMin {
		creation = bps[n-1].tokens - read
		for _, bp := range bps {
			if bp.tokens > read && bp.tokens >= a.cacheMin {
				writes = append(writes, bp)
				if bp.ttl == TTL1h {
					creation1h = bp.tokens - read
				}
			}
		}
	}
	total := req.tokens
	uncached := total - read

	var adm admission
	for _, x := range []struct {
		b       *bucket
		n       float64
		name    string
		counter *int64
	}{
		{&a.requests, 1, "requests", &a.stats.LimitedByRequests},
		{&a.input, float64(uncached), "input tokens", &a.stats.LimitedByInputTokens},
		{&a.output, float64(p.MaxTokens), "output tokens", &a.stats.LimitedByOutputTokens},
	} {
		if w := x.b.wait(x.n); w > 0 {
			*x.counter++
			if w > adm.wait {
				adm.wait, adm.limitedBy = w, x.name
			}
		}
	}
	if adm.wait > 0 {
		a.stats.RateLimited++
		return adm
	}

	a.requests.give(-1)
	a.input.give(-float64(uncached))
	a.output.give(-float64(p.MaxTokens))
	a.admitted++
	if readKey != "" {
		a.store(readKey, now, a.cache[readKey].ttl)
	}
	adm.usage = Usage{
		InputTokens: total - read - creation, CacheCreationInputTokens: creation, CacheReadInputTokens: read,
		CacheCreation: CacheCreation{Ephemeral5mInputTokens: creation - creation1h, Ephemeral1hInputTokens: creation1h},
	}
	adm.writes = writes
	a.stats.InputTokens += int64(adm.usage.InputTokens)
	a.stats.CacheCreationInputTokens += int64(creation)
	a.stats.CacheReadInputTokens += int64(read)
	a.stats.InFlight++
	a.stats.MaxInFlight = max(a.stats.MaxInFlight, a.stats.InFlight)
	return adm
}

// finish settles an admitted request that generated out of its maxTokens:
// the output bucket gets back what was not used, and the prefixes it wrote
// become readable if it completed. Call with a.mu held.
func (a *account) finish(now time.Time, maxTokens, out int, completed bool, writes []breakpoint) {
	a.output.advance(now)
	a.output.give(float64(maxTokens - out))
	a.stats.InFlight--
	a.stats.OutputTokens += int64(out)
	if !completed {
		a.stats.Cancelled++
		return
	}
	a.stats.Completed++
	if len(a.cache) > 256 {
		for k, e := range a.cache {
			if !now.Before(e.expires) {
				delete(a.cache, k)
			}
		}
	}
	for _, bp := range writes {
		a.store(bp.key, now, a.ttl(bp.ttl))
	}
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

	req, status, msg := s.parsed.read(w, r, true)
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
	req, status, msg := s.parsed.read(w, r, false)
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

// maxBreakpoints is the most blocks with cache_control a request may have.
const maxBreakpoints = 4

// parsed is a checked request body and what admitting it needs: its
// cache breakpoints and its input tokens.
type parsed struct {
	p           MessageParams
	breakpoints []breakpoint
	tokens      int
}

// paramsMemo remembers recent request bodies parsed, by their hash, so
// that a client that sends the same body again (a retry loop sends it
// dozens of times) costs a hash instead of a JSON parse and a token count:
// in task 5's judge those were 60% of the fake API's time. It answers
// exactly as parsing again would; what it returns is shared and only read.
// Bodies that fail their checks are not remembered.
type paramsMemo struct {
	seeds [2]maphash.Seed // random per server (New): no client can aim for a collision
	mu    sync.Mutex
	byID  map[paramsID]parsed
}

// paramsID is a body's 128-bit hash and whether max_tokens was required.
type paramsID struct {
	sum           [2]uint64
	needMaxTokens bool
}

// maxMemoParams bounds paramsMemo: when full it starts again, so a flood
// of distinct bodies holds at most this many; bodies over maxMemoBody bytes
// are parsed every time, so it holds at most 256 MiB (task 5's bodies are
// about 12 KB, a few tens of MB in all).
const (
	maxMemoParams = 4096
	maxMemoBody   = 64 << 10
)

// read reads and checks the body of r, remembering what it parsed. On a
// bad request it returns a status (400 or 413) and the message to send.
func (m *paramsMemo) read(w http.ResponseWriter, r *http.Request, needMaxTokens bool) (parsed, int, string) {
	body, status, msg := readBody(w, r)
	if status != 0 {
		return parsed{}, status, msg
	}
	if len(body) > maxMemoBody {
		return parseRequest(body, needMaxTokens)
	}
	id := paramsID{[2]uint64{maphash.Bytes(m.seeds[0], body), maphash.Bytes(m.seeds[1], body)}, needMaxTokens}
	m.mu.Lock()
	req, ok := m.byID[id]
	m.mu.Unlock()
	if ok {
		return req, 0, ""
	}
	req, status, msg = parseRequest(body, needMaxTokens)
	if status != 0 {
		return parsed{}, status, msg
	}
	m.mu.Lock()
	if m.byID == nil || len(m.byID) >= maxMemoParams {
		m.byID = make(map[paramsID]parsed)
	}
	m.byID[id] = req
	m.mu.Unlock()
	return req, 0, ""
}

// parseRequest parses and checks a body and works out what admitting it
// needs.
func parseRequest(body []byte, needMaxTokens bool) (parsed, int, string) {
	p, status, msg := parseParams(body, needMaxTokens)
	if status != 0 {
		return parsed{}, status, msg
	}
	return parsed{p: p, breakpoints: breakpoints(p), tokens: CountTokens(p)}, 0, ""
}

// readBody reads the body of r, at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBody)
		}
		return nil, http.StatusBadRequest, "could not read the request body: " + err.Error()
	}
	return body, 0, ""
}

// parseParams decodes and checks a request body.
func parseParams(body []byte, needMaxTokens bool) (MessageParams, int, string) {
	var p MessageParams
	if err := json.Unmarshal(body, &p); err != nil {
		return MessageParams{}, http.StatusBadRequest, "invalid JSON body: " + err.Error()
	}
	if !needMaxTokens {
		p.Stream = false // count_tokens has no stream field
	}
	if msg := check(p, needMaxTokens); msg != "" {
		return MessageParams{}, http.StatusBadRequest, msg
	}
	return p, 0, ""
}

// check returns what is wrong with p, or "".
func check(p MessageParams, needMaxTokens bool) string {
	switch {
	case p.Model == "":
		return "model: field required"
	case needMaxTokens && p.MaxTokens < 1:
		return fmt.Sprintf("max_tokens: must be at least 1 (got %d; the field is required)", p.MaxTokens)
	case len(p.Messages) == 0:
		return "messages: at least one message is required"
	}
	marks := 0
	seen5m := false
	checkTTL := func(where string, cc *CacheControl) string {
		if cc.Type != "ephemeral" {
			return fmt.Sprintf("%s.cache_control.type: want \"ephemeral\", got %q", where, cc.Type)
		}
		switch cc.TTL {
		case "", TTL5m:
			seen5m = true
		case TTL1h:
			if seen5m {
				return fmt.Sprintf("%s.cache_control.ttl: a ttl of \"1h\" must not come after one of \"5m\"", where)
			}
		default:
			return fmt.Sprintf("%s.cache_control.ttl: want \"5m\" or \"1h\", got %q", where, cc.TTL)
		}
		return ""
	}
	if p.CacheControl != nil {
		if p.CacheControl.Type != "ephemeral" || (p.CacheControl.TTL != "" && p.CacheControl.TTL != TTL5m && p.CacheControl.TTL != TTL1h) {
			return fmt.Sprintf("cache_control: want {\"type\": \"ephemeral\"} with a ttl of \"5m\" or \"1h\", got %+v", *p.CacheControl)
		}
	}
	checkBlock := func(where string, b TextBlock, last bool) string {
		if b.Type != "text" {
			return fmt.Sprintf("%s.type: want \"text\", got %q (this fake takes text only)", where, b.Type)
		}
		if b.Text == "" {
			return where + ".text: text content blocks must be non-empty"
		}
		if cc := marked(p, b, last); cc != nil {
			marks++
			if msg := checkTTL(where, cc); msg != "" {
				return msg
			}
		}
		return ""
	}
	for i, b := range p.System {
		if msg := checkBlock(fmt.Sprintf("system.%d", i), b, false); msg != "" {
			return msg
		}
	}
	for i, m := range p.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("messages.%d.role: want \"user\" or \"assistant\", got %q", i, m.Role)
		}
		if len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d.content: must not be empty", i)
		}
		for j, b := range m.Content {
			if msg := checkBlock(fmt.Sprintf("messages.%d.content.%d", i, j), b, i == len(p.Messages)-1 && j == len(m.Content)-1); msg != "" {
				return msg
			}
		}
	}
	if marks > maxBreakpoints {
		return fmt.Sprintf("a maximum of %d blocks with cache_control may be provided; found %d", maxBreakpoints, marks)
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do then
}

// writeError writes an error body, with the request-id that ServeHTTP set,
// and x-should-retry where the API says whether to retry: false on the
// spend-limit 429, true on a rate-limit 429, a 529 and a 500. The Go SDK
// obeys the header over the status (anthropic-sdk-go/v2
// internal/requestconfig/requestconfig.go, shouldRetry), so it does not
// retry the spend limit, which it would as a 429.
func writeError(w http.ResponseWriter, status int, typ, msg, code string) {
	switch {
	case code == ErrorCodeSpendLimit:
		w.Header().Set(HeaderShouldRetry, "false")
	case status == http.StatusTooManyRequests || status >= http.StatusInternalServerError:
		w.Header().Set(HeaderShouldRetry, "true")
	}
	body := ErrorBody{Type: "error", Error: ErrorDetail{Type: typ, Message: msg}, RequestID: w.Header().Get(HeaderRequestID)}
	if code != "" {
		body.Error.Details = &ErrorDetails{ErrorCode: code}
	}
	writeJSON(w, status, body)
}
