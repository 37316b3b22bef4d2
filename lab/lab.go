// Package lab holds the few names that the exercises and the solutions share,
// so that both trees agree on them and the tests can rely on them.
package lab

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// InfDuration is the wait a limiter reports when a request can never
// succeed, such as asking a token bucket for more tokens than its burst. It is
// the largest Duration, as in golang.org/x/time/rate.
const InfDuration = time.Duration(math.MaxInt64)

// ErrNotImplemented is wrapped by every TODO panic, so tests and the grader
// can tell an unsolved stub from a wrong answer.
var ErrNotImplemented = errors.New("not implemented yet")

// TODO is the value a stub panics with until the learner replaces it.
type TODO struct {
	Task int    // the task number, such as 3
	What string // what is missing, such as "TokenBucket.TryTake"
}

// Error says which task and which function are still to be written.
func (t *TODO) Error() string {
	return fmt.Sprintf("task %d: %s is %v", t.Task, t.What, ErrNotImplemented)
}

// Unwrap returns ErrNotImplemented.
func (t *TODO) Unwrap() error { return ErrNotImplemented }

// NotImplemented panics with a *TODO for task and what. Stubs call it at each
// edit site.
func NotImplemented(task int, what string) {
	panic(&TODO{Task: task, What: what})
}
