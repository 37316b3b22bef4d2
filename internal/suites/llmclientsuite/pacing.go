package llmclientsuite

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/provider"
)

// apiBurst is the largest burst the pacing checks allow a client's bucket:
// a tenth of a second of its refill (and at least one request or token),
// the fake API's own bucket. The package's BurstWindow is a fifth of that;
// a bucket of a second, let alone a minute, is far outside it.
const apiBurst = 100 * time.Millisecond

func allowedBurst(rate float64) float64 { return max(1, rate*apiBurst.Seconds()) }

// burstinessAfter checks that events at times, of the given sizes, put no
// more than burst + rate×(t_j − t_i) into any window (t_i, t_j] after an
// event i: what a request's tokens collected before it was sent does not
// count against the requests that follow it.
func burstinessAfter(times []time.Duration, sizes []float64, rate, burst float64) string {
	type ev struct {
		at   time.Duration
		size float64
	}
	evs := make([]ev, len(times))
	for i := range times {
		evs[i] = ev{times[i], sizes[i]}
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return int(a.at - b.at) })
	for i := range evs {
		sum := 0.0
		for j := i + 1; j < len(evs); j++ {
			sum += evs[j].size
			window := evs[j].at - evs[i].at
			if allowed := burst + rate*window.Seconds(); sum > allowed+1e-6 {
				return fmt.Sprintf("%v after t=%v and by t=%v; want at most burst + rate×%v = %.6g", sum, evs[i].at, evs[j].at, window, allowed)
			}
		}
	}
	return ""
}

// workload is a random set of Creates: prompt i of tokens[i] input tokens
// is called at arrive[i] (after the client was made and idle for a while).
type workload struct {
	idle   time.Duration
	arrive []time.Duration
	tokens []int
}

// drawWorkload draws n prompts of 20 to maxTokens input tokens, arriving
// all at once or spread over about the time rate (requests, or tokens
// when tokens is true, a second) needs for them.
func drawWorkload(rt *rapid.T, n, maxTokens int, rate float64, tokens bool, idle time.Duration) workload {
	w := workload{idle: idle, arrive: make([]time.Duration, n), tokens: make([]int, n)}
	work := float64(n)
	for i := range n {
		w.tokens[i] = rapid.IntRange(20, maxTokens).Draw(rt, "prompt tokens")
		if tokens {
			work += float64(w.tokens[i]) - 1
		}
	}
	if !rapid.Bool().Draw(rt, "all at once") {
		spread := int64(work / rate * 1e6)
		for i := range n {
			w.arrive[i] = time.Duration(rapid.Int64Range(0, spread).Draw(rt, "arrival µs")) * time.Microsecond
		}
		slices.Sort(w.arrive)
	}
	return w
}

// run calls Create for every prompt of w at its arrival (each in its own
// goroutine) on client c and waits for them all; it returns the first
// panic report or failed Create, or "".
func (w workload) run(c Client, ctx context.Context) string {
	time.Sleep(w.idle)
	start := time.Now()
	var (
		p  panics
		wg sync.WaitGroup
	)
	for i := range w.arrive {
		time.Sleep(w.arrive[i] - time.Since(start))
		wg.Go(func() {
			var err error
			p.add(suitekit.Report(fmt.Sprintf("Create(ctx, prompt %d)", i), func() { _, err = c.Create(ctx, prompt(i, w.tokens[i])) }))
			if err != nil {
				p.add(fmt.Sprintf("Create of prompt %d = %v; want a message", i, err))
			}
		})
	}
	wg.Wait()
	return p.first
}

// fluidFinish is when a work-conserving server of rate units a second,
// starting with nothing saved up, is done with work size[i] arriving at
// arrive[i] (sorted): the latest over k of arrive[k] plus the work from k
// on over rate. A pacer that never idles while work waits finishes by
// then, whatever order it serves in.
func fluidFinish(arrive []time.Duration, size []float64, rate float64) time.Duration {
	var finish time.Duration
	for k := range arrive {
		work := 0.0
		for j := k; j < len(arrive); j++ {
			work += size[j]
		}
		finish = max(finish, arrive[k]+time.Duration(math.Ceil(work/rate*1e9)))
	}
	return finish
}

// pacingCase runs a random workload against a client with an RPM limit
// (requests) or an ITPM limit (input tokens), the API answering at once,
// and checks it against the model of a pacer: never more than a small
// burst beyond the rate in any window, and, when every attempt succeeds,
// done no later than a pacer that never idles while a request waits. With
// retries, some prompts are first answered 529: their retries are paced
// too.
func (s *suite) pacingCase(rt *rapid.T, tokensLimit, idle, retries bool) string {
	rate := math.Pow(10, rapid.Float64Range(0, 2.5).Draw(rt, "log10 requests a second"))
	maxTokens := 50
	if tokensLimit {
		rate = math.Pow(10, rapid.Float64Range(2.3, 4).Draw(rt, "log10 input tokens a second"))
		maxTokens = max(50, int(rate*rapid.Float64Range(0.001, 0.12).Draw(rt, "largest prompt in seconds of refill")))
	}
	n := rapid.IntRange(5, 30).Draw(rt, "calls")
	var pause time.Duration
	if idle {
		pause = time.Duration(rapid.Int64Range(int64(time.Minute), int64(10*time.Minute)).Draw(rt, "idle first"))
	}
	w := drawWorkload(rt, n, maxTokens, rate, tokensLimit, pause)
	failOnce := map[int]bool{}
	if retries {
		for i := range n {
			failOnce[i] = rapid.IntRange(0, 3).Draw(rt, "first answer 529") == 0
		}
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	a := newAPI(func(_ int, p provider.MessageParams) reply {
		mu.Lock()
		defer mu.Unlock()
		key := lastText(p)
		first := !seen[key]
		seen[key] = true
		for i := range n {
			if failOnce[i] && first && lastText(prompt(i, w.tokens[i])) == key {
				return reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded}
			}
		}
		return reply{}
	})
	o := baseOptions(a)
	o.MaxInFlight = 1000
	o.BaseBackoff, o.MaxBackoff = 10*time.Millisecond, time.Second
	limit := "RPM"
	if tokensLimit {
		o.ITPM = rate * 60
		limit = "ITPM"
	} else {
		o.RPM = rate * 60
	}
	var c Client
	if r := suitekit.Report("NewPoliteClient(opts)", func() { c = s.newClient(o) }); r != "" {
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
	defer cancel()
	if failure := w.run(c, ctx); failure != "" {
		return failure
	}
	calls := a.snapshot()
	times := make([]time.Duration, len(calls))
	sizes := make([]float64, len(calls))
	for i, cl := range calls {
		times[i] = cl.at - w.idle
		sizes[i] = 1
		if tokensLimit {
			sizes[i] = float64(provider.CountTokens(cl.params))
		}
	}
	what := fmt.Sprintf("%s=%.6g (%.6g a second), %d calls %s", limit, rate*60, rate, n, map[bool]string{true: "at once", false: "arriving over time"}[w.arrive[n-1] == 0])
	if idle {
		what += fmt.Sprintf(" after an idle %v", w.idle)
	}
	if retries {
		what += ", some answered 529 once"
	}
	if msg := burstinessAfter(times, sizes, rate, allowedBurst(rate)); msg != "" {
		return fmt.Sprintf("%s: sent %s\n"+
			"a per-minute limit is a rate (%s/60 a second), not an allowance to spend at once: wait on a bucket of that rate before every attempt, "+
			"holding BurstWindow of its refill (the fake API's own bucket holds a tenth of a second); "+
			"a prompt larger than the bucket's burst is taken in pieces, one request at a time", what, msg, limit)
	}
	if retries {
		return ""
	}
	arrive := slices.Clone(w.arrive)
	work := make([]float64, n)
	for i := range work {
		work[i] = 1
		if tokensLimit {
			work[i] = float64(provider.CountTokens(prompt(i, w.tokens[i])))
		}
	}
	finish := fluidFinish(arrive, work, rate)
	if last := slices.Max(times); last > finish+late {
		return fmt.Sprintf("%s: the last was sent at t=%v; want by t=%v, when a pacer at the full rate that never idles while a request waits is done: "+
			"use the rate you are allowed (and count the tokens exactly, with provider.CountTokens)", what, last, finish)
	}
	return ""
}

// smallBurstRandom: after a long idle stretch, random workloads at random
// request rates must still come in bursts no larger than the API's.
func (s *suite) smallBurstRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string { return s.pacingCase(rt, false, true, false) })
}

// pacesRequestsRandom: random workloads at random request rates, some with
// retries, paced and not slower than the rate allows.
func (s *suite) pacesRequestsRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		return s.pacingCase(rt, false, rapid.Bool().Draw(rt, "idle first"), rapid.Bool().Draw(rt, "retries"))
	})
}

// waitsForInputTokensRandom: random workloads of random prompt sizes
// (some larger than the bucket's burst) at random input-token rates.
func (s *suite) waitsForInputTokensRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		return s.pacingCase(rt, true, rapid.Bool().Draw(rt, "idle first"), rapid.IntRange(0, 3).Draw(rt, "retries") == 0)
	})
}
