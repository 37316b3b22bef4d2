package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

var cmdJudge = &command{
	Name:      "judge",
	UsageLine: "judge [N] [--strategy all|naive|sleep1|polite|polite-cached|polite-faults|batch] [--solutions] [--json]",
	Short:     "run N relevance judgments against the fake LLM API with five strategies",
	Long: `Judge runs task 5's scenario: N judgments (2,000 by default), each a prompt of
about 3,000 tokens, against a fresh fake API, with the naive fire-everything
client, the sleep(1) retry loop, your polite client (exercises/llmclient;
--solutions for the reference), your polite client with the shared prefix
cached, and the Message Batches API (the judge's own client: batches of at
most the API's per-batch limit, polled every 0.5 s). For each it prints what
the API counted: completed, 429s, attempts, wall time, the theoretical
minimum (max(N/RPM, tokens/ITPM); for batch, N over the API's batch
throughput) and the cost at the fake's illustrative prices in US dollars,
batched tokens at half price.
--json prints the judge's report as a results document instead.`,
	Run: withFlags(judgeFlags, runJudge),
}

// judgeOptions are judge's flags.
type judgeOptions struct {
	strategy  string
	solutions bool
	json      bool
}

func judgeFlags(fs *flag.FlagSet) *judgeOptions {
	var o judgeOptions
	fs.StringVar(&o.strategy, "strategy", "all", "naive, sleep1, polite, polite-cached, polite-faults, batch or all")
	fs.BoolVar(&o.solutions, "solutions", false, "use the reference client instead of your exercises")
	fs.BoolVar(&o.json, "json", false, "print the report as a results document (JSON) instead of a table")
	return &o
}

func runJudge(ctx context.Context, o *judgeOptions, args []string) error {
	n := 2000
	if len(args) > 1 {
		return usagef("want at most one N, such as 'grade judge 2000'")
	}
	if len(args) == 1 {
		v, err := strconv.Atoi(args[0])
		if err != nil || v < 1 || v > 100000 {
			return usagef("N %q: want a whole number of judgments from 1 to 100000", args[0])
		}
		n = v
	}
	switch o.strategy {
	case "all", "naive", "sleep1", "polite", "polite-cached", "polite-faults", "batch":
	default:
		return usagef("--strategy %q: want all, naive, sleep1, polite, polite-cached, polite-faults or batch", o.strategy)
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	started := time.Now()
	bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(o.solutions), "judge")
	if err != nil {
		return err
	}
	defer cleanup()
	var rep results.JudgeReport
	if err := grader.RunJSON(ctx, 15*time.Minute, &rep, bin, "--in-process", "--strategy", o.strategy, "--n", fmt.Sprint(n)); err != nil {
		return err
	}
	if o.json {
		return writeMeasured("judge", implFlag(o.solutions), started, func(doc *results.Document) { doc.Judge = &rep })
	}
	fmt.Fprintf(stdout, "%-14s %10s %8s %9s %9s %9s %7s %9s\n", "strategy", "completed", "429s", "attempts", "wall", "minimum", "ratio", "cost")
	for _, s := range rep.Strategies {
		fmt.Fprintf(stdout, "%-14s %5d/%-4d %8d %9d %8.1fs %8.1fs %6.2f× %9s%s\n",
			s.Name, s.Completed, s.N, s.Rejected429, s.Attempts, s.WallSeconds, s.MinSeconds, s.Ratio, fmt.Sprintf("$%.2f", s.CostUSD), errSuffix(s.Error))
	}
	return nil
}

// errSuffix is "  (e)", or "" for no error.
func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "  (" + e + ")"
}
