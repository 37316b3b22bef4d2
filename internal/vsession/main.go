package vsession

import (
	"errors"
	"flag"
	"io"
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"
)

// Run makes the running program a virtual-time session when the grader
// started it as one (EnvServe set), and returns at once otherwise. Each
// command's session build (build tag ratelab_vsession) calls it from an
// init function, so the session binary is the command itself, built by go
// build with the graded code: testing.Testing() reports false, os.Args
// holds the program's name alone, and flag.CommandLine holds none of the
// testing package's flags. The graded code cannot tell the session from
// the program it stands for by any of the usual signs of a test; it runs
// in production's conditions and the floods judge that.
//
// A session reads requests on standard input and writes replies on
// descriptor 3, in one test (a synctest bubble needs a *testing.T) that
// the testing package runs through testing.MainStart, and ends the
// process with that test's exit status.
func Run(host Host) {
	if os.Getenv(EnvServe) == "" {
		return
	}
	os.Unsetenv(EnvServe)
	os.Exit(run(host))
}

// run serves one session and returns the exit status.
func run(host Host) int {
	replies := os.NewFile(3, "replies")
	if replies == nil {
		os.Stderr.WriteString("vsession: no descriptor 3 to reply on\n")
		return 2
	}
	tests := []testing.InternalTest{{
		Name: "VirtualSession",
		F:    func(t *testing.T) { Serve(t, os.Stdin, replies, host) },
	}}
	m := testing.MainStart(testDeps{}, tests, nil, nil, nil)
	// MainStart registered the test.* flags on flag.CommandLine, and their
	// defaults suit a session (one run, no timeout, quiet). A fresh
	// command line, which m.Run parses (it holds no arguments), keeps them
	// out of the graded code's sight.
	flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	return m.Run()
}

// testDeps is what testing.MainStart needs of the program that runs the
// tests: go test's generated main passes testing/internal/testdeps, which
// nothing outside the standard library may import. A session runs one
// test, without profiles, fuzzing or coverage.
//
// testing.MainStart is not covered by Go's compatibility promise: the
// vsession tests build a session the grader's way, so a Go release that
// changes it fails them rather than a learner's grading.
type testDeps struct{}

// corpusEntry is testing's fuzzing input type (an alias of an unnamed
// struct there, so this one is the same type).
type corpusEntry = struct {
	Parent     string
	Path       string
	Data       []byte
	Values     []any
	Generation int
	IsSeed     bool
}

// MatchString matches test names for -test.run.
func (testDeps) MatchString(pat, str string) (bool, error) { return regexp.MatchString(pat, str) }

// ImportPath is the tested package's path (none).
func (testDeps) ImportPath() string { return "" }

// ModulePath is the tested module's path (none).
func (testDeps) ModulePath() string { return "" }

// SetPanicOnExit0 is a no-op: nothing in a session calls os.Exit(0).
func (testDeps) SetPanicOnExit0(bool) {}

// StartCPUProfile is not supported.
func (testDeps) StartCPUProfile(io.Writer) error { return errUnsupported }

// StopCPUProfile is a no-op.
func (testDeps) StopCPUProfile() {}

// StartTestLog is a no-op.
func (testDeps) StartTestLog(io.Writer) {}

// StopTestLog is a no-op.
func (testDeps) StopTestLog() error { return nil }

// WriteProfileTo is not supported.
func (testDeps) WriteProfileTo(string, io.Writer, int) error { return errUnsupported }

// CoordinateFuzzing is not supported.
func (testDeps) CoordinateFuzzing(time.Duration, int64, time.Duration, int64, int, []corpusEntry, []reflect.Type, string, string) error {
	return errUnsupported
}

// RunFuzzWorker is not supported.
func (testDeps) RunFuzzWorker(func(corpusEntry) error) error { return errUnsupported }

// ReadCorpus reads no corpus.
func (testDeps) ReadCorpus(string, []reflect.Type) ([]corpusEntry, error) { return nil, nil }

// CheckCorpus accepts any corpus.
func (testDeps) CheckCorpus([]any, []reflect.Type) error { return nil }

// ResetCoverage is a no-op.
func (testDeps) ResetCoverage() {}

// SnapshotCoverage is a no-op.
func (testDeps) SnapshotCoverage() {}

// InitRuntimeCoverage reports no coverage.
func (testDeps) InitRuntimeCoverage() (string, func(string, string) (string, error), func() float64) {
	return "", nil, nil
}

// errUnsupported is what a session answers for a testing feature it does
// not carry.
var errUnsupported = errors.New("not supported in a virtual-time session")
