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

func init() {
	commands = append(commands, &command{
		Name:      "storm",
		UsageLine: "storm [N] [--no-jitter] [--honor-retry-after] [--solutions]",
		Short:     "run a retry storm: N clients at once against the shedding server",
		Long: `Storm starts the shedding server (8 slots, line 16), then N clients (400 by
default), each with its own connection, call it at the same instant and retry
with your task 4 retry loop (exercises/retry; --solutions for the reference):
base 100 ms, cap 5 s, 12 tries. It prints the attempts, when the last client
was done against the ideal N × 100 ms / 8, and the sends per 250 ms.

With --honor-retry-after the clients honour Retry-After and the server spreads
it over a calendar at its capacity (see docs/STORM.md).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			noJitter := fs.Bool("no-jitter", false, "retry after exactly the backoff, without jitter")
			fs.Bool("jitter", true, "full jitter (the default; --no-jitter turns it off)")
			honor := fs.Bool("honor-retry-after", false, "honour Retry-After, against a server that spreads it")
			solutions := fs.Bool("solutions", false, "use the reference retry loop instead of your exercises")
			return func(ctx context.Context, args []string) error {
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
				impl := implFlag(*solutions)
				bin, cleanup, err := grader.BuildTool(ctx, root, impl, "storm")
				if err != nil {
					return err
				}
				defer cleanup()
				serverArgs := []string{"--mode", "shed", "--port", "0"}
				if *honor {
					serverArgs = append(serverArgs, "--spread-retry-after")
				}
				srv, err := grader.StartServer(ctx, root, grader.Solutions, serverArgs...)
				if err != nil {
					return err
				}
				defer srv.Stop()
				fmt.Fprintf(stderr, "%d clients at once against %s (shedding), retry loop from %s/ ...\n", n, srv.URL, impl)
				var st results.Storm
				err = grader.RunJSON(ctx, 3*time.Minute, &st, bin, "--url", srv.URL, "--kind", "storm", "--clients", fmt.Sprint(n),
					fmt.Sprintf("--jitter=%t", !*noJitter), fmt.Sprintf("--honor-retry-after=%t", *honor))
				if err != nil {
					return err
				}
				ideal := float64(n) * 0.1 / 8
				fmt.Fprintf(stdout, "attempts %d  last done %.1fs  ideal %.1fs  succeeded %d of %d  empty bins %.0f%%\n",
					st.Attempts, st.LastDoneS, ideal, st.Succeeded, n, 100*st.EmptyShare)
				fmt.Fprintf(stdout, "sends per 250ms: %s\n", joinInts(st.SendsPerBin, 60))
				return nil
			}
		},
	})
	commands = append(commands, &command{
		Name:      "amplify",
		UsageLine: "amplify [--budget] [--solutions]",
		Short:     "show how retries amplify load on an overloaded server",
		Long: `Amplify sends 100 calls per second for 10 s to the unprotected server (80/s
capacity), each call retried by your task 4 retry loop. By default retries
go out at once, up to 3 of them; with --budget they back off with full jitter
and a 10% retry budget. It prints the attempts per second the server itself
counted.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			budget := fs.Bool("budget", false, "back off with full jitter and a 10% retry budget")
			solutions := fs.Bool("solutions", false, "use the reference retry loop instead of your exercises")
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("amplify takes no arguments")
				}
				root, err := grader.FindRoot(".")
				if err != nil {
					return usageError{err.Error()}
				}
				bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(*solutions), "storm")
				if err != nil {
					return err
				}
				defer cleanup()
				srv, err := grader.StartServer(ctx, root, grader.Solutions, "--mode", "none", "--port", "0")
				if err != nil {
					return err
				}
				defer srv.Stop()
				retry := []string{"--tries", "4", "--base", "1ns", "--cap", "1ns", "--jitter=false"}
				if *budget {
					retry = []string{"--tries", "4", "--base", "100ms", "--cap", "5s", "--jitter=true", "--budget", "0.1"}
				}
				var st results.Storm
				err = grader.RunJSON(ctx, 2*time.Minute, &st, bin, append([]string{"--url", srv.URL, "--kind", "amplify", "--rate", "100", "--seconds", "10", "--limit", "40s"}, retry...)...)
				if err != nil {
					return err
				}
				var perSecond []string
				for t := 1; t <= 12; t++ {
					r, _ := st.ReceivedRate(float64(t-1), float64(t))
					perSecond = append(perSecond, fmt.Sprintf("%.0f", r))
				}
				fmt.Fprintf(stdout, "calls %d  attempts %d  succeeded %d  gave up %d\nattempts the server received per second: %s\n",
					st.Clients, st.Attempts, st.Succeeded, st.Failed, strings.Join(perSecond, " "))
				return nil
			}
		},
	})
	commands = append(commands, &command{
		Name:      "breaker",
		UsageLine: "breaker [--solutions]",
		Short:     "run the dead-dependency scenario without and with your circuit breaker",
		Long: `Breaker runs task 7's scenario twice: a service answers 100 requests a second,
each calling a dependency that goes dead for 10 s (it accepts and never
answers), with a 10 s timeout. Without a breaker the service piles up about
1,000 stuck requests (Little's Law: 100/s × 10 s); with your breaker
(exercises/breaker; --solutions for the reference) it fails fast instead.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			solutions := fs.Bool("solutions", false, "use the reference breaker instead of your exercises")
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("breaker takes no arguments")
				}
				root, err := grader.FindRoot(".")
				if err != nil {
					return usageError{err.Error()}
				}
				bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(*solutions), "breaker")
				if err != nil {
					return err
				}
				defer cleanup()
				for _, with := range []bool{false, true} {
					var sc results.Scenario
					if err := grader.RunJSON(ctx, 2*time.Minute, &sc, bin, fmt.Sprintf("--breaker=%t", with)); err != nil {
						return err
					}
					fmt.Fprintf(stdout, "%-18s in flight at most %4d  heap at most %3.0f MB  calls to the dead dependency %4d  fast 503s %4d  recovered after %.2fs\n",
						sc.Name, sc.InFlightMax, sc.HeapMaxMB, sc.DependencyCallsDead, sc.Run.Counts[results.OutcomeUnavailable], sc.RecoveredS)
				}
				return nil
			}
		},
	})
}

func implFlag(solutions bool) grader.Impl {
	if solutions {
		return grader.Solutions
	}
	return grader.Exercises
}

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
