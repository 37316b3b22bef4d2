package fakegpu

import (
	"fmt"
	"math"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ratelab/lab"
	"ratelab/results"
)

// What the server records beyond its counters, from what passes through
// its own hooks: the Retry-After of every refusal judged against what the
// server knew when it was sent, the answers to each client key, and the
// process's CPU time and memory. Admission and limiter code reach none of
// it, so none of it can be faked by them.

// Query parameters of GET /stats.
const (
	// StatsDetail ("detail=1") adds the examples of wrong refusals and the
	// answers per client key.
	StatsDetail = "detail"
	// StatsGC ("gc=1") collects garbage, twice, and adds the live memory.
	StatsGC = "gc"
)

// ClientCapacity is the most client keys a Server tracks at once. It is
// fixed, so tracking costs the same memory however many keys call: about
// 40 KB for keys of 40 bytes. A full table forgets the keys that sent a
// single request (a flood of one-off keys), and otherwise counts newcomers
// as untracked; a key that keeps calling is never forgotten.
const ClientCapacity = 256

// waitSlack is how far past n/rate a limiter's wait may be: the contract
// rounds up to the next nanosecond, and a limiter may step a few
// nanoseconds further for its float arithmetic to agree.
const waitSlack = time.Microsecond

// callTime is how long one call of the limiter took, from asked to at: how
// much later than its own reading of the clock another caller may have
// brought the state it reads up to date (see dishonestWait).
func callTime(asked, at time.Time) time.Duration { return max(at.Sub(asked), 0) }

// callTimeNote says, for a message, how much callTime allowed beyond the
// bound, if anything.
func callTimeNote(asked, at time.Time) string {
	if d := callTime(asked, at); d > 0 {
		return fmt.Sprintf(" (plus the %v the call took)", d)
	}
	return ""
}

// jobNotes is what the server saw of one request while admission code
// handled it. Admission code may call the job from several goroutines, so
// the notes have a lock of their own.
type jobNotes struct {
	mu sync.Mutex

	// The lines Job.Waiting returned to this request.
	lineSeen         bool
	lineMin, lineMax int64

	// The refusals the limiter handed this request, through Job.Limiter.
	denials, finite  int           // refusals, and those with a finite wait
	minWait, maxWait time.Duration // over the finite waits
	infWait          bool          // some refusal said lab.InfDuration
	badWait          string        // the first wait no honest bucket reports
	granted          bool
	grantAt          time.Time // when the last grant returned
	tokens           float64   // granted in all
	otherKey         string    // a key other than its own that it asked about

	// Its client key and whether the client table tracks it.
	key            string
	tracked, first bool
}

func (n *jobNotes) sawLine(w int64) {
	n.mu.Lock()
	if !n.lineSeen || w < n.lineMin {
		n.lineMin = w
	}
	if !n.lineSeen || w > n.lineMax {
		n.lineMax = w
	}
	n.lineSeen = true
	n.mu.Unlock()
}

// lines returns the shortest and longest line this request saw: through
// Job.Waiting, or now, the moment of its answer.
func (n *jobNotes) lines(now int64) (lo, hi int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lo, hi = now, now
	if n.lineSeen {
		lo, hi = min(lo, n.lineMin), max(hi, n.lineMax)
	}
	return lo, hi
}

// watchedLimiter is the Limiter a Job hands out: the server's limiter,
// with every answer noted on the job.
type watchedLimiter struct {
	lim Limiter
	job *Job
}

func (l watchedLimiter) TryTake(key string, n float64) (bool, time.Duration) {
	cfg := l.job.s.cfg
	logging := cfg.Counting == "log"
	if logging {
		l.job.s.grants.begin(key)
	}
	asked := time.Now()
	ok, wait := l.lim.TryTake(key, n)
	at := time.Now()
	if logging {
		l.job.s.grants.end(key, ok && n == 1, asked, at, cfg.CountingLimit)
	}
	l.job.noteTake(key, n, ok, wait, asked, at)
	return ok, wait
}

// grantLog keeps, for task 8's sliding log (Config.Counting "log"), when
// the limiter granted each key's last 2 × CountingLimit requests, as the
// server saw them: the limiter read its clock between asked and at. It
// tracks at most ClientCapacity keys; others are not judged.
//
// A grant is recorded only once its call has returned, so a refusal of
// the same key judged meanwhile could miss it: begin and end count each
// key's calls still in progress, and a refusal is not judged while any is.
type grantLog struct {
	mu      sync.Mutex
	keys    map[string][]grantSpan
	pending map[string]int // calls of each key begun and not yet ended
}

type grantSpan struct{ asked, at time.Time }

// begin notes that a call of key's is about to ask the limiter.
func (g *grantLog) begin(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[string]int{}
	}
	g.pending[key]++
}

// end notes that the call begun for key has returned, and records its
// grant if granted.
func (g *grantLog) end(key string, granted bool, asked, at time.Time, limit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[key]--; g.pending[key] <= 0 {
		delete(g.pending, key)
	}
	if granted {
		g.addLocked(key, asked, at, limit)
	}
}

func (g *grantLog) add(key string, asked, at time.Time, limit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addLocked(key, asked, at, limit)
}

func (g *grantLog) addLocked(key string, asked, at time.Time, limit int) {
	if g.keys == nil {
		g.keys = map[string][]grantSpan{}
	}
	h, ok := g.keys[key]
	if !ok && len(g.keys) >= ClientCapacity {
		return
	}
	h = append(h, grantSpan{asked, at})
	slices.SortStableFunc(h, func(a, b grantSpan) int { return a.at.Compare(b.at) })
	if len(h) > 2*limit { // room for grants that came after a refusal judged late
		h = append(h[:0], h[len(h)-2*limit:]...)
	}
	g.keys[key] = h
}

// logWait returns why a sliding log of cfg's limit and window, which the
// server saw grant key's requests when grants records, could not refuse
// key's request asked at asked and answered at at with wait, or "". The
// log holds at most limit requests, so when it refuses, its limit newest
// grants all still count, and the wait runs until the oldest of them
// stops counting, one window after it was admitted. Only grants decided
// before the refusal count; when one was decided while it was (either
// order is possible), or fewer than limit recorded grants may still count
// (a grant to another of the key's requests not recorded yet, or a key not
// tracked), nothing is judged.
func (g *grantLog) logWait(cfg Config, key string, wait time.Duration, asked, at time.Time) string {
	g.mu.Lock()
	if g.pending[key] > 0 {
		g.mu.Unlock()
		return "" // a grant of this key may be decided and not yet recorded
	}
	all := g.keys[key]
	var h []grantSpan // the grants decided before this refusal was
	for _, s := range all {
		switch {
		case s.at.Before(asked):
			h = append(h, s)
		case !s.asked.After(at):
			g.mu.Unlock()
			return "" // decided while this request was: in either order
		}
	}
	g.mu.Unlock()
	w, limit := cfg.CountingWindow, cfg.CountingLimit
	counting := 0
	for _, s := range h {
		if s.at.After(asked.Add(-w)) { // may still count at the refusal
			counting++
		}
	}
	if counting < limit || len(h) < limit {
		return ""
	}
	oldest := h[len(h)-limit]
	lo, hi := oldest.asked.Add(w).Sub(at)-waitSlack, oldest.at.Add(w).Sub(asked)+waitSlack
	if wait < lo || wait > hi {
		return fmt.Sprintf("the sliding log said %v, but the oldest of the key's %d latest admissions stops counting in %v", wait, limit, oldest.at.Add(w).Sub(at).Round(time.Microsecond))
	}
	return ""
}

// noteTake notes one answer of the limiter to this request.
// asked is when the limiter was called, at when it returned.
func (j *Job) noteTake(key string, n float64, ok bool, wait time.Duration, asked, at time.Time) {
	notes := &j.notes
	notes.mu.Lock()
	defer notes.mu.Unlock()
	if key != notes.key && notes.otherKey == "" {
		notes.otherKey = key
	}
	if ok {
		notes.granted, notes.grantAt = true, at
		if n > 0 {
			notes.tokens += n
		}
		return
	}
	why := dishonestWait(j.s.cfg, n, wait, asked, at)
	if why == "" {
		why = dishonestWindowWait(j.s.cfg, wait, asked, at)
	}
	if why == "" && j.s.cfg.Counting == "log" && n == 1 {
		why = j.s.grants.logWait(j.s.cfg, key, wait, asked, at)
	}
	if why != "" && notes.badWait == "" {
		notes.badWait = why
	}
	notes.denials++
	if wait == lab.InfDuration {
		notes.infWait = true
		return
	}
	if notes.finite == 0 || wait < notes.minWait {
		notes.minWait = wait
	}
	notes.maxWait = max(notes.maxWait, wait)
	notes.finite++
}

// dishonestWait returns why no token bucket of cfg's rate and burst could
// refuse n tokens, asked at asked and answering at at, with wait, or "". A
// bucket holds 0 to burst tokens, so n tokens are at most n/rate away
// (rounded up to the nanosecond), never already there, and never if n
// exceeds the burst.
//
// "Away" from the limiter's own reading of the clock, which may be as early
// as asked while the bucket it reads was brought up to date by a caller
// that read the clock as late as at (a limiter reads the time, then waits
// for its lock): a correct limiter's wait may exceed n/rate by the call's
// own duration, at - asked, and no more. In virtual time that is 0, so the
// bound is exact there; on a busy machine it was 2 to 120 ms.
func dishonestWait(cfg Config, n float64, wait time.Duration, asked, at time.Time) string {
	switch {
	case !cfg.Mode.Limited() || cfg.Counting != "" && n == 1:
		return "" // task 8's limiters: dishonestWindowWait
	case n <= 0:
		return fmt.Sprintf("the limiter refused %v tokens, which always succeed", n)
	case !(n <= cfg.BucketBurst):
		if wait != lab.InfDuration {
			return fmt.Sprintf("the limiter said %v for %v tokens, more than the burst of %v: it should say lab.InfDuration (never)", wait, n, cfg.BucketBurst)
		}
		return ""
	case wait <= 0:
		return fmt.Sprintf("the limiter refused %v token(s) with a wait of %v: a refused request always has something to wait for", n, wait)
	}
	empty := time.Duration(math.Ceil(n / cfg.BucketRate * 1e9))
	if wait > empty+callTime(asked, at)+waitSlack {
		return fmt.Sprintf("the limiter said %v for %v token(s), but at %v tokens/s even an empty bucket has them within %v%s", wait, n, cfg.BucketRate, empty, callTimeNote(asked, at))
	}
	return ""
}

// dishonestWindowWait returns why none of task 8's limiters of cfg's kind
// could refuse one request, asked at asked and answering at at, with
// wait, or "". Every refused request has something to wait for, and
//
//   - a fixed window: exactly until the next window boundary (windows
//     aligned on the Unix epoch), for an instant between asked and at;
//   - a sliding log: at most one window (the oldest request it holds is
//     gone by then);
//   - a sliding counter: at most until the next window starts plus
//     window/limit (a full window's weight, one window on, has fallen by
//     one request by then);
//   - a token bucket: at most one token's time, window/limit.
//
// The log's and the bucket's ceilings also allow the call's own duration,
// as dishonestWait explains; the counter's is read from asked already. A
// microsecond of slack (waitSlack) on each side allows for rounding.
// The log's exact wait depends on its state: grantLog.logWait judges it
// from the grants the server saw. The counter's only the unit suite
// models.
func dishonestWindowWait(cfg Config, wait time.Duration, asked, at time.Time) string {
	if cfg.Counting == "" || !cfg.Mode.Limited() || cfg.CountingLimit < 1 || cfg.CountingWindow <= 0 {
		return ""
	}
	if wait <= 0 {
		return fmt.Sprintf("the %s limiter refused a request with a wait of %v: a refused request always has something to wait for", cfg.Counting, wait)
	}
	w := cfg.CountingWindow
	switch cfg.Counting {
	case "fixed":
		// until the boundary after a, for a from asked to at
		toNext := func(t time.Time) time.Duration { n := t.UnixNano(); return time.Duration(int64(w) - n%int64(w)) }
		lo, hi := toNext(at)-waitSlack, toNext(asked)+waitSlack
		if toNext(asked) < toNext(at) { // a boundary between the two readings
			lo = 0
		}
		if wait < lo || wait > hi {
			return fmt.Sprintf("the fixed window said %v, but the next window of %v starts in %v", wait, w, toNext(at).Round(time.Microsecond))
		}
	case "log":
		if wait > w+callTime(asked, at)+waitSlack {
			return fmt.Sprintf("the sliding log said %v, more than its window of %v%s, after which nothing it counted is in view", wait, w, callTimeNote(asked, at))
		}
	case "counter":
		// Longest when this window is full: until it ends, then until the
		// previous window's weight (the full one) has fallen by one
		// request, window/limit into the next.
		toNext := func(t time.Time) time.Duration { n := t.UnixNano(); return time.Duration(int64(w) - n%int64(w)) }
		most := toNext(asked) + time.Duration(math.Ceil(float64(w)/float64(cfg.CountingLimit))) + waitSlack
		if wait > most {
			return fmt.Sprintf("the sliding counter said %v, but even a full window lets a request in by %v (the next window's start, then %v for the full window's weight to fall by one)", wait, (most - waitSlack).Round(time.Microsecond), w/time.Duration(cfg.CountingLimit))
		}
	case "bucket":
		token := time.Duration(math.Ceil(float64(w) / float64(cfg.CountingLimit)))
		if wait > token+callTime(asked, at)+waitSlack {
			return fmt.Sprintf("the token bucket said %v, but at %d per %v even an empty bucket has a token within %v%s", wait, cfg.CountingLimit, w, token, callTimeNote(asked, at))
		}
	}
	return ""
}

// judgeRefusal judges the Retry-After of a 429 or 503 that job's admission
// code is about to send with headers h, against what the server knows at
// this moment. Other statuses pass untouched.
func (s *Server) judgeRefusal(j *Job, h http.Header, code int) {
	var kind string
	switch {
	case code == http.StatusTooManyRequests:
		kind = results.RefusalLimited
	case code == http.StatusServiceUnavailable && !j.acquired:
		if s.cfg.SpreadRetryAfter {
			return // the server wrote this header itself
		}
		kind = results.RefusalShed
	case code == http.StatusServiceUnavailable:
		kind = results.RefusalExpired
	default:
		return
	}
	gone := j.r.Context().Err() != nil || s.isClosing()
	var bad *results.BadRefusal
	if !gone {
		bad = s.expectRetryAfter(j, kind, code, h)
	}
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	c := s.refusals.Kind(kind)
	switch {
	case gone:
		c.Gone++
	case bad != nil:
		c.Judged++
		c.Bad++
		if len(s.refusals.Bad) < results.MaxBadRefusals {
			s.refusals.Bad = append(s.refusals.Bad, *bad)
		}
	default:
		c.Judged++
	}
}

// expectRetryAfter returns what is wrong with the Retry-After in h for a
// refusal of kind, or nil if it is right:
//
//   - shed and expired: whole seconds, at least 1, equal to the drain time
//     of the line (Slots per Work) rounded up, for a line length this
//     request saw, through Job.Waiting or at the moment of its answer. The
//     line moves while admission code decides, so every length it saw is
//     accepted, and no other.
//   - limited: whole seconds, at least 1, equal to a wait the limiter
//     reported to this request rounded up; for lab.InfDuration any whole
//     seconds of at least 1. The wait itself must be one an honest bucket
//     could report (see dishonestWait).
func (s *Server) expectRetryAfter(j *Job, kind string, code int, h http.Header) *results.BadRefusal {
	vals := h.Values("Retry-After")
	bad := &results.BadRefusal{Kind: kind, Status: code, Header: strings.Join(vals, ", ")}
	var lo, hi int64 // hi 0: no upper bound
	switch kind {
	case results.RefusalShed, results.RefusalExpired:
		a, b := j.notes.lines(s.waiting.Load())
		da, db := s.cfg.drain(a), s.cfg.drain(b)
		lo, hi = retryAfterSeconds(da), retryAfterSeconds(db)
		if a == b {
			bad.Why = fmt.Sprintf("the line of %d this request saw drains in %v", a, da)
		} else {
			bad.Why = fmt.Sprintf("the lines of %d to %d this request saw drain in %v to %v", a, b, da, db)
		}
	case results.RefusalLimited:
		n := &j.notes
		n.mu.Lock()
		denials, finite, minW, maxW, inf, badWait := n.denials, n.finite, n.minWait, n.maxWait, n.infWait, n.badWait
		n.mu.Unlock()
		switch {
		case denials == 0:
			bad.Why = "a 429 although the client's bucket refused nothing to this request (job.Limiter() let it through, or was never asked)"
			return bad
		case badWait != "":
			bad.Why = badWait
			lo, hi = 1, 0
			bad.WantMinS = 1
			return bad
		}
		if finite == 0 {
			lo, hi = 1, 0
			bad.Why = "the limiter said lab.InfDuration (never): any whole seconds of at least 1"
		} else {
			lo, hi = retryAfterSeconds(minW), retryAfterSeconds(maxW)
			if inf {
				hi = 0
			}
			bad.Why = fmt.Sprintf("the limiter's wait for this request was %v", maxW)
			if minW != maxW {
				bad.Why = fmt.Sprintf("the limiter's waits for this request were %v to %v", minW, maxW)
			}
		}
	}
	bad.WantMinS, bad.WantMaxS = lo, hi
	got, ok := delaySeconds(vals)
	if ok && got >= lo && (hi == 0 || got <= hi) {
		return nil
	}
	return bad
}

// delaySeconds parses a Retry-After given as delay-seconds (RFC 9110:
// digits only): exactly one value, whole seconds of at least 1.
func delaySeconds(vals []string) (int64, bool) {
	if len(vals) != 1 {
		return 0, false
	}
	v := strings.TrimSpace(vals[0])
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	s, err := strconv.ParseInt(v, 10, 64)
	return s, err == nil && s >= 1
}

// retryAfterSeconds returns d in whole seconds rounded up, at least 1,
// without overflowing for the largest Duration.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}

// drain returns how long a line of w takes to clear: w·Work/Slots.
func (c Config) drain(w int64) time.Duration {
	if w <= 0 {
		return 0
	}
	return time.Duration(w) * c.Work / time.Duration(c.Slots)
}

func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// refusalStats returns a copy of the refusal judgement, with the examples
// of wrong ones if detail is set, or nil in mode none.
func (s *Server) refusalStats(detail bool) *results.Refusals {
	if s.cfg.Mode == ModeNone {
		return nil
	}
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	r := s.refusals
	r.Bad = nil
	if detail {
		r.Bad = slices.Clone(s.refusals.Bad)
	}
	return &r
}

// countGoroutines notes the goroutines of the process as a request
// arrives, keeping the most. The Go runtime keeps a goroutine's
// descriptor (about 480 bytes) for reuse once it ends, so the heap grows
// with the most goroutines the process ever had at once, which follows the
// connections the clients held open: a memory bound must allow for them.
func (s *Server) countGoroutines() {
	n := int64(runtime.NumGoroutine())
	for {
		m := s.maxGoroutines.Load()
		if n <= m || s.maxGoroutines.CompareAndSwap(m, n) {
			return
		}
	}
}

// processStats returns the serving process's CPU time and goroutines, and
// with gc its memory after a full collection.
func processStats(gc bool) (cpu float64, goroutines int64, mem *results.MemoryStats) {
	cpu = processCPU().Seconds()
	if gc {
		// Twice: the first collection moves sync.Pools to their victim
		// caches, the second frees those.
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mem = &results.MemoryStats{
			HeapBytes: int64(m.HeapAlloc), StackBytes: int64(m.StackInuse), Goroutines: int64(runtime.NumGoroutine()),
		}
	}
	return cpu, int64(runtime.NumGoroutine()), mem
}

// runtimeCPU estimates the process's CPU time from the Go runtime's own
// accounting, where the operating system's is not available: the time its
// processors were not idle. The runtime brings those figures up to date
// only when it collects garbage, so runtimeCPU collects first.
func runtimeCPU() time.Duration {
	runtime.GC()
	s := []metrics.Sample{{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration((s[0].Value.Float64() - s[1].Value.Float64()) * float64(time.Second))
}
