// Command storm runs a crowd of retrying clients against a fake GPU server
// on loopback, with task 4's retry loop compiled in from a chosen tree, and
// prints what happened as one JSON object (results.Storm). The grader builds
// it with build tags and runs it as a child process, so a learner's panic or
// endless loop cannot take the grader down.
//
// The build tag ratelab_ex_retry takes the retry loop from exercises/retry
// instead of solutions/retry.
//
// Kinds:
//
//	storm    --clients N clients, each with its own connection, fire at once
//	amplify  calls arrive at --rate per second for --seconds, open loop
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

	"ratelab/harness"
	"ratelab/internal/trees/retry"
	"ratelab/results"
	"ratelab/scenario"
)

func main() {
	kind := flag.String("kind", "storm", "storm or amplify")
	base := flag.String("url", "", "the server's base URL, such as http://127.0.0.1:8000 (loopback only)")
	name := flag.String("name", "", "a name for the results")
	clients := flag.Int("clients", 400, "storm: clients that fire at once")
	rate := flag.Float64("rate", 100, "amplify: calls per second")
	seconds := flag.Float64("seconds", 10, "amplify: how long calls arrive")
	timeout := flag.Duration("timeout", 0, "each attempt's client timeout (default: 30s for a storm, 1s for amplify)")
	limit := flag.Duration("limit", 0, "the longest the whole run may take (default: 120s for a storm, seconds+30s for amplify)")
	var o retry.Options
	flag.IntVar(&o.Tries, "tries", 12, "attempts per call, the first included")
	flag.DurationVar(&o.Base, "base", 100*time.Millisecond, "backoff base")
	flag.DurationVar(&o.Cap, "cap", 5*time.Second, "backoff cap")
	flag.BoolVar(&o.Jitter, "jitter", true, "full jitter on backoff delays")
	flag.BoolVar(&o.HonorRetryAfter, "honor-retry-after", false, "wait at least what Retry-After says")
	flag.Float64Var(&o.Budget, "budget", 0, "retry budget: retries per first attempt (0: none)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var st *results.Storm
	var err error
	switch *kind {
	case "storm":
		st, err = scenario.Storm(ctx, scenario.StormOptions{
			Name: *name, BaseURL: *base, Clients: *clients, Call: retry.NewCall(o), Timeout: *timeout, Limit: *limit,
		})
	case "amplify":
		st, err = scenario.Amplify(ctx, scenario.AmplifyOptions{
			Name: *name, BaseURL: *base, Rate: *rate, Duration: time.Duration(*seconds * float64(time.Second)),
			Timeout: *timeout, Limit: *limit, Call: retry.NewCall(o), Stats: harness.HTTPStats(*base),
		})
	default:
		err = fmt.Errorf("unknown kind %q (want storm or amplify)", *kind)
	}
	if st != nil {
		st.Jitter, st.HonorRetryAfter, st.Budget, st.MaxTries = o.Jitter, o.HonorRetryAfter, o.Budget, o.Tries
		st.BaseMS, st.CapMS = float64(o.Base)/float64(time.Millisecond), float64(o.Cap)/float64(time.Millisecond)
		st.Name = *name
		if jerr := json.NewEncoder(os.Stdout).Encode(st); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "storm: %v\n", err)
		os.Exit(1)
	}
}
