package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"ratelab/provider"
)

var cmdProvider = &command{
	Name:      "provider",
	UsageLine: "provider [--port 8080] [--rpm N] [--itpm N] [--otpm N] [--overload START+LENGTH,...] [--spend-limit N] [--batch-rps N] [--max-batch-requests N]",
	Short:     "run the fake LLM API (Anthropic-shaped) until Ctrl-C",
	Long: `Provider runs the fake Messages API of task 5 on 127.0.0.1: POST /v1/messages,
POST /v1/messages/count_tokens, the Message Batches API
(/v1/messages/batches: create, retrieve, list, cancel, results as JSONL) and
GET /stats, with per-key token buckets for
requests, input tokens and output tokens, the anthropic-ratelimit-* headers,
retry-after and x-should-retry on 429, prompt caching (per block or top-level,
5m or 1h), and Anthropic's error bodies. Limits are scaled so a job of
thousands of requests finishes in seconds.

Like the real API it wants the key in x-api-key or "Authorization: Bearer KEY"
and an anthropic-version header; the official SDKs work against it unchanged,
for example anthropic-sdk-go with option.WithBaseURL("http://127.0.0.1:8080")
and option.WithAPIKey("any-key").

--overload makes every request fail with 529 overloaded_error during the
windows it lists, counted from the start: 30s+5s is 5 s of overload 30 s in,
a bare 5s the first 5 s. --spend-limit N answers the spend-limit 429
(enforced_spend_limit_reached, x-should-retry: false) to every request of a
key after its first N.

Batches are processed one request after another per key, --batch-rps a
second (100 by default), with at most --max-batch-requests in one batch
(100,000, as the real API). /stats reports each key's cost at illustrative
prices in US dollars (provider.DefaultPrices), batched tokens at half price.`,
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
	fs.Var((*episodesFlag)(&o.cfg.Overloaded), "overload", "529 overload `windows`, comma-separated START+LENGTH from the start (30s+5s), or LENGTH from 0 (5s)")
	fs.IntVar(&o.cfg.SpendLimit, "spend-limit", 0, "requests a key may have admitted before every request gets the spend-limit 429 (0: no limit)")
	fs.Float64Var(&o.cfg.BatchRequestsPerSecond, "batch-rps", o.cfg.BatchRequestsPerSecond, "batched requests processed a second per key")
	fs.IntVar(&o.cfg.MaxBatchRequests, "max-batch-requests", o.cfg.MaxBatchRequests, "the most requests in one batch")
	return &o
}

// episodesFlag is --overload: a list of provider.Episode.
type episodesFlag []provider.Episode

func (e *episodesFlag) String() string {
	if e == nil {
		return ""
	}
	parts := make([]string, len(*e))
	for i, ep := range *e {
		parts[i] = ep.Start.String() + "+" + ep.Length.String()
	}
	return strings.Join(parts, ",")
}

func (e *episodesFlag) Set(v string) error {
	var eps []provider.Episode
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		start, length := "0s", part
		if s, l, ok := strings.Cut(part, "+"); ok {
			start, length = s, l
		}
		s, err1 := time.ParseDuration(start)
		l, err2 := time.ParseDuration(length)
		if err1 != nil || err2 != nil || s < 0 || l <= 0 {
			return fmt.Errorf("%q: want START+LENGTH such as 30s+5s, or LENGTH such as 5s", part)
		}
		eps = append(eps, provider.Episode{Start: s, Length: l})
	}
	*e = eps
	return nil
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
	fmt.Fprintf(stdout, "fake LLM API on %s: %.0f RPM, %.0f ITPM, %.0f OTPM per key\n",
		in.URL, cfg.RequestsPerMinute, cfg.InputTokensPerMinute, cfg.OutputTokensPerMinute)
	if len(cfg.Overloaded) > 0 {
		fmt.Fprintf(stdout, "529 overloaded during %s (start+length from now)\n", (*episodesFlag)(&cfg.Overloaded))
	}
	if cfg.SpendLimit > 0 {
		fmt.Fprintf(stdout, "spend limit: %d requests per key, then 429 enforced_spend_limit_reached\n", cfg.SpendLimit)
	}
	fmt.Fprintf(stdout, "try: curl -s %s/stats\nCtrl-C stops it.\n", in.URL)
	<-ctx.Done()
	return nil
}
