//go:build ratelab_vsession

package main

import (
	"os"
	"testing"
	_ "unsafe" // go:linkname

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/vsession"
)

// This file is compiled only into the grader's virtual-time session for
// task 4 (build tag ratelab_vsession, linked with -checklinkname=0): the
// storms and the amplifier with the graded retry loop, against a fake GPU
// server in the same bubble. See internal/vsession and
// cmd/fakegpu/vsession_test.go.

// testBinary is the variable behind testing.Testing, set to "0" before the
// graded code runs, so that it cannot tell the session from a real storm.
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
	vsession.Serve(t, os.Stdin, replies, vsession.Host{NewServer: stormServer, NewCall: stormCall})
}

// stormServer is the fake GPU the storms and the amplifier call: shedding
// or unprotected, as the grader's wall-clock servers.
func stormServer(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode != fakegpu.ModeNone {
		opts = append(opts, fakegpu.WithAdmission(admission))
	}
	return fakegpu.New(cfg, opts...)
}

// stormCall is newCall for a session's settings.
func stormCall(r vsession.Retry) harness.CallFunc {
	return newCall(callOptions{tries: r.Tries, base: r.Base, cap: r.Cap, jitter: r.Jitter, honor: r.HonorRetryAfter, budget: r.Budget})
}
