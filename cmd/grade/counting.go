package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

var cmdCounting = &command{
	Name:      "counting",
	UsageLine: "counting [--solutions] [--json]",
	Short:     "measure the four per-client limiters side by side on the boundary burst and the synchronised return",
	Long: `Counting runs task 8's four limiters (exercises/counting; --solutions for
the reference) over the same traffic, on the real clock, and prints what
each admitted, side by side:

  the boundary burst      one fresh client sends limit requests just before
                          a window boundary and limit more just after (100
                          per 2 s): a fixed window admits about 2 × limit,
                          the sliding log exactly limit, the sliding counter
                          a little more, the token bucket its burst plus
                          what it refilled meanwhile;
  the synchronised return 100 clients over their limit of 10 per second,
                          each retrying exactly when told: the fullest bin
                          of window/limit over the mean bin, about 10 for a
                          fixed window (everyone comes back at the top of
                          the window) and about 1 for the others.

It takes about ten seconds after compiling. It measures; it does not grade
(grade task8 does). --json prints the measurements as a results document
instead of the table.`,
	Run: withFlags(countingFlags, runCounting),
}

// countingOptions are counting's flags.
type countingOptions struct {
	solutions bool
	json      bool
}

func countingFlags(fs *flag.FlagSet) *countingOptions {
	var o countingOptions
	fs.BoolVar(&o.solutions, "solutions", false, "use the reference limiters instead of your exercises")
	fs.BoolVar(&o.json, "json", false, "print the measurements as a results document (JSON) instead of a table")
	return &o
}

func runCounting(ctx context.Context, o *countingOptions, args []string) error {
	if len(args) > 0 {
		return usagef("counting takes no arguments")
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	started := time.Now()
	bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(o.solutions), "counting")
	if err != nil {
		return err
	}
	defer cleanup()
	c := &results.Counting{}
	if err := grader.RunJSON(ctx, 2*time.Minute, c, bin, "--measure", "boundary,return"); err != nil {
		return err
	}
	if o.json {
		return writeMeasured("counting", implFlag(o.solutions), started, func(doc *results.Document) { doc.Counting = []*results.Counting{c} })
	}
	printCounting(c)
	return nil
}

// printCounting prints c's boundary burst and synchronised return, a line
// per limiter.
func printCounting(c *results.Counting) {
	fmt.Fprintf(stdout, "%s\n", c.Tree)
	fmt.Fprintf(stdout, "%-16s  %-34s  %s\n", "", "boundary burst: admitted of sent", "synchronised return: peak bin / mean")
	for _, lim := range []string{results.LimiterFixed, results.LimiterLog, results.LimiterCounter, results.LimiterBucket} {
		boundary, ret := "not measured", "not measured"
		for _, b := range c.Boundary {
			if b.Limiter == lim {
				boundary = fmt.Sprintf("%3d + %3d = %3d of %3d in %5.1f ms", b.AdmittedBefore, b.AdmittedAfter, b.Admitted(), b.Sent, b.LastEndMS-b.FirstStartMS)
			}
		}
		for _, r := range c.Return {
			if r.Limiter == lim {
				ret = fmt.Sprintf("%5.2f (%d admitted, %d refused, bins of %.0f ms)", r.PeakOverMean, r.Admitted, r.Refused, r.BinMS)
			}
		}
		fmt.Fprintf(stdout, "%-16s  %-34s  %s\n", lim, boundary, ret)
	}
	if len(c.Boundary) > 0 {
		b := c.Boundary[0]
		fmt.Fprintf(stdout, "boundary: %d requests %.1f ms before a window boundary, %d just after, window %.0f ms\n", b.Limit, -b.FirstStartMS, b.Limit, b.WindowMS)
	}
	if len(c.Return) > 0 {
		r := c.Return[0]
		fmt.Fprintf(stdout, "return: %d clients over their limit of %d per %.0f ms; retries woke %.1f ms late (p99)\n", r.Clients, r.Limit, r.WindowMS, r.LateP99MS)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
}
