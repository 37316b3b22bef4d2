// Package suitekit holds what every frozen test suite needs to call code
// that may not work yet: a panic becomes a failed subtest with a report,
// never a crashed test binary, and a stub that is not written yet is named
// by its TODO message alone, without a stack.
package suitekit

import (
	"errors"
	"fmt"
	"runtime/debug"

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
