// Command breaker runs task 7's dead-dependency scenario with the circuit
// breaker compiled in from a chosen tree, and prints the results as one
// JSON object (results.Scenario). The grader runs it as a child process, so
// a learner's panic or deadlock cannot take the grader down.
//
// The build tag ratelab_ex_breaker takes the breaker from exercises/breaker
// instead of solutions/breaker.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"ratelab/internal/trees/breaker"
	"ratelab/scenario"
)

func main() {
	withBreaker := flag.Bool("breaker", true, "guard the dependency with the circuit breaker")
	rate := flag.Float64("rate", 100, "requests per second to the service")
	seconds := flag.Float64("seconds", 25, "how long requests arrive")
	deadAt := flag.Duration("dead-at", 5*time.Second, "when the dependency goes dead")
	deadFor := flag.Duration("dead-for", 10*time.Second, "how long it stays dead")
	callTimeout := flag.Duration("call-timeout", 10*time.Second, "the service's timeout to the dependency")
	slow := flag.Duration("slow-call", 100*time.Millisecond, "a call slower than this is reported to the breaker as failed")
	window := flag.Int("window", 20, "breaker: the last N calls considered")
	ratio := flag.Float64("failure-ratio", 0.5, "breaker: open when more than this share of the window failed")
	minCalls := flag.Int("min-calls", 10, "breaker: no verdict on fewer calls")
	cooldown := flag.Duration("cooldown", 2*time.Second, "breaker: how long to stay open")
	halfOpen := flag.Int("half-open-max", 1, "breaker: trial calls at once while half-open")
	clientTimeout := flag.Duration("client-timeout", 0, "the service's clients' timeout (default: call-timeout + 5s)")
	work := flag.Duration("dependency-work", 5*time.Millisecond, "a healthy dependency's answer time")
	flag.Parse()

	if *clientTimeout <= 0 {
		*clientTimeout = *callTimeout + 5*time.Second
	}
	o := scenario.Dependency{
		Name: "without a breaker", Rate: *rate, Duration: time.Duration(*seconds * float64(time.Second)),
		ClientTimeout: *clientTimeout, CallTimeout: *callTimeout, DependencyWork: *work,
		DeadAt: *deadAt, DeadFor: *deadFor, SlowCall: *slow,
	}
	if *withBreaker {
		o.Name = "with a breaker"
		o.Breaker = breaker.New(breaker.Settings{Window: *window, FailureRatio: *ratio, MinCalls: *minCalls, Cooldown: *cooldown, HalfOpenMax: *halfOpen})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sc, err := scenario.RunDependency(ctx, o)
	if sc != nil {
		if jerr := json.NewEncoder(os.Stdout).Encode(sc); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "breaker: %v\n", err)
		os.Exit(1)
	}
}
