//go:build ratelab_vsession

package main

import (
	"errors"
	"os"
	"testing"
	_ "unsafe" // go:linkname

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// This file is compiled only into the grader's virtual-time session (build
// tag ratelab_vsession, linked with -checklinkname=0): see
// internal/vsession.

// testBinary is the variable behind testing.Testing. The session is a test
// binary only because a synctest bubble needs a *testing.T; to the graded
// code it must look like the server it is, so TestVirtualSession sets it to
// "0" before any of that code runs. Code that behaves well only while it is
// tested then misbehaves here as it would in production, and the floods
// see it.
//
//go:linkname testBinary testing.testBinary
var testBinary string

// TestVirtualSession serves a virtual-time session to the grader that built
// this test binary with the graded code's build tags and started it with
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
	vsession.Serve(t, os.Stdin, replies, vsession.Host{NewServer: virtualServer})
}

// virtualServer is newServer for a session: the same admission and limiter,
// without Redis (a shared store is not simulated yet).
func virtualServer(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode == fakegpu.ModeRedis {
		return nil, errors.New("mode redis runs on the wall clock only")
	}
	srv, _, _, err := newServer(cfg, opts...)
	return srv, err
}
