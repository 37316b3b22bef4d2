package retrysuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
)

// budgetModel is the model of a RetryBudget, in whole millionths of a
// retry: it starts with BudgetBurst retries, a first attempt deposits the
// ratio (what goes past BudgetBurst is dropped), and a retry withdraws one
// whole retry if the budget holds one.
type budgetModel struct {
	deposit, balance int64
}

const micro = 1_000_000

func newBudgetModel(ratio float64) *budgetModel {
	return &budgetModel{deposit: int64(math.Round(min(ratio, budgetBurst) * micro)), balance: budgetBurst * micro}
}

func (m *budgetModel) onFirstAttempt() { m.balance = min(m.balance+m.deposit, budgetBurst*micro) }

// tryRetry withdraws a retry as the model says; when the balance is
// exactly one retry, code that counts in floating point may hold a hair
// less, so got (what the code answered) decides.
func (m *budgetModel) tryRetry(got bool) (want, ambiguous bool) {
	if m.balance == micro {
		if got {
			m.balance = 0
		}
		return got, true
	}
	if m.balance < micro {
		return false, false
	}
	m.balance -= micro
	return true, false
}

func (m *budgetModel) String() string {
	return fmt.Sprintf("%.6f retries", float64(m.balance)/micro)
}

// drawRatio draws a budget's ratio in thousandths, so that the model's
// millionths hold it exactly: small ratios mostly, up to 30 (past
// BudgetBurst, where deposits are capped), and sometimes +Inf.
func drawRatio(rt *rapid.T) float64 {
	if rapid.IntRange(0, 19).Draw(rt, "ratio is +Inf") == 0 {
		return math.Inf(1)
	}
	k := rapid.OneOf(rapid.IntRange(0, 1000), rapid.IntRange(0, 30_000), rapid.SampledFrom([]int{0, 1, 100, 125, 1000, 10_000, 20_000})).Draw(rt, "ratio in thousandths")
	return float64(k) / 1000
}

// budgetOf calls NewRetryBudget(ratio), or returns its panic.
func (s *suite) budgetOf(ratio float64) (Budget, string) {
	var b Budget
	if r, stack := suitekit.Catch(func() { b = s.impl.NewRetryBudget(ratio) }); r != nil {
		return nil, suitekit.PanicReport(fmt.Sprintf("NewRetryBudget(%v)", ratio), r, stack)
	}
	if b == nil {
		return nil, fmt.Sprintf("NewRetryBudget(%v) = nil; want a budget", ratio)
	}
	return b, ""
}

// budgetMatchesTheModel drives a budget with a random ratio through a
// random sequence of deposits and withdrawals, and compares every answer
// of TryRetry with the model; it also checks that a negative or NaN ratio
// panics, as NewRetryBudget documents.
func (s *suite) budgetMatchesTheModel(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		ratio := drawRatio(rt)
		b, failure := s.budgetOf(ratio)
		if failure != "" {
			return failure
		}
		m := newBudgetModel(ratio)
		pDeposit := rapid.IntRange(0, 100).Draw(rt, "percent of deposits")
		n := rapid.IntRange(1, 400).Draw(rt, "operations")
		var log strings.Builder
		deposits, retries := 0, 0
		for i := range n {
			if rapid.IntRange(1, 100).Draw(rt, "operation") <= pDeposit {
				if r := suitekit.Report("RetryBudget.OnFirstAttempt()", b.OnFirstAttempt); r != "" {
					return r
				}
				m.onFirstAttempt()
				deposits++
				log.WriteString("d")
				continue
			}
			var got bool
			if r := suitekit.Report("RetryBudget.TryRetry()", func() { got = b.TryRetry() }); r != "" {
				return r
			}
			before := m.String()
			want, _ := m.tryRetry(got)
			if got {
				retries++
				log.WriteString("R")
			} else {
				log.WriteString("r")
			}
			if got != want {
				return fmt.Sprintf("NewRetryBudget(%v): operation %d, TryRetry() = %v; want %v: the budget held %s\n"+
					"operations (d OnFirstAttempt, R TryRetry allowed, r refused): %s\n"+
					"a budget starts with BudgetBurst = %d retries, each first attempt adds the ratio (up to BudgetBurst held), "+
					"each allowed retry takes one whole retry", ratio, i+1, got, want, before, log.String(), budgetBurst)
			}
		}
		if hi := ratio*float64(deposits) + budgetBurst; float64(retries) > hi {
			return fmt.Sprintf("NewRetryBudget(%v) allowed %d retries over %d first attempts; want at most ratio × first attempts + BudgetBurst = %v",
				ratio, retries, deposits, hi)
		}
		// A negative or NaN ratio is a programming error.
		bad := rapid.SampledFrom([]float64{-1e-9, -0.1, -1, math.Inf(-1), math.NaN()}).Draw(rt, "bad ratio")
		if r, _ := suitekit.Catch(func() { s.impl.NewRetryBudget(bad) }); r == nil {
			return fmt.Sprintf("NewRetryBudget(%v) returned; want a panic: a ratio must be zero or more", bad)
		}
		return ""
	})
}

// budgetThroughCalls makes random sequences of calls share one budget of
// a random ratio, each call against its own random script, and compares
// each call's attempts, error and time with the model: a call deposits on
// its first attempt, asks the budget only when a retry is otherwise due
// (never after its last allowed attempt), and when refused fails at once,
// with ErrGaveUp, ErrBudgetExhausted and its last failure.
func (s *suite) budgetThroughCalls(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		ratio := drawRatio(rt)
		b, failure := s.budgetOf(ratio)
		if failure != "" {
			return failure
		}
		m := newBudgetModel(ratio)
		calls := rapid.IntRange(1, 60).Draw(rt, "calls")
		var log strings.Builder
		firsts, retries := 0, 0
		for c := range calls {
			opts := Options{
				MaxTries: rapid.IntRange(1, 6).Draw(rt, "MaxTries"),
				Base:     time.Duration(rapid.Int64Range(1, int64(time.Second)).Draw(rt, "Base")),
				Cap:      time.Duration(rapid.Int64Range(1, int64(10*time.Second)).Draw(rt, "Cap")),
				Budget:   b,
			}
			failures := rapid.IntRange(0, opts.MaxTries).Draw(rt, "failures")
			script := allFail(rt, failures, false, opts.Cap)
			script = append(script, status(http.StatusOK))
			srv := newServer(script...)
			out, failure := s.callWith(context.Background(), srv.client(), newRequest(), opts)
			if failure != "" {
				return failure
			}
			if out.resp != nil {
				out.resp.Body.Close()
			}
			made := srv.count()
			firsts++
			m.onFirstAttempt()
			var waited time.Duration
			refused := false
			want := 0
			for i := 0; ; i++ {
				want = i + 1
				if !mayPass(script[i]) || i+1 >= opts.MaxTries {
					break
				}
				if ok, _ := m.tryRetry(made > i+1); !ok {
					refused = true
					break
				}
				waited += ceilingOf(i, opts.Base, opts.Cap)
			}
			retries += want - 1
			fmt.Fprintf(&log, " call %d: %d attempts of %d allowed (%d failures first)", c+1, made, opts.MaxTries, failures)
			ctxt := fmt.Sprintf("\ncalls so far, sharing NewRetryBudget(%v):%s\nthe model's budget now holds %s", ratio, log.String(), m)
			if made != want {
				why := "the budget allowed every retry it was asked for"
				if refused {
					why = "the budget refused retry " + fmt.Sprint(want) + ": fail at once"
				}
				return fmt.Sprintf("call %d made %d attempts; want %d (%s): a call deposits on its first attempt and asks TryRetry "+
					"only when a retry is otherwise due, never after its last allowed attempt%s", c+1, made, want, why, ctxt)
			}
			if out.took != waited {
				return fmt.Sprintf("call %d took %v; want %v, its backoffs without jitter: a call refused a retry fails at once, without waiting%s",
					c+1, out.took, waited, ctxt)
			}
			last := script[want-1]
			switch {
			case refused:
				if out.resp != nil || !errors.Is(out.err, s.impl.ErrGaveUp) || !errors.Is(out.err, s.impl.ErrBudgetExhausted) {
					return fmt.Sprintf("call %d, refused a retry by the budget, returned (%v, %v); want (nil, an error wrapping ErrGaveUp and ErrBudgetExhausted)%s",
						c+1, respStatus(out.resp), out.err, ctxt)
				}
				if msg := s.wrapsLast(out.err, last, ctxt); msg != "" {
					return msg
				}
			case mayPass(last):
				if out.resp != nil || !errors.Is(out.err, s.impl.ErrGaveUp) || errors.Is(out.err, s.impl.ErrBudgetExhausted) {
					return fmt.Sprintf("call %d used all its MaxTries = %d; CallWithRetries = (%v, %v); want (nil, an error wrapping ErrGaveUp but not ErrBudgetExhausted)%s",
						c+1, opts.MaxTries, respStatus(out.resp), out.err, ctxt)
				}
			default:
				if out.err != nil || out.resp == nil {
					return fmt.Sprintf("call %d got 200 on attempt %d; CallWithRetries = (%v, %v); want the response%s", c+1, want, respStatus(out.resp), out.err, ctxt)
				}
			}
		}
		if hi := ratio*float64(firsts) + budgetBurst; float64(retries) > hi {
			return fmt.Sprintf("%d calls sharing NewRetryBudget(%v) made %d retries; want at most ratio × first attempts + BudgetBurst = %v", firsts, ratio, retries, hi)
		}
		return ""
	})
}

// hammerBudget runs goroutines × rounds of (OnFirstAttempt, TryRetry) on a
// new budget of ratio at once and returns the retries it allowed.
func (s *suite) hammerBudget(t *testing.T, ratio float64, goroutines, rounds int) int64 {
	t.Helper()
	b := s.budget(t, ratio)
	var allowed atomic.Int64
	suitekit.Hammer(t, goroutines, "OnFirstAttempt or TryRetry", func(int) {
		for range rounds {
			b.OnFirstAttempt()
			if b.TryRetry() {
				allowed.Add(1)
			}
		}
	})
	return allowed.Load()
}

// checkHammered fails t unless the retries a hammered budget allowed are
// at most ratio × first attempts + BudgetBurst (lost updates give more),
// and at least what the balance must have paid out.
func checkHammered(t *testing.T, allowed int64, ratio float64, goroutines, rounds int, where string) {
	t.Helper()
	total := goroutines * rounds
	// Each goroutine withdraws right after its deposit, so the balance
	// stays below one retry plus one deposit per goroutine once the
	// initial burst is spent: at most that much is left unpaid.
	lo := int64(ratio*float64(total)) - int64(math.Ceil(ratio*float64(goroutines))) - 2
	hi := int64(ratio*float64(total)) + budgetBurst
	if allowed < lo || allowed > hi {
		t.Fatalf("%s: %d goroutines × %d rounds of (OnFirstAttempt, TryRetry) on NewRetryBudget(%v) allowed %d retries; want %d to %d\n"+
			"the budget must be safe for concurrent use: hold a mutex while you read and change it", where, goroutines, rounds, ratio, allowed, max(lo, 0), hi)
	}
}

// budgetConcurrent hammers a budget from a random number of goroutines
// (under -race, which reports a budget without a lock), then makes a
// random number of calls share one budget against a failing server, some
// at once and some at random instants.
func (s *suite) budgetConcurrent(t *testing.T) {
	r := suitekit.Rand(t)
	ratio := float64(50+r.IntN(200)) / 1000
	goroutines, rounds := 4+r.IntN(37), 500+r.IntN(2000)
	checkHammered(t, s.hammerBudget(t, ratio, goroutines, rounds), ratio, goroutines, rounds, "in a bubble")

	calls, maxTries := 20+r.IntN(60), 3+r.IntN(6)
	b := s.budget(t, ratio)
	srv := newServer(status(503))
	var (
		failures atomic.Value
		wg       sync.WaitGroup
	)
	call := func() {
		out, msg := s.callWith(context.Background(), srv.client(), newRequest(),
			Options{MaxTries: maxTries, Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond, Jitter: true, Budget: b})
		if msg == "" && (out.resp != nil || !errors.Is(out.err, s.impl.ErrGaveUp)) {
			msg = fmt.Sprintf("CallWithRetries = (%v, %v); want (nil, an error wrapping ErrGaveUp)", respStatus(out.resp), out.err)
		}
		if msg != "" {
			failures.CompareAndSwap(nil, msg)
		}
	}
	together := calls / 2
	for range calls - together {
		after := time.Duration(r.Int64N(int64(2 * time.Second)))
		wg.Go(func() {
			time.Sleep(after)
			call()
		})
	}
	suitekit.Hammer(t, together, "CallWithRetries", func(int) { call() })
	wg.Wait()
	if msg := failures.Load(); msg != nil {
		t.Fatal(msg)
	}
	retries := srv.count() - calls
	if hi := int(ratio*float64(calls)) + budgetBurst; retries > hi {
		t.Errorf("%d calls that all failed, %d of them at once and the rest at random instants, sharing NewRetryBudget(%v), made %d retries; want at most %d (%v × %d first attempts + BudgetBurst)",
			calls, together, ratio, retries, hi, ratio, calls)
	}
}

// budgetConcurrentRealClock hammers a budget from many goroutines on the
// real clock, outside any bubble: a budget that is safe only in a bubble
// fails here.
func (s *suite) budgetConcurrentRealClock(t *testing.T) {
	r := suitekit.Rand(t)
	ratio := float64(50+r.IntN(200)) / 1000
	goroutines, rounds := 4+r.IntN(29), 1000+r.IntN(3000)
	checkHammered(t, s.hammerBudget(t, ratio, goroutines, rounds), ratio, goroutines, rounds, "on the real clock")
}
