// Package suitekit holds what the frozen test suites share: calling code
// that may not work yet (a panic becomes a failed subtest with a report,
// never a crashed test binary, and a stub that is not written yet is named
// by its TODO message alone, without a stack), calling it from many
// goroutines at once, running named checks in synctest bubbles that start
// at a random instant, the run's seed for every random input (Seed,
// Rand, Property), and one generator per kind of input that draws from the
// whole domain a contract allows: keys of any bytes with near neighbours
// (KeySet, RandomKeys), HTTP dates in all three forms (FormatHTTPDate),
// rates and sizes from 0 to math.MaxFloat64 (ExtremeAmount,
// ExtremeRateAndSize) and clocks that step back (ClockStep, ClockSteps).
package suitekit

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"ratelab/lab"
)

// Catch runs f and returns what it panicked with, if anything, and the
// stack where it did.
func Catch(f func()) (panicked any, stack []byte) {
	defer func() {
		if r := recover(); r != nil {
			panicked, stack = r, debug.Stack()
		}
	}()
	f()
	return nil, nil
}

// PanicReport describes a panic r of call: just the TODO message for a stub
// that is not written yet (lab.ErrNotImplemented), the value and the stack
// otherwise.
func PanicReport(call string, r any, stack []byte) string {
	if err, ok := r.(error); ok && errors.Is(err, lab.ErrNotImplemented) {
		return err.Error()
	}
	return fmt.Sprintf("%s panicked: %v\n%s", call, r, stack)
}

// Report runs f, named call in the report, and returns PanicReport of its
// panic, or "" if it returned.
func Report(call string, f func()) string {
	if r, stack := Catch(f); r != nil {
		return PanicReport(call, r, stack)
	}
	return ""
}

// A Failure is a message that a goroutine under Hammer panics with to fail
// the subtest with that message alone, without a stack.
type Failure string

// Hammer runs f(0) … f(n−1) in n goroutines released together, so that
// they call the code under test at the same time, and waits for them all.
// If any panicked it fails t with the first report: a Failure as it is, any
// other value as PanicReport describes it, naming the call "what in
// goroutine g" (what is such as "TryTake").
func Hammer(t testing.TB, n int, what string, f func(g int)) {
	t.Helper()
	if msg := hammer(n, what, f); msg != "" {
		t.Fatal(msg)
	}
}

// hammer is Hammer without t: it returns the first report, or "".
func hammer(n int, what string, f func(g int)) string {
	var (
		wg    sync.WaitGroup
		first atomic.Pointer[string]
		start = make(chan struct{})
	)
	for g := range n {
		wg.Go(func() {
			<-start
			if r, stack := Catch(func() { f(g) }); r != nil {
				msg, ok := r.(Failure)
				if !ok {
					msg = Failure(PanicReport(fmt.Sprintf("%s in goroutine %d", what, g), r, stack))
				}
				first.CompareAndSwap(nil, (*string)(&msg))
			}
		})
	}
	close(start)
	wg.Wait()
	if msg := first.Load(); msg != nil {
		return *msg
	}
	return ""
}

// Check is one subtest: its fixed name, which the grader's tasks.go maps
// to points, and its body.
type Check struct {
	Name string
	F    func(*testing.T)
}

// Group runs checks as subtests of a subtest called name, each in its own
// testing/synctest bubble, so that time is fake and a sleep costs nothing.
func Group(t *testing.T, name string, checks []Check) {
	t.Run(name, func(t *testing.T) {
		for _, c := range checks {
			t.Run(c.Name, func(t *testing.T) { Bubble(t, c.F) })
		}
	})
}

// Bubble runs f in a testing/synctest bubble whose fake clock has first
// moved on by a random stretch of up to 40 years (from the run's Seed), so
// the code under test cannot tell a test by the date. A bubble ends only when every
// goroutine started in it has ended; synctest panics, taking the whole test
// binary down, when some are left blocked. Bubble turns that into a
// failure of this test alone, explained in the terms of the code under
// test, so the other checks still run.
func Bubble(t *testing.T, f func(*testing.T)) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if s := fmt.Sprint(r); strings.Contains(s, "blocked goroutines remain") {
				t.Fatalf("a goroutine or ticker the code started was still running when this check ended (%s): "+
					"every goroutine must end with the test's fake-time bubble, so work out what changed since "+
					"the last call when a call arrives (lazy refill) instead of updating state in the background", s)
			}
			panic(r)
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(startOffset(t)) // the clock no longer reads 2000-01-01
		f(t)
	})
}
