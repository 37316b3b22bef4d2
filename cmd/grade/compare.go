package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"ratelab/compare"
	"ratelab/reports"
)

var cmdCompare = &command{
	Name:      "compare",
	UsageLine: "compare A B [--json] [--html FILE] [--changed] [--alpha P]",
	Short:     "compare two runs, or two folders of repeated runs, figure by figure",
	Long: `Compare puts two gradings of one task side by side: the before and after
of a change to your code, or to the lab. A and B are each a results.json (or
the folder a grade run wrote it into), or a folder of repeated runs: every
results.json below it, all of one task, such as the --out folders of four
'grade task2' runs. A 'grade task2 --repeat 4' document counts as its four
runs.

It prints the score, every check whose verdict changed, then every figure
the two hold with its delta (B minus A): the checks' measurements, and
each flood's, storm's, scenario's and play's numbers (successes, goodput,
latency percentiles, outcome counts, the server's own counters, ...).
A side's value is the median of its runs.

Virtual time (the default grading) gives the same figures on every run,
so a delta there is the whole difference, and no test is made. On the
wall clock (--real, and idle CPU and memory always), where both sides
hold repeats, each figure gets a Mann-Whitney U test as benchstat does
(golang.org/x/perf's benchmath): the delta is the change of the medians
with its p-value, or "~" when the difference is not significant at
--alpha (0.05). Four runs a side are the fewest that can show a
difference at 0.05.

An interrupted run (SIGINT, SIGTERM) is shown as interrupted, with no
score, never as a failure; what it finished is compared as it is.

--json prints the comparison as JSON (the compare.Comparison type: sides,
checks, and figures with both samples, the delta, the change and the
test), --html FILE also writes a page with the two sides' floods drawn on
the same charts (echarts.min.js is written beside it), and --changed
lists only what differs.

Exit status 0 when compared, 2 when an input cannot be read, is not a
results document, or the two grade different tasks.`,
	Run: withFlags(compareFlags, runCompare),
}

// compareOptions are compare's flags.
type compareOptions struct {
	json    bool
	html    string
	changed bool
	alpha   float64
}

func compareFlags(fs *flag.FlagSet) *compareOptions {
	var o compareOptions
	fs.BoolVar(&o.json, "json", false, "print the comparison as JSON instead of text")
	fs.StringVar(&o.html, "html", "", "also write an HTML page to this file, the two sides' floods overlaid (its charting library beside it)")
	fs.BoolVar(&o.changed, "changed", false, "list only the checks and figures that differ")
	fs.Float64Var(&o.alpha, "alpha", compare.DefaultAlpha, "significance level of the Mann-Whitney U tests, as benchstat's -alpha")
	return &o
}

func runCompare(_ context.Context, o *compareOptions, args []string) error {
	if len(args) != 2 {
		return usagef("want two runs to compare, A and B, each a results.json or a folder of them, such as 'grade compare before/ after/'")
	}
	if !(o.alpha > 0 && o.alpha < 1) {
		return usagef("--alpha %g: want a significance level between 0 and 1, such as 0.05", o.alpha)
	}
	a, err := compare.Load(args[0])
	if err != nil {
		return usageError{err.Error()}
	}
	b, err := compare.Load(args[1])
	if err != nil {
		return usageError{err.Error()}
	}
	c, err := compare.Compare(a, b, compare.Options{Alpha: o.alpha})
	if err != nil {
		return usageError{err.Error()}
	}
	if o.html != "" {
		if err := reports.WriteComparison(o.html, c, a.Docs, b.Docs); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(c); err != nil {
			return err
		}
	} else if err := compare.Text(stdout, c, compare.TextOptions{Changed: o.changed}); err != nil {
		return err
	}
	if o.html != "" {
		fmt.Fprintf(stderr, "page: %s\n", o.html)
	}
	return nil
}
