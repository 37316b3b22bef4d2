package main

import (
	"context"
	"flag"
	"fmt"

	"ratelab/provider"
)

var cmdProvider = &command{
	Name:      "provider",
	UsageLine: "provider [--port 8080] [--rpm N] [--itpm N]",
	Short:     "run the fake LLM API (Anthropic-shaped) until Ctrl-C",
	Long: `Provider runs the fake Messages API of task 5 on 127.0.0.1: POST /v1/messages,
POST /v1/messages/count_tokens and GET /stats, with per-key token buckets for
requests, input tokens and output tokens, the anthropic-ratelimit-* headers,
retry-after on 429, and Anthropic's error bodies. Limits are scaled so a job
of thousands of requests finishes in seconds.`,
	Run: withFlags(providerFlags, runProvider),
}

// providerOptions are provider's flags: the fake API's limits and its port.
type providerOptions struct {
	cfg  provider.Config
	port int
}

func providerFlags(fs *flag.FlagSet) *providerOptions {
	o := providerOptions{cfg: provider.DefaultConfig()}
	fs.IntVar(&o.port, "port", 8080, "TCP port on 127.0.0.1 (0 picks a free one)")
	fs.Float64Var(&o.cfg.RequestsPerMinute, "rpm", o.cfg.RequestsPerMinute, "requests per minute per key")
	fs.Float64Var(&o.cfg.InputTokensPerMinute, "itpm", o.cfg.InputTokensPerMinute, "uncached input tokens per minute per key")
	fs.Float64Var(&o.cfg.OutputTokensPerMinute, "otpm", o.cfg.OutputTokensPerMinute, "output tokens per minute per key")
	return &o
}

func runProvider(ctx context.Context, o *providerOptions, args []string) error {
	if len(args) > 0 {
		return usagef("provider takes no arguments")
	}
	if o.port < 0 || o.port > 65535 {
		return usagef("--port %d: want 0 to 65535", o.port)
	}
	if err := portFree(o.port); err != nil {
		return err
	}
	cfg := o.cfg
	srv, err := provider.New(cfg)
	if err != nil {
		return usageError{err.Error()}
	}
	in, err := provider.Listen(srv, fmt.Sprintf("127.0.0.1:%d", o.port))
	if err != nil {
		return err
	}
	defer in.Close()
	fmt.Fprintf(stdout, "fake LLM API on %s: %.0f RPM, %.0f ITPM, %.0f OTPM per key\ntry: curl -s %s/stats\nCtrl-C stops it.\n",
		in.URL, cfg.RequestsPerMinute, cfg.InputTokensPerMinute, cfg.OutputTokensPerMinute, in.URL)
	<-ctx.Done()
	return nil
}
