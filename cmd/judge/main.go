// Command judge replays the lesson's Problem against the fake Messages API:
// N relevance judgments, each a prompt of about 3000 tokens that share a
// long prefix, sent by one or more strategies (scenario.Judge, which
// describes them: naive, sleep1, polite, polite-cached, batch, or all five). It
// prints one JSON document (results.JudgeReport) on stdout. Every count a
// check should rely on comes from the API's own /stats, per strategy: each
// strategy uses its own API key, so its limits and counts are its own.
//
// The polite strategies take PoliteClient from solutions/llmclient, or from
// exercises/llmclient when built with the tag ratelab_ex_llmclient. The
// grader builds it with build tags and runs it as a child process, so a
// learner's panic or endless loop cannot take the grader down.
//
// Besides the API's counts, the report holds when each strategy's calls
// returned, on the judge's own clock from the strategy's first request, in
// bins of 250 ms (results.JudgeTimeline): the report draws the judgments
// done over time from it.
//
// With --in-process, judge starts the fake API itself on 127.0.0.1:0 with
// the limits of the provider flags; with --url it uses a running one (on
// loopback only) and reads its limits from /stats.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"ratelab/internal/trees/llmclient"
	"ratelab/provider"
	"ratelab/results"
	"ratelab/scenario"
)

func main() {
	url := flag.String("url", "", "base URL of a running fake API, such as http://127.0.0.1:8080 (loopback only)")
	inProcess := flag.Bool("in-process", false, "start a fake API in this process, on 127.0.0.1:0")
	strategy := flag.String("strategy", "all", "naive, sleep1, polite, polite-cached, polite-faults, batch or all")
	limit := flag.Duration("limit", 0, "the longest one strategy may run (default: max(20s, 2 × its theoretical minimum))")
	w := scenario.DefaultJudgeWorkload()
	flag.IntVar(&w.N, "n", w.N, "relevance judgments per strategy")
	flag.IntVar(&w.PromptTokens, "prompt-tokens", w.PromptTokens, "input tokens of each prompt")
	flag.IntVar(&w.PrefixTokens, "prefix-tokens", w.PrefixTokens, "of those, the instructions every prompt shares")
	flag.IntVar(&w.MaxTokens, "max-tokens", w.MaxTokens, "max_tokens of each request")
	flag.IntVar(&w.MaxInFlight, "in-flight", w.MaxInFlight, "MaxInFlight of the polite strategies")
	cfg := provider.DefaultConfig()
	flag.Float64Var(&cfg.RequestsPerMinute, "rpm", cfg.RequestsPerMinute, "in-process API: requests per minute")
	flag.Float64Var(&cfg.InputTokensPerMinute, "itpm", cfg.InputTokensPerMinute, "in-process API: input tokens per minute")
	flag.Float64Var(&cfg.OutputTokensPerMinute, "otpm", cfg.OutputTokensPerMinute, "in-process API: output tokens per minute")
	flag.DurationVar(&cfg.Burst, "burst", cfg.Burst, "in-process API: how much refill each bucket holds")
	flag.DurationVar(&cfg.BaseLatency, "base-latency", cfg.BaseLatency, "in-process API: latency of every request")
	flag.DurationVar(&cfg.PerTokenLatency, "per-token-latency", cfg.PerTokenLatency, "in-process API: latency per output token")
	flag.IntVar(&cfg.SpendLimit, "spend-limit", 0, "in-process API: requests a key may have admitted (0: no limit)")
	flag.Float64Var(&cfg.BatchRequestsPerSecond, "batch-rps", cfg.BatchRequestsPerSecond, "in-process API: batched requests processed a second")
	flag.IntVar(&cfg.MaxBatchRequests, "max-batch-requests", cfg.MaxBatchRequests, "in-process API: the most requests in one batch")
	overloadAt := flag.Duration("overload-at", 0, "in-process API: start of a 529 episode, from the start")
	overloadFor := flag.Duration("overload-for", 0, "in-process API: length of that episode (0: none)")
	flag.Parse()
	if *overloadFor > 0 {
		cfg.Overloaded = []provider.Episode{{Start: *overloadAt, Length: *overloadFor}}
	}
	opts := scenario.JudgeOptions{
		URL: *url, InProcess: *inProcess, Workload: w, Limit: *limit,
		NewPolite: llmclient.NewPolite, Client: llmclient.From, Log: os.Stderr,
	}
	if *strategy != "all" {
		opts.Strategies = []string{*strategy}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := judge(ctx, cfg, opts)
	if report != nil {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(report); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "judge: %v\n", err)
		os.Exit(1)
	}
}

// judge starts the API in this process if opts.InProcess asks for it, with
// cfg, and runs the judge against it.
func judge(ctx context.Context, cfg provider.Config, opts scenario.JudgeOptions) (*results.JudgeReport, error) {
	if (opts.URL == "") == !opts.InProcess {
		return nil, errors.New("want exactly one of --url and --in-process")
	}
	if opts.InProcess {
		srv, err := provider.New(cfg)
		if err != nil {
			return nil, err
		}
		in, err := provider.Listen(srv, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer in.Close()
		opts.URL = in.URL
	}
	return scenario.Judge(ctx, opts)
}
