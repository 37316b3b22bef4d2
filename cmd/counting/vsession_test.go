//go:build ratelab_vsession

package main

import (
	"os"
	"testing"
	_ "unsafe" // go:linkname

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// This file is compiled only into the grader's virtual-time session for
// task 8 (build tag ratelab_vsession, linked with -checklinkname=0): the
// measurements of the graded limiters that need time, in a bubble. See
// internal/vsession and cmd/fakegpu/vsession_test.go.

// testBinary is the variable behind testing.Testing, set to "0" before the
// graded code runs, so that it cannot tell the session from a real program.
//
//go:linkname testBinary testing.testBinary
var testBinary string

// TestVirtualSession serves the grader that started this binary with
// vsession.EnvServe set: requests on standard input, replies on descriptor 3.
func TestVirtualSession(t *testing.T) {
	if os.Getenv(vsession.EnvServe) == "" {
		t.Skipf("serves a grader's virtual-time session when %s is set", vsession.EnvServe)
	}
	replies := os.NewFile(3, "replies")
	if replies == nil {
		t.Fatal("no descriptor 3 to reply on")
	}
	testBinary = "0"
	if testing.Testing() {
		t.Fatal("testing.Testing() still reports a test binary: the session would be recognisable")
	}
	set := limiters()
	vsession.Serve(t, os.Stdin, replies, vsession.Host{NewServer: fakegpu.New, Counting: &set, CountingTree: tree})
}
