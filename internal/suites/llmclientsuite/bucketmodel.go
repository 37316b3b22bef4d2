package llmclientsuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
)

// --- A model of the WaitingBucket ---

// A taker is one caller of Take in a random workload: it arrives gap after
// the previous one, asks for n tokens, and its ctx is done already, ends
// after a while (cancelled or at a deadline), or never ends.
type taker struct {
	gap     time.Duration
	n       float64
	ctx     int           // one of ctxNever, ctxDone, ctxCancel, ctxDeadline
	endsAft time.Duration // when ctx ends, after the arrival (ctxCancel, ctxDeadline)
}

const (
	ctxNever = iota
	ctxDone
	ctxCancel
	ctxDeadline
)

func (k taker) String() string {
	s := fmt.Sprintf("Take(ctx, %v)", k.n)
	switch k.ctx {
	case ctxDone:
		s += " with ctx already done"
	case ctxCancel:
		s += fmt.Sprintf(" with ctx cancelled %v after it", k.endsAft)
	case ctxDeadline:
		s += fmt.Sprintf(" with a ctx deadline %v after it", k.endsAft)
	}
	return s
}

// outcomeOf is when a Take returned (time since the bucket was made) and
// whether it returned ctx's error. In the model, either indicates that
// either answer is right: ctx already done and n ≤ 0, which the contract
// puts both ways.
type outcomeOf struct {
	at       time.Duration
	ctxError bool
	either   bool
	wake     time.Duration // in the model: when the Take's tokens are due
}

// modelTakes is the model of a WaitingBucket of rate and burst that
// starts full at 0: each Take (in arrival order) takes min(n, burst) at
// once, into debt if need be, and waits until the debt before it and its
// own n have dripped in; one whose ctx ends first gives its n back (up to
// the burst) at that instant, for the callers that come after it. A Take
// of n ≤ 0 or NaN returns at once, as does one whose ctx is already done.
func modelTakes(rate, burst float64, ks []taker) []outcomeOf {
	type event struct {
		at     time.Duration
		cancel bool
		i      int
	}
	out := make([]outcomeOf, len(ks))
	tokens, last := burst, time.Duration(0)
	advance := func(now time.Duration) {
		if d := now - last; d > 0 {
			tokens = min(burst, tokens+d.Seconds()*rate)
			last = now
		}
	}
	var arrive time.Duration
	var pending []event // cancellations still to come, by time
	for i, k := range ks {
		arrive += k.gap
		// Cancellations due before this arrival happen first.
		slices.SortFunc(pending, func(a, b event) int { return int(a.at - b.at) })
		for len(pending) > 0 && pending[0].at < arrive {
			e := pending[0]
			pending = pending[1:]
			advance(e.at)
			tokens = min(burst, tokens+min(ks[e.i].n, burst))
		}
		switch {
		case k.ctx == ctxDone:
			out[i] = outcomeOf{arrive, true, !(k.n > 0), 0}
			continue
		case !(k.n > 0):
			out[i] = outcomeOf{arrive, false, false, 0}
			continue
		}
		n := min(k.n, burst)
		advance(arrive)
		tokens -= n
		var wait time.Duration
		if tokens < 0 {
			wait = time.Duration(math.Ceil(-tokens / rate * 1e9))
		}
		out[i] = outcomeOf{arrive + wait, false, false, arrive + wait}
		if (k.ctx == ctxCancel || k.ctx == ctxDeadline) && k.endsAft < wait {
			out[i] = outcomeOf{arrive + k.endsAft, true, false, arrive + wait}
			pending = append(pending, event{arrive + k.endsAft, true, i})
		}
	}
	return out
}

// Workload shapes for drawTakers.
const (
	spread     = iota // arrivals mostly apart, the bucket refilling between them
	bunched           // arrivals mostly together, a line of waiters
	cancelling        // either, and contexts that end
)

// drawTakers draws a workload for a bucket of rate and burst: arrivals
// spread or bunched, amounts of every size (fractions, more than the
// burst, zero, negative, NaN, +Inf), and when cancelling, contexts that
// end. Arrival gaps are whole microseconds and cancellations fall half a
// microsecond off them, so no cancellation ties with an arrival.
func drawTakers(rt *rapid.T, rate, burst float64, mode int) []taker {
	cancel := mode == cancelling
	gapKinds := []int{0, 1, 2, 2}
	if mode == bunched {
		gapKinds = []int{0, 0, 1, 1, 2}
	}
	n := rapid.IntRange(1, 30).Draw(rt, "callers")
	refill := burst / rate // seconds to fill the bucket
	ks := make([]taker, n)
	for i := range ks {
		var k taker
		switch rapid.SampledFrom(gapKinds).Draw(rt, "gap kind") {
		case 0:
			k.gap = 0
		case 1:
			k.gap = time.Duration(rapid.Float64Range(0, refill/4).Draw(rt, "short gap")*1e6) * time.Microsecond
		default:
			k.gap = time.Duration(rapid.Float64Range(0, 3*refill).Draw(rt, "gap")*1e6) * time.Microsecond
		}
		k.n = rapid.OneOf(
			rapid.Float64Range(0.001, burst),
			rapid.Float64Range(burst, 3*burst),
			rapid.SampledFrom([]float64{1, 2, 0.5, burst, 0, -1, math.NaN(), math.Inf(1)}),
		).Draw(rt, "n")
		if cancel {
			k.ctx = rapid.SampledFrom([]int{ctxNever, ctxNever, ctxDone, ctxCancel, ctxDeadline}).Draw(rt, "ctx")
			us := rapid.Float64Range(0, 2*refill+1e-3).Draw(rt, "ctx ends after")
			k.endsAft = time.Duration(us*1e6)*time.Microsecond + 500*time.Nanosecond
		}
		ks[i] = k
	}
	return ks
}

// untie moves every ctx that would end within 2µs of its Take's return
// 3µs later, so that no outcome hangs on which comes first.
func untie(rate, burst float64, ks []taker) []taker {
	for range len(ks) + 1 {
		model := modelTakes(rate, burst, ks)
		tied := false
		var arrive time.Duration
		for i, k := range ks {
			arrive += k.gap
			if k.ctx == ctxCancel || k.ctx == ctxDeadline {
				if d := arrive + k.endsAft - model[i].wake; d > -2*time.Microsecond && d < 2*time.Microsecond {
					ks[i].endsAft += 3 * time.Microsecond
					tied = true
				}
			}
		}
		if !tied {
			break
		}
	}
	return ks
}

// runTakers runs the workload on a new bucket, each Take in its own
// goroutine, each arriving (and blocked, or done) before the next, and
// returns what happened, or a description of a panic.
func (s *suite) runTakers(rate, burst float64, ks []taker) ([]outcomeOf, []error, string) {
	var b Bucket
	if r := suitekit.Report(fmt.Sprintf("NewWaitingBucket(%v, %v)", rate, burst), func() { b = s.newBucket(rate, burst) }); r != "" {
		return nil, nil, r
	}
	if b == nil {
		return nil, nil, fmt.Sprintf("NewWaitingBucket(%v, %v) = nil; want a bucket", rate, burst)
	}
	start := time.Now()
	var (
		p    panics
		wg   sync.WaitGroup
		out  = make([]outcomeOf, len(ks))
		errs = make([]error, len(ks))
	)
	for i, k := range ks {
		time.Sleep(k.gap)
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		switch k.ctx {
		case ctxDone:
			ctx, cancel = context.WithCancel(ctx)
			cancel()
		case ctxCancel:
			var c context.CancelFunc
			ctx, c = context.WithCancel(ctx)
			timer := time.AfterFunc(k.endsAft, c)
			cancel = func() { timer.Stop(); c() }
		case ctxDeadline:
			ctx, cancel = context.WithTimeout(ctx, k.endsAft)
		}
		wg.Go(func() {
			defer cancel()
			var err error
			p.add(suitekit.Report(fmt.Sprintf("taker %d: %v", i, k), func() { err = b.Take(ctx, k.n) }))
			errs[i] = err
			out[i] = outcomeOf{at: time.Since(start), ctxError: err != nil && errors.Is(err, ctx.Err())}
		})
		synctest.Wait() // taker i has taken its place in line (or is done)
	}
	wg.Wait()
	if p.first != "" {
		return nil, nil, p.first
	}
	return out, errs, ""
}

// judgeTakers compares what a workload did with the model.
func judgeTakers(rate, burst float64, ks []taker, got []outcomeOf, errs []error) string {
	want := modelTakes(rate, burst, ks)
	for i := range ks {
		g, w := got[i], want[i]
		okErr := (g.ctxError == w.ctxError || w.either) && (g.ctxError || errs[i] == nil)
		if okErr && onTime(g.at, w.at) {
			continue
		}
		var b strings.Builder
		var arrive time.Duration
		for j, k := range ks {
			arrive += k.gap
			mark := ""
			if j == i {
				mark = "  <-"
			}
			fmt.Fprintf(&b, "\n  taker %d at t=%v: %v: returned %v at t=%v; the model says %v at t=%v%s", j, arrive, k, errText(errs[j]), got[j].at, errWord(want[j].ctxError), want[j].at, mark)
		}
		return fmt.Sprintf("NewWaitingBucket(rate=%v/s, burst=%v): taker %d returned %v at t=%v; want %v at t=%v\n"+
			"a Take waits exactly until the tokens promised to every earlier caller and its own (at most burst) have dripped in, "+
			"first come first served; n ≤ 0 or NaN returns at once; a ctx that ends first returns ctx.Err() and gives the tokens back "+
			"for later callers; a ctx already done takes nothing\nthe callers, in order:%s",
			rate, burst, i, errText(errs[i]), g.at, errWord(w.ctxError), w.at, b.String())
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", err)
}

func errWord(ctxError bool) string {
	if ctxError {
		return "ctx.Err()"
	}
	return "nil"
}

// drawRate draws a bucket's rate (tokens a second) and burst, both
// log-uniform over wide ranges and never round.
func drawRate(rt *rapid.T) (rate, burst float64) {
	rate = math.Pow(10, rapid.Float64Range(-0.3, 3.7).Draw(rt, "log10 rate"))
	burst = math.Pow(10, rapid.Float64Range(-0.3, 2.3).Draw(rt, "log10 burst"))
	return rate, burst
}

// --- The checks ---

// takesMatchTheModel runs random workloads of a shape (arrivals spread or
// bunched, amounts of every size, and contexts that end) on buckets of random rate and burst, and
// compares when and how every Take returned with the model.
func (s *suite) takesMatchTheModel(t *testing.T, mode int) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		rate, burst := drawRate(rt)
		ks := untie(rate, burst, drawTakers(rt, rate, burst, mode))
		got, errs, failure := s.runTakers(rate, burst, ks)
		if failure != "" {
			return failure
		}
		return judgeTakers(rate, burst, ks, got, errs)
	})
}

// badBucketArgs checks that NewWaitingBucket panics unless rate and burst
// are positive and finite.
func (s *suite) badBucketArgs(t *testing.T) {
	suitekit.PropertyOutside(t, func(rt *rapid.T) string {
		bad := rapid.SampledFrom([]float64{0, -1, -1e-9, math.NaN(), math.Inf(1), math.Inf(-1)}).Draw(rt, "bad value")
		good := math.Pow(10, rapid.Float64Range(-1, 3).Draw(rt, "log10 good value"))
		rate, burst := bad, good
		if rapid.Bool().Draw(rt, "bad burst") {
			rate, burst = good, bad
		}
		if r, _ := suitekit.Catch(func() { s.newBucket(rate, burst) }); r == nil {
			return fmt.Sprintf("NewWaitingBucket(%v, %v) returned; want a panic: rate and burst must be positive and finite", rate, burst)
		}
		return ""
	})
}

// concurrentRealClock takes tokens from many goroutines on the real clock,
// outside any bubble: over the whole run no more than burst + rate × its
// length may be handed out, whatever the scheduling.
func (s *suite) concurrentRealClock(t *testing.T) {
	r := suitekit.Rand(t)
	rate := 2000 + 8000*r.Float64()
	burst := 1 + 20*r.Float64()
	goroutines, each := 4+r.IntN(13), 10+r.IntN(30)
	var b Bucket
	if msg := suitekit.Report(fmt.Sprintf("NewWaitingBucket(%v, %v)", rate, burst), func() { b = s.newBucket(rate, burst) }); msg != "" {
		t.Fatal(msg)
	}
	start := time.Now()
	suitekit.Hammer(t, goroutines, "Take(ctx, 1)", func(int) {
		for range each {
			if err := b.Take(context.Background(), 1); err != nil {
				panic(suitekit.Failure(fmt.Sprintf("Take(ctx, 1) = %v; want nil", err)))
			}
		}
	})
	took := time.Since(start)
	total := float64(goroutines * each)
	if allowed := burst + rate*took.Seconds(); total > allowed+1e-6 {
		t.Fatalf("on the real clock, %d goroutines took %v tokens from NewWaitingBucket(%v, %v) in %v; want at most burst + rate × %v = %.1f\n"+
			"the bucket handed out more than it holds and refills: read and change it under a mutex", goroutines, total, rate, burst, took, took, allowed)
	}
}
