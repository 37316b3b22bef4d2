package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

var cmdBreaker = &command{
	Name:      "breaker",
	UsageLine: "breaker [--solutions] [--json]",
	Short:     "run the dead-dependency scenario without and with your circuit breaker",
	Long: `Breaker runs task 7's scenario twice: a service answers 100 requests a second,
each calling a dependency that goes dead for 10 s (it accepts and never
answers), with a 10 s timeout. Without a breaker the service piles up about
1,000 stuck requests (Little's Law: 100/s × 10 s); with your breaker
(exercises/breaker; --solutions for the reference) it fails fast instead.
--json prints both scenarios as a results document instead of two lines.`,
	Run: withFlags(breakerFlags, runBreaker),
}

// breakerOptions are breaker's flags.
type breakerOptions struct {
	solutions bool
	json      bool
}

func breakerFlags(fs *flag.FlagSet) *breakerOptions {
	var o breakerOptions
	fs.BoolVar(&o.solutions, "solutions", false, "use the reference breaker instead of your exercises")
	fs.BoolVar(&o.json, "json", false, "print both scenarios as a results document (JSON) instead of text")
	return &o
}

func runBreaker(ctx context.Context, o *breakerOptions, args []string) error {
	if len(args) > 0 {
		return usagef("breaker takes no arguments")
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	started := time.Now()
	bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(o.solutions), "breaker")
	if err != nil {
		return err
	}
	defer cleanup()
	var scs []*results.Scenario
	for _, with := range []bool{false, true} {
		sc := &results.Scenario{}
		if err := grader.RunJSON(ctx, 2*time.Minute, sc, bin, fmt.Sprintf("--breaker=%t", with)); err != nil {
			return err
		}
		scs = append(scs, sc)
		if o.json {
			continue
		}
		fmt.Fprintf(stdout, "%-18s in flight at most %4d  heap at most %3.0f MB  calls to the dead dependency %4d  fast 503s %4d  recovered after %.2fs\n",
			sc.Name, sc.InFlightMax, sc.HeapMaxMB, sc.DependencyCallsDead, sc.Run.Counts[results.OutcomeUnavailable], sc.RecoveredS)
	}
	if o.json {
		return writeMeasured("breaker", implFlag(o.solutions), started, func(doc *results.Document) { doc.Scenarios = scs })
	}
	return nil
}
