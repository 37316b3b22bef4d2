package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"ratelab/grader"
	"ratelab/provider"
	"ratelab/results"
)

func init() {
	commands = append(commands, &command{
		Name:      "provider",
		UsageLine: "provider [--port 8080] [--rpm N] [--itpm N]",
		Short:     "run the fake LLM API (Anthropic-shaped) until Ctrl-C",
		Long: `Provider runs the fake Messages API of task 5 on 127.0.0.1: POST /v1/messages,
POST /v1/messages/count_tokens and GET /stats, with per-key token buckets for
requests, input tokens and output tokens, the anthropic-ratelimit-* headers,
retry-after on 429, and Anthropic's error bodies. Limits are scaled so a job
of thousands of requests finishes in seconds.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			cfg := provider.DefaultConfig()
			port := fs.Int("port", 8080, "TCP port on 127.0.0.1 (0 picks a free one)")
			fs.Float64Var(&cfg.RequestsPerMinute, "rpm", cfg.RequestsPerMinute, "requests per minute per key")
			fs.Float64Var(&cfg.InputTokensPerMinute, "itpm", cfg.InputTokensPerMinute, "uncached input tokens per minute per key")
			fs.Float64Var(&cfg.OutputTokensPerMinute, "otpm", cfg.OutputTokensPerMinute, "output tokens per minute per key")
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("provider takes no arguments")
				}
				if *port < 0 || *port > 65535 {
					return usagef("--port %d: want 0 to 65535", *port)
				}
				if err := portFree(*port); err != nil {
					return err
				}
				srv, err := provider.New(cfg)
				if err != nil {
					return usageError{err.Error()}
				}
				in, err := provider.Listen(srv, fmt.Sprintf("127.0.0.1:%d", *port))
				if err != nil {
					return err
				}
				defer in.Close()
				fmt.Fprintf(stdout, "fake LLM API on %s: %.0f RPM, %.0f ITPM, %.0f OTPM per key\ntry: curl -s %s/stats\nCtrl-C stops it.\n",
					in.URL, cfg.RequestsPerMinute, cfg.InputTokensPerMinute, cfg.OutputTokensPerMinute, in.URL)
				<-ctx.Done()
				return nil
			}
		},
	})
	commands = append(commands, &command{
		Name:      "judge",
		UsageLine: "judge [N] [--strategy all|naive|sleep1|polite|polite-cached] [--solutions]",
		Short:     "run N relevance judgments against the fake LLM API with four strategies",
		Long: `Judge runs task 5's scenario: N judgments (2,000 by default), each a prompt of
about 3,000 tokens, against a fresh fake API, with the naive fire-everything
client, the sleep(1) retry loop, your polite client (exercises/llmclient;
--solutions for the reference), and your polite client with the shared
prefix cached. For each it prints what the API counted: completed, 429s,
attempts, wall time and the theoretical minimum max(N/RPM, tokens/ITPM).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			strategy := fs.String("strategy", "all", "naive, sleep1, polite, polite-cached or all")
			solutions := fs.Bool("solutions", false, "use the reference client instead of your exercises")
			return func(ctx context.Context, args []string) error {
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
				switch *strategy {
				case "all", "naive", "sleep1", "polite", "polite-cached":
				default:
					return usagef("--strategy %q: want all, naive, sleep1, polite or polite-cached", *strategy)
				}
				root, err := grader.FindRoot(".")
				if err != nil {
					return usageError{err.Error()}
				}
				bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(*solutions), "judge")
				if err != nil {
					return err
				}
				defer cleanup()
				var rep results.JudgeReport
				if err := grader.RunJSON(ctx, 15*time.Minute, &rep, bin, "--in-process", "--strategy", *strategy, "--n", fmt.Sprint(n)); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%-14s %10s %8s %9s %9s %9s %7s\n", "strategy", "completed", "429s", "attempts", "wall", "minimum", "ratio")
				for _, s := range rep.Strategies {
					fmt.Fprintf(stdout, "%-14s %5d/%-4d %8d %9d %8.1fs %8.1fs %6.2f×%s\n",
						s.Name, s.Completed, s.N, s.Rejected429, s.Attempts, s.WallSeconds, s.MinSeconds, s.Ratio, errSuffix(s.Error))
				}
				return nil
			}
		},
	})
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "  (" + e + ")"
}
