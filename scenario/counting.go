package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ratelab/results"
)

// CountingLimiter is the method task 8's four limiters share: admit one
// request of key now, or refuse it and say how long until it would pass.
type CountingLimiter interface {
	Allow(key string) (ok bool, wait time.Duration)
}

// CountingSet makes task 8's four limiters, from whichever tree the caller
// links: the harness takes learner code as function values.
type CountingSet struct {
	Fixed, Log, Counter func(limit int, window time.Duration) CountingLimiter
	Bucket              func(limit int, window time.Duration, burst int) CountingLimiter
	DefaultBurst        func(limit int) int
}

// CountingOptions choose what MeasureCounting measures and its sizes. The
// zero value of a size takes its default; the defaults keep the whole
// measurement to about 15 s.
type CountingOptions struct {
	// Measure lists boundary, return, memory and disagreement; empty is
	// all four.
	Measure []string
	// Seed draws the disagreement's trace.
	Seed uint64

	BoundaryLimit  int           // default 100
	BoundaryWindow time.Duration // default 2 s
	BoundaryLead   time.Duration // how far from the boundary each batch starts; default 50 ms

	ReturnClients int           // default 100
	ReturnLimit   int           // default 10
	ReturnWindow  time.Duration // default 1 s
	ReturnWarmup  int           // windows before the measured ones; default 2
	ReturnWindows int           // windows measured; default 4

	MemoryLimits  []int // per minute; default 100 and 10,000
	MemoryClients []int // clients at each limit; default 1,000 and 200

	DisagreeClients int           // default 100
	DisagreeLimit   int           // default 10
	DisagreeWindow  time.Duration // default 500 ms
	DisagreeFor     time.Duration // default 3 s
}

func (o *CountingOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.BoundaryLimit, 100)
	defD(&o.BoundaryWindow, 2*time.Second)
	defD(&o.BoundaryLead, 50*time.Millisecond)
	def(&o.ReturnClients, 100)
	def(&o.ReturnLimit, 10)
	defD(&o.ReturnWindow, time.Second)
	def(&o.ReturnWarmup, 2)
	def(&o.ReturnWindows, 4)
	if len(o.MemoryLimits) == 0 {
		o.MemoryLimits = []int{100, 10_000}
	}
	if len(o.MemoryClients) != len(o.MemoryLimits) {
		o.MemoryClients = []int{1000, 200}[:min(2, len(o.MemoryLimits))]
		for len(o.MemoryClients) < len(o.MemoryLimits) {
			o.MemoryClients = append(o.MemoryClients, 200)
		}
	}
	def(&o.DisagreeClients, 100)
	def(&o.DisagreeLimit, 10)
	defD(&o.DisagreeWindow, 500*time.Millisecond)
	defD(&o.DisagreeFor, 3*time.Second)
	if len(o.Measure) == 0 {
		o.Measure = []string{"boundary", "return", "memory", "disagreement"}
	}
}

// namedLimiter is one of the four, made for one measurement.
type namedLimiter struct {
	name  string
	burst int
	l     CountingLimiter
}

// four makes the four limiters for limit per window, in the order of
// results.LimiterFixed, Log, Counter, Bucket.
func (s CountingSet) four(limit int, window time.Duration) []namedLimiter {
	burst := s.DefaultBurst(limit)
	return []namedLimiter{
		{results.LimiterFixed, 0, s.Fixed(limit, window)},
		{results.LimiterLog, 0, s.Log(limit, window)},
		{results.LimiterCounter, 0, s.Counter(limit, window)},
		{results.LimiterBucket, burst, s.Bucket(limit, window, burst)},
	}
}

// MeasureCounting runs task 8's measurements on the real clock: the
// boundary burst, the synchronised return, memory per client and the
// counter's disagreement with the log. Every limiter reads time.Now(), so
// the measurements wait for real window boundaries.
func MeasureCounting(ctx context.Context, set CountingSet, o CountingOptions) (*results.Counting, error) {
	o.defaults()
	out := &results.Counting{}
	for _, m := range o.Measure {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		switch m {
		case "boundary":
			b, warn, err := countingBoundary(ctx, set, o)
			out.Boundary, out.Warnings = b, append(out.Warnings, warn...)
			if err != nil {
				return out, err
			}
		case "return":
			r, err := countingReturn(ctx, set, o)
			out.Return = r
			if err != nil {
				return out, err
			}
		case "memory":
			mem, warn := countingMemory(set, o)
			out.Memory, out.Warnings = mem, append(out.Warnings, warn...)
		case "disagreement":
			d, err := countingDisagreement(ctx, set, o)
			out.Disagreement = d
			if err != nil {
				return out, err
			}
		default:
			return out, fmt.Errorf("unknown measurement %q (want boundary, return, memory or disagreement)", m)
		}
	}
	return out, nil
}

// sleepUntil sleeps until the Unix instant t (nanoseconds), or ctx ends.
func sleepUntil(ctx context.Context, t int64) error {
	d := time.Until(time.Unix(0, t))
	if d <= 0 {
		return ctx.Err()
	}
	return sleepCtx(ctx, d)
}

// nextBoundary returns the first epoch-aligned window boundary at least
// ahead after now, in Unix nanoseconds.
func nextBoundary(window, ahead time.Duration) int64 {
	now := time.Now().UnixNano()
	w := int64(window)
	b := (now/w + 1) * w
	for b-now < int64(ahead) {
		b += w
	}
	return b
}

// countingBoundary sends the boundary burst to fresh limiters, up to three
// times until neither batch runs across the boundary.
func countingBoundary(ctx context.Context, set CountingSet, o CountingOptions) ([]results.CountingBoundary, []string, error) {
	var out []results.CountingBoundary
	var warn []string
	for try := 1; try <= 3; try++ {
		lims := set.four(o.BoundaryLimit, o.BoundaryWindow)
		b := nextBoundary(o.BoundaryWindow, 2*o.BoundaryLead)
		out = make([]results.CountingBoundary, len(lims))
		for i, l := range lims {
			out[i] = results.CountingBoundary{
				Limiter: l.name, Limit: o.BoundaryLimit, Burst: l.burst, Sent: 2 * o.BoundaryLimit,
				WindowMS: durMS(o.BoundaryWindow),
			}
		}
		key := fmt.Sprintf("boundary-%06d", try)
		rel := func() float64 { return float64(time.Now().UnixNano()-b) / 1e6 }
		batch := func(after bool) {
			for i := range lims {
				if !after {
					out[i].FirstStartMS = rel()
				} else {
					out[i].AfterStartMS = rel()
				}
			}
			for range o.BoundaryLimit {
				for i, l := range lims {
					if ok, _ := l.l.Allow(key); ok {
						if after {
							out[i].AdmittedAfter++
						} else {
							out[i].AdmittedBefore++
						}
					}
				}
			}
			end := rel()
			for i := range lims {
				if after {
					out[i].LastEndMS = end
				} else {
					out[i].BeforeEndMS = end
				}
			}
		}
		if err := sleepUntil(ctx, b-int64(o.BoundaryLead)); err != nil {
			return out, warn, err
		}
		batch(false)
		if err := sleepUntil(ctx, b+int64(o.BoundaryLead)); err != nil {
			return out, warn, err
		}
		batch(true)
		if !out[0].Straddled() {
			return out, warn, nil
		}
		warn = append(warn, fmt.Sprintf("boundary burst, try %d: a batch ran across the boundary (first batch ended %.1f ms from it, second began %.1f ms from it): the machine is busy",
			try, out[0].BeforeEndMS, out[0].AfterStartMS))
	}
	return out, warn, nil
}

func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// countingReturn runs the synchronised return for the four limiters at once.
func countingReturn(ctx context.Context, set CountingSet, o CountingOptions) ([]results.CountingReturn, error) {
	lims := set.four(o.ReturnLimit, o.ReturnWindow)
	w := int64(o.ReturnWindow)
	bin := w / int64(o.ReturnLimit) // one admission per client per bin when spread evenly
	nbins := o.ReturnWindows * o.ReturnLimit
	t0 := nextBoundary(o.ReturnWindow, 100*time.Millisecond)
	from := t0 + int64(o.ReturnWarmup)*w
	end := from + int64(o.ReturnWindows)*w
	type tally struct {
		bins              []atomic.Int64
		admitted, refused atomic.Int64
	}
	tallies := make([]*tally, len(lims))
	for i := range tallies {
		tallies[i] = &tally{bins: make([]atomic.Int64, nbins)}
	}
	var lateMu sync.Mutex
	var late []float64
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for li, l := range lims {
		for c := range o.ReturnClients {
			start := t0 + int64(c)*w/int64(o.ReturnClients)
			key := fmt.Sprintf("return-%06d", c)
			t := tallies[li]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var myLate []float64
				defer func() {
					lateMu.Lock()
					late = append(late, myLate...)
					lateMu.Unlock()
				}()
				if sleepUntil(cctx, start) != nil {
					return
				}
				for {
					ok, wait := l.l.Allow(key)
					now := time.Now().UnixNano()
					if now >= end {
						return
					}
					measured := now >= from
					if ok {
						if measured {
							t.admitted.Add(1)
							t.bins[(now-from)/bin].Add(1)
						}
						continue
					}
					if measured {
						t.refused.Add(1)
					}
					// A limiter that answers no wait would spin: retry
					// after a millisecond. One that answers a wait past
					// the end would sleep beyond it: stop there.
					wait = max(wait, time.Millisecond)
					due := min(now+int64(wait), end)
					if sleepUntil(cctx, due) != nil {
						return
					}
					if due < end {
						myLate = append(myLate, float64(time.Now().UnixNano()-due)/1e6)
					}
				}
			}()
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(late)
	p99 := 0.0
	if len(late) > 0 {
		p99 = late[min(len(late)-1, len(late)*99/100)]
	}
	out := make([]results.CountingReturn, len(lims))
	for i, l := range lims {
		r := results.CountingReturn{
			Limiter: l.name, Clients: o.ReturnClients, Limit: o.ReturnLimit, WindowMS: durMS(o.ReturnWindow),
			BinMS: float64(bin) / 1e6, Bins: make([]int64, nbins),
			Admitted: tallies[i].admitted.Load(), Refused: tallies[i].refused.Load(), LateP99MS: p99,
		}
		peak := int64(0)
		for j := range r.Bins {
			r.Bins[j] = tallies[i].bins[j].Load()
			peak = max(peak, r.Bins[j])
		}
		if r.Admitted > 0 {
			r.PeakOverMean = float64(peak) / (float64(r.Admitted) / float64(nbins))
		}
		out[i] = r
	}
	return out, nil
}

// countingMemory measures the heap each limiter keeps for clients at their
// limit, per minute, at each of o.MemoryLimits. A fill that ran across a
// minute boundary is done again, up to three times.
func countingMemory(set CountingSet, o CountingOptions) ([]results.CountingMemory, []string) {
	var out []results.CountingMemory
	var warn []string
	const window = time.Minute
	for li, limit := range o.MemoryLimits {
		clients := o.MemoryClients[li]
		keys := make([]string, clients)
		for i := range keys {
			keys[i] = fmt.Sprintf("client-%07d", i) // 14 bytes
		}
		for k := range 4 {
			var rec results.CountingMemory
			for try := 1; ; try++ {
				var ok bool
				rec, ok = memoryOf(set, k, limit, window, keys)
				if ok || try == 3 {
					if !ok {
						warn = append(warn, fmt.Sprintf("memory of the %s at %d per minute: every fill ran across a minute boundary", rec.Limiter, limit))
					}
					break
				}
			}
			out = append(out, rec)
		}
		runtime.KeepAlive(keys)
	}
	return out, warn
}

// memoryOf fills the k-th of the four limiters with every key at its limit
// and returns the heap it kept; ok is false if a minute boundary passed
// meanwhile.
func memoryOf(set CountingSet, k, limit int, window time.Duration, keys []string) (results.CountingMemory, bool) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now().UnixNano() / int64(window)
	l := set.four(limit, window)[k] // the other three are garbage at the next GC
	var admitted int64
	for _, key := range keys {
		for range limit {
			if ok, _ := l.l.Allow(key); ok {
				admitted++
			}
		}
	}
	ok := time.Now().UnixNano()/int64(window) == start
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l.l)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	return results.CountingMemory{
		Limiter: l.name, Limit: limit, WindowMS: durMS(window), Clients: len(keys), Admitted: admitted,
		HeapBytes: heap, BytesPerClient: float64(heap) / float64(len(keys)),
	}, ok
}

// arrival is one request of the disagreement's trace.
type arrival struct {
	at     int64 // nanoseconds after the trace's start
	client int
}

// disagreementTrace draws the trace: each client sends as a Poisson
// process at between 0.8 and 1.2 times its limit, sorted by time.
func disagreementTrace(seed uint64, clients, limit int, window, length time.Duration) []arrival {
	rng := rand.New(rand.NewPCG(seed, 0x8a7e))
	var tr []arrival
	for c := range clients {
		rate := float64(limit) / window.Seconds() * (0.8 + 0.4*rng.Float64()) // per second
		for t := rng.ExpFloat64() / rate; t < length.Seconds(); t += rng.ExpFloat64() / rate {
			tr = append(tr, arrival{at: int64(t * 1e9), client: c})
		}
	}
	slices.SortFunc(tr, func(a, b arrival) int { return int(a.at - b.at) })
	return tr
}

// countingDisagreement feeds the seeded trace to a sliding counter and a
// sliding log, one call right after the other, and to the definitions of
// both at the instants of the calls.
func countingDisagreement(ctx context.Context, set CountingSet, o CountingOptions) (*results.CountingDisagreement, error) {
	tr := disagreementTrace(o.Seed, o.DisagreeClients, o.DisagreeLimit, o.DisagreeWindow, o.DisagreeFor)
	counter := set.Counter(o.DisagreeLimit, o.DisagreeWindow)
	log := set.Log(o.DisagreeLimit, o.DisagreeWindow)
	mCounter := newCounterModel(o.DisagreeLimit, o.DisagreeWindow)
	mLog := newLogModel(o.DisagreeLimit, o.DisagreeWindow)
	keys := make([]string, o.DisagreeClients)
	for i := range keys {
		keys[i] = fmt.Sprintf("trace-%06d", i)
	}
	d := &results.CountingDisagreement{
		Seed: o.Seed, Clients: o.DisagreeClients, Limit: o.DisagreeLimit, WindowMS: durMS(o.DisagreeWindow),
		Seconds: o.DisagreeFor.Seconds(),
	}
	start := time.Now().UnixNano()
	for _, a := range tr {
		if err := sleepUntil(ctx, start+a.at); err != nil {
			return d, err
		}
		key := keys[a.client]
		tc := time.Now().UnixNano()
		okC, _ := counter.Allow(key)
		tl := time.Now().UnixNano()
		okL, _ := log.Allow(key)
		mC := mCounter.allow(a.client, tc)
		mL := mLog.allow(a.client, tl)
		d.Requests++
		if okC {
			d.CounterAdmitted++
		}
		if okL {
			d.LogAdmitted++
		}
		switch {
		case okC && !okL:
			d.Differ++
			d.CounterOnly++
		case okL && !okC:
			d.Differ++
			d.LogOnly++
		}
		if mC != mL {
			d.ModelDiffer++
		}
	}
	return d, nil
}

// counterModel is the sliding counter's definition: epoch-aligned windows,
// admit while prev × (window − elapsed) + (cur+1) × window ≤ limit × window.
type counterModel struct {
	limit, window int64
	index         map[int]int64 // the window cur counts, per client
	cur, prev     map[int]int64
}

func newCounterModel(limit int, window time.Duration) *counterModel {
	return &counterModel{limit: int64(limit), window: int64(window),
		index: map[int]int64{}, cur: map[int]int64{}, prev: map[int]int64{}}
}

func (m *counterModel) allow(c int, now int64) bool {
	idx, e := now/m.window, now%m.window
	switch last, seen := m.index[c]; {
	case !seen || idx > last+1:
		m.cur[c], m.prev[c] = 0, 0
	case idx == last+1:
		m.cur[c], m.prev[c] = 0, m.cur[c]
	}
	m.index[c] = idx
	if m.prev[c]*(m.window-e)+(m.cur[c]+1)*m.window <= m.limit*m.window {
		m.cur[c]++
		return true
	}
	return false
}

// logModel is the sliding log's definition: a request admitted at t counts
// while now − window < t ≤ now; admit while fewer than limit count.
type logModel struct {
	limit, window int64
	logs          map[int][]int64
}

func newLogModel(limit int, window time.Duration) *logModel {
	return &logModel{limit: int64(limit), window: int64(window), logs: map[int][]int64{}}
}

func (m *logModel) allow(c int, now int64) bool {
	log := m.logs[c]
	for len(log) > 0 && log[0] <= now-m.window {
		log = log[1:]
	}
	if int64(len(log)) >= m.limit {
		m.logs[c] = log
		return false
	}
	m.logs[c] = append(log, now)
	return true
}
