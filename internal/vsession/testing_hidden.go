//go:build ratelab_vsession

package vsession

import (
	"testing"
	_ "unsafe" // go:linkname
)

// testBinary is the variable behind testing.Testing. A session is a test
// binary only because a synctest bubble needs a *testing.T; to the graded
// code it must look like the program it stands for, so Main sets it to
// "0" before any of that code runs. Code that behaves well only while it
// is tested then misbehaves here as it would in production, and the
// floods see it. The linker allows this reference only with
// -checklinkname=0, which the grader passes to this build alone (build tag
// ratelab_vsession).
//
//go:linkname testBinary testing.testBinary
var testBinary string

// hideTesting makes testing.Testing() report false.
func hideTesting() bool {
	testBinary = "0"
	return !testing.Testing()
}
