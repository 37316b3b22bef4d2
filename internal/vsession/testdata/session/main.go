// Command session is a session build as the grader makes them, with a
// fake GPU server whose constructor refuses to start if the program shows
// any sign of running under go test. TestRunHidesTheTest builds and drives
// it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// atInit is what package initialisation saw, before Run.
var atInit = signs()

func init() {
	vsession.Run(vsession.Host{NewServer: newServer})
}

func main() { fmt.Println("not a session") }

// newServer starts a server only if no sign of a test is visible.
func newServer(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if s := atInit + signs(); s != "" {
		return nil, fmt.Errorf("looks like a test:%s", s)
	}
	return fakegpu.New(cfg, opts...)
}

// signs lists what gives a test binary away.
func signs() string {
	var s string
	if testing.Testing() {
		s += " testing.Testing()"
	}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.") {
			s += " " + a
		}
	}
	if flag.Lookup("test.v") != nil {
		s += " flag test.v"
	}
	if os.Getenv(vsession.EnvServe) != "" && flag.Parsed() {
		s += " " + vsession.EnvServe
	}
	return s
}
