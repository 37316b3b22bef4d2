package fakegpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"ratelab/results"
)

// Admission decides the fate of one /generate request in the protected
// modes: answer at once (429, 503), or wait for a slot, do the work and
// answer 200. Task 2's learner code is an Admission. It reaches the GPU only
// through job, so the server keeps its own count of what happened.
type Admission interface {
	Admit(w http.ResponseWriter, r *http.Request, job *Job)
}

// AdmissionFunc adapts an ordinary function to the Admission interface.
type AdmissionFunc func(w http.ResponseWriter, r *http.Request, job *Job)

// Admit calls f(w, r, job).
func (f AdmissionFunc) Admit(w http.ResponseWriter, r *http.Request, job *Job) { f(w, r, job) }

// Limiter is a per-client rate limiter, such as task 3's KeyedLimiter.
// TryTake takes n tokens from key's bucket if it can; otherwise it reports
// how long until n tokens would be there.
type Limiter interface {
	TryTake(key string, n float64) (ok bool, wait time.Duration)
}

// Server is the fake GPU. Create it with New; it is an http.Handler.
type Server struct {
	cfg       Config
	admission Admission
	limiter   Limiter
	settle    func()        // see WithSettle
	slots     chan struct{} // a counting semaphore; Go wakes blocked senders in FIFO order
	mux       *http.ServeMux
	closing   chan struct{} // closed by Close: waiting and working requests give up
	closeOnce sync.Once

	calMu   sync.Mutex // guards calNext
	calNext time.Time  // the next free comeback time of SpreadRetryAfter

	received, finished, waiting, maxWaiting, inFlight atomic.Int64
	shed, limited, expired, dead, leaked              atomic.Int64

	// What the server records beyond its counters (observe.go).
	maxGoroutines atomic.Int64     // the most goroutines seen as a request arrived
	obsMu         sync.Mutex       // guards refusals
	refusals      results.Refusals // the Retry-After of every refusal, judged
	clients       clientTable      // the answers per client key
	grants        grantLog         // task 8's sliding log: each key's last grants
	calls         callTable        // the attempts of each call (calls.go)
}

// Option configures a Server.
type Option func(*Server)

// WithAdmission sets the admission logic used in the protected modes.
func WithAdmission(a Admission) Option { return func(s *Server) { s.admission = a } }

// WithLimiter sets the per-client limiter used in the bucket modes.
func WithLimiter(l Limiter) Option { return func(s *Server) { s.limiter = l } }

// WithSettle makes every request wait, as it arrives and before anything
// else, for settle to return. In a testing/synctest bubble's virtual time
// the flood passes a settle that waits until everything else due at this
// instant has happened (synctest.Wait), so a slot that frees at the instant
// a request arrives is free for it: the order the simulation keeps
// (package ties). Outside a bubble there is no reason to set it.
func WithSettle(settle func()) Option { return func(s *Server) { s.settle = settle } }

// New returns a server for cfg. Protected modes need an Admission, and the
// bucket modes also a Limiter.
func New(cfg Config, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fakegpu: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.Slots),
		mux:     http.NewServeMux(),
		closing: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	if cfg.Mode != ModeNone && s.admission == nil {
		return nil, fmt.Errorf("fakegpu: mode %s needs admission logic (task 2)", cfg.Mode)
	}
	if cfg.Mode.Limited() && s.limiter == nil {
		return nil, fmt.Errorf("fakegpu: mode %s needs a per-client limiter (task 3)", cfg.Mode)
	}
	s.mux.HandleFunc("GET /generate", s.generate)
	s.mux.HandleFunc("GET /stats", s.stats)
	return s, nil
}

// Config returns the server's configuration.
func (s *Server) Config() Config { return s.cfg }

// ServeHTTP serves GET /generate and GET /stats.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close makes every request that waits for a slot or works give up at once,
// so that a stopped server leaves no goroutine behind. The server answers 503
// to requests that arrive afterwards. Close is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
}

// ErrClosed is returned by Job.Acquire once the server is closed.
var ErrClosed = errors.New("fakegpu: server closed")

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() results.ServerStats {
	return results.ServerStats{
		Received:   s.received.Load(),
		Finished:   s.finished.Load(),
		Waiting:    s.waiting.Load(),
		MaxWaiting: s.maxWaiting.Load(),
		InFlight:   s.inFlight.Load(),
		Shed:       s.shed.Load(),
		Limited:    s.limited.Load(),
		Expired:    s.expired.Load(),
		Dead:       s.dead.Load(),
		Leaked:     s.leaked.Load(),
		FailOpen:   s.failOpen(),
		Refusals:   s.refusalStats(false),
	}
}

// StatsDetail returns Stats with the examples of wrong refusals, the
// answers per client key and the attempts of each call that named itself
// with X-Call-Id (GET /stats?detail=1).
func (s *Server) StatsDetail() results.ServerStats {
	st := s.Stats()
	st.Refusals = s.refusalStats(true)
	if s.cfg.Mode != ModeNone {
		st.Clients = s.clients.stats()
		st.Calls = s.calls.stats()
	}
	return st
}

// failOpen asks the limiter, if it can fail open, how often it did.
func (s *Server) failOpen() int64 {
	if f, ok := s.limiter.(interface{ FailOpen() int64 }); ok {
		return f.FailOpen()
	}
	return 0
}

// stats serves GET /stats: the server's counters and its process's CPU
// time and goroutines (now, and the most it had); with detail=1 also StatsDetail's, with gc=1 also the
// process's live memory after a full garbage collection.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st := s.Stats()
	if q.Get(StatsDetail) == "1" {
		st = s.StatsDetail()
	}
	st.CPUS, st.Goroutines, st.Memory = processStats(q.Get(StatsGC) == "1")
	st.MaxGoroutines = s.maxGoroutines.Load()
	if st.Memory != nil {
		st.Memory.MaxGoroutines, st.Memory.Received = st.MaxGoroutines, s.received.Load()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// okBody is the answer to a request that was worked on.
const okBody = `{"text":"hello"}` + "\n"

// WriteOK answers 200 with the server's generated text.
func WriteOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(okBody))
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	if s.settle != nil {
		s.settle()
	}
	s.received.Add(1)
	job := &Job{s: s, r: r, arrived: time.Now()}
	if s.cfg.Mode == ModeNone {
		unprotected(w, r, job)
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	rec.atHeader = func(code int) {
		s.judgeRefusal(job, w.Header(), code)
		job.call.end(time.Now(), w.Header())
	}
	s.clientArrived(job)
	defer s.callArrived(job)()
	s.countGoroutines()
	if s.cfg.SpreadRetryAfter {
		rec.beforeHeader = func(code int) {
			if code == http.StatusServiceUnavailable && !job.acquired {
				w.Header().Set("Retry-After", strconv.Itoa(s.comeback(time.Now())))
			}
		}
	}
	defer func() {
		// The server, not the admission code, counts what happened, so the
		// stats stay honest whatever the admission code does.
		if job.held {
			s.leaked.Add(1)
		}
		job.call.end(time.Now(), nil) // a handler that wrote nothing: 200
		s.clientAnswered(job, rec.status)
		switch {
		case rec.status == http.StatusTooManyRequests:
			s.limited.Add(1)
		case rec.status == http.StatusServiceUnavailable && !job.acquired:
			s.shed.Add(1)
		case rec.status == http.StatusServiceUnavailable:
			s.expired.Add(1)
		}
	}()
	s.admission.Admit(rec, r, job)
}

// unprotected is ModeNone: wait for a slot however long it takes, ignoring
// the client entirely, then do the work. This is deliberate: the lesson's
// server keeps working for clients that have already gone.
func unprotected(w http.ResponseWriter, _ *http.Request, job *Job) {
	if err := job.Acquire(context.Background()); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable) // only when closed
		return
	}
	job.Work()
	job.Release()
	WriteOK(w)
}

// comeback returns the Retry-After, in whole seconds, for a request shed at
// now under SpreadRetryAfter. The server keeps a calendar of comebacks at
// its capacity, starting no sooner than a second from now (the least a
// Retry-After can say) and no sooner than the current line drains. A request
// given calendar time t is told floor(t − now) seconds: everyone told k
// seconds has a place in the second from k to k+1, which is when a client
// that spreads its return over the header's one-second resolution arrives.
func (s *Server) comeback(now time.Time) int {
	interval := time.Duration(float64(time.Second) / s.cfg.Capacity())
	drain := time.Duration(s.waiting.Load()) * interval
	s.calMu.Lock()
	t := now.Add(max(drain, time.Second))
	if s.calNext.After(t) {
		t = s.calNext
	}
	s.calNext = t.Add(interval)
	s.calMu.Unlock()
	return max(int(t.Sub(now)/time.Second), 1)
}

// statusRecorder remembers the status code written through it, and lets
// the server adjust headers just before they go out.
type statusRecorder struct {
	http.ResponseWriter
	status       int
	beforeHeader func(code int)
	atHeader     func(code int) // sees the headers as they go out
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		if r.beforeHeader != nil {
			r.beforeHeader(code)
		}
		if r.atHeader != nil {
			r.atHeader(code)
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Job is one /generate request's handle on the GPU. Admission code uses it to
// look at the line, take and give back a slot and do the work; the server
// counts everything from here.
type Job struct {
	s        *Server
	r        *http.Request
	arrived  time.Time
	held     bool // holds a slot now
	acquired bool // took a slot at some point
	notes    jobNotes
	call     *callAttempt // its call's record (calls.go), or nil
}

// Config returns the server's configuration.
func (j *Job) Config() Config { return j.s.cfg }

// Arrived returns when the request reached the server.
func (j *Job) Arrived() time.Time { return j.arrived }

// Waiting returns how many requests wait for a slot right now, not counting
// this one unless it is waiting itself.
func (j *Job) Waiting() int {
	n := j.s.waiting.Load()
	j.notes.sawLine(n)
	return int(n)
}

// Limiter returns the per-client limiter, or nil outside the bucket modes.
// It is this request's own handle on it: the server notes what the limiter
// answered to this request, to judge the Retry-After of a 429.
func (j *Job) Limiter() Limiter {
	if !j.s.cfg.Mode.Limited() {
		return nil
	}
	return watchedLimiter{lim: j.s.limiter, job: j}
}

// ClientKey returns who the request is from, for per-client limits: the
// X-Client-Id header, or else the client's IP address.
func (j *Job) ClientKey() string {
	if id := j.r.Header.Get("X-Client-Id"); id != "" {
		return id
	}
	host, _, err := net.SplitHostPort(j.r.RemoteAddr)
	if err != nil {
		return j.r.RemoteAddr
	}
	return host
}

// Acquire takes a free slot, or else joins the line and waits for one, first
// come first served. It returns ctx's error if ctx ends first. Acquire on a job that already holds
// a slot returns an error at once.
func (j *Job) Acquire(ctx context.Context) error {
	if j.held {
		return fmt.Errorf("fakegpu: job already holds a slot")
	}
	s := j.s
	// A free slot is taken without ever joining the line, so a server
	// below capacity reports nobody waiting.
	select {
	case s.slots <- struct{}{}:
		s.inFlight.Add(1)
		j.held, j.acquired = true, true
		return nil
	default:
	}
	n := s.waiting.Add(1)
	for {
		m := s.maxWaiting.Load()
		if n <= m || s.maxWaiting.CompareAndSwap(m, n) {
			break
		}
	}
	defer s.waiting.Add(-1)
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
	s.inFlight.Add(1)
	j.held, j.acquired = true, true
	return nil
}

// Release gives the slot back. It does nothing if the job holds none.
func (j *Job) Release() {
	if !j.held {
		return
	}
	j.held = false
	j.s.inFlight.Add(-1)
	<-j.s.slots
}

// Work runs the model: it holds the GPU for the configured work time, and it
// cannot be interrupted, just as a real GPU kernel finishes once launched.
// It counts the work as dead if the client had gone by the time it ended.
// Work without a slot panics: that would be running more than Slots at once.
func (j *Job) Work() {
	if !j.held {
		panic("fakegpu: Work called without holding a slot; call Acquire first")
	}
	t := time.NewTimer(j.s.cfg.Work)
	defer t.Stop()
	select {
	case <-t.C:
	case <-j.s.closing:
		return
	}
	j.s.finished.Add(1)
	if j.r.Context().Err() != nil {
		j.s.dead.Add(1)
	}
}
