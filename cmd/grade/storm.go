package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

var cmdStorm = &command{
	Name:      "storm",
	UsageLine: "storm [N] [--no-jitter] [--honor-retry-after] [--solutions] [--url http://127.0.0.1:8000] [--json]",
	Short:     "run a retry storm: N clients at once against the shedding server",
	Long: `Storm starts the shedding server (8 slots, line 16), then N clients (400 by
default), each with its own connection, call it at the same instant and retry
with your task 4 retry loop (exercises/retry; --solutions for the reference):
base 100 ms, cap 5 s, 12 tries. It prints the attempts, when the last client
was done against the ideal N × 100 ms / 8, and the sends per 250 ms.

With --honor-retry-after the clients honour Retry-After and the server spreads
it over a calendar at its capacity (see docs/STORM.md). --json prints the
storm as a results document instead.

--url storms a ratelab server already running on loopback instead of a
fresh one, such as your own shedding code under 'grade serve --mode shed'
(with --spread-retry-after for --honor-retry-after to mean anything).`,
	Run: withFlags(stormFlags, runStorm),
}

// stormOptions are storm's flags.
type stormOptions struct {
	noJitter        bool
	honorRetryAfter bool
	solutions       bool
	url             string
	json            bool
}

func stormFlags(fs *flag.FlagSet) *stormOptions {
	var o stormOptions
	fs.BoolVar(&o.noJitter, "no-jitter", false, "retry after exactly the backoff, without jitter")
	fs.Bool("jitter", true, "full jitter (the default; --no-jitter turns it off)")
	fs.BoolVar(&o.honorRetryAfter, "honor-retry-after", false, "honour Retry-After, against a server that spreads it")
	fs.BoolVar(&o.solutions, "solutions", false, "use the reference retry loop instead of your exercises")
	fs.StringVar(&o.url, "url", "", "storm a ratelab server already running on loopback, such as http://127.0.0.1:8000, instead of a fresh one")
	fs.BoolVar(&o.json, "json", false, "print the storm as a results document (JSON) instead of text")
	return &o
}

func runStorm(ctx context.Context, o *stormOptions, args []string) error {
	n := 400
	if len(args) > 1 {
		return usagef("want at most one N, such as 'grade storm 400'")
	}
	if len(args) == 1 {
		v, err := strconv.Atoi(args[0])
		if err != nil || v < 1 || v > 5000 {
			return usagef("N %q: want a whole number of clients from 1 to 5000", args[0])
		}
		n = v
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	url, what := o.url, "a server already running"
	if url != "" { // before building, to fail at once
		if url, err = ratelabServer(ctx, url); err != nil {
			return err
		}
	}
	started := time.Now()
	impl := implFlag(o.solutions)
	bin, cleanup, err := grader.BuildTool(ctx, root, impl, "storm")
	if err != nil {
		return err
	}
	defer cleanup()
	if url == "" {
		serverArgs := []string{"--mode", "shed", "--port", "0"}
		if o.honorRetryAfter {
			serverArgs = append(serverArgs, "--spread-retry-after")
		}
		srv, err := grader.StartServer(ctx, root, grader.Solutions, serverArgs...)
		if err != nil {
			return err
		}
		defer srv.Stop()
		url, what = srv.URL, "shedding"
	}
	fmt.Fprintf(stderr, "%d clients at once against %s (%s), retry loop from %s/ ...\n", n, url, what, impl)
	var st results.Storm
	err = grader.RunJSON(ctx, 3*time.Minute, &st, bin, "--url", url, "--kind", "storm", "--clients", fmt.Sprint(n),
		fmt.Sprintf("--jitter=%t", !o.noJitter), fmt.Sprintf("--honor-retry-after=%t", o.honorRetryAfter))
	if err != nil {
		return err
	}
	if o.json {
		return writeMeasured("storm", impl, started, func(doc *results.Document) { doc.Storms = []*results.Storm{&st} })
	}
	ideal := float64(n) * 0.1 / 8
	fmt.Fprintf(stdout, "attempts %d  last done %.1fs  ideal %.1fs  succeeded %d of %d  empty bins %.0f%%\n",
		st.Attempts, st.LastDoneS, ideal, st.Succeeded, n, 100*st.EmptyShare)
	fmt.Fprintf(stdout, "sends per 250ms: %s\n", joinInts(st.SendsPerBin, 60))
	return nil
}

// implFlag is the tree a --solutions flag chooses.
func implFlag(solutions bool) grader.Impl {
	if solutions {
		return grader.Solutions
	}
	return grader.Exercises
}

// joinInts formats v as [a b c], with at most max numbers and "..." after.
func joinInts(v []int64, max int) string {
	var parts []string
	for i, x := range v {
		if i == max {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprint(x))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
