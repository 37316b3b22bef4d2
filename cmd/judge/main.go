// Command judge replays the lesson's Problem against the fake Messages API:
// N relevance judgments, each a prompt of about 3000 tokens that share a
// long prefix, sent by one or more strategies. It prints one JSON document
// (provider.JudgeReport) on stdout. Every count a check should rely on comes
// from the API's own /stats, per strategy: each strategy uses its own API
// key, so its limits and counts are its own.
//
// Strategies:
//
//	naive          fire all N at once, each retried twice the way the SDKs do
//	               (retry-after if given, else 0.5 s × 2^k with a little jitter)
//	sleep1         the lesson's retry loop: on 429 or 529 sleep 1 s and retry,
//	               for ever; every rejected request comes back in step
//	polite         task 5's PoliteClient, with the API's limits
//	polite-cached  the same with the shared prefix marked cache_control; the
//	               first judgment goes alone, to write the cache
//	all            the four, in that order
//
// The polite strategies take PoliteClient from solutions/llmclient, or from
// exercises/llmclient when built with the tag ratelab_ex_llmclient. The
// grader builds it with build tags and runs it as a child process, so a
// learner's panic or endless loop cannot take the grader down.
//
// Besides the API's counts, judge records when each strategy's calls
// returned, on its own clock from the strategy's first request, in bins of
// 250 ms (provider.Timeline): the report draws the judgments done over time
// from it.
//
// With --in-process, judge starts the fake API itself on 127.0.0.1:0 with
// the limits of the provider flags; with --url it uses a running one (on
// loopback only) and reads its limits from /stats.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"ratelab/harness"
	"ratelab/provider"
)

// Defaults of the workload.
const (
	defaultN            = 2000
	defaultPromptTokens = 3000
	defaultPrefixTokens = 2900
	defaultMaxTokens    = 64
	// defaultInFlight is the polite strategies' MaxInFlight. Little's Law:
	// at the default 400 requests a second and about 130 ms a reply, some
	// 52 are in flight; 100 leaves room for the slower replies.
	defaultInFlight = 100
	model           = "claude-fake-judge"
)

// Strategies in the order "all" runs them.
var strategies = []string{"naive", "sleep1", "polite", "polite-cached"}

// creator is what the polite strategies need of a PoliteClient.
type creator interface {
	Create(ctx context.Context, params provider.MessageParams) (*provider.Message, error)
}

// politeOptions are what the tree's NewPoliteClient is given.
type politeOptions struct {
	baseURL  string
	key      string
	http     *http.Client
	rpm      float64
	itpm     float64
	inFlight int
}

// run is one judge invocation.
type run struct {
	url      string
	limits   provider.Limits
	workload provider.Workload
	limit    time.Duration // per strategy; 0 for automatic
}

func main() {
	url := flag.String("url", "", "base URL of a running fake API, such as http://127.0.0.1:8080 (loopback only)")
	inProcess := flag.Bool("in-process", false, "start a fake API in this process, on 127.0.0.1:0")
	strategy := flag.String("strategy", "all", "naive, sleep1, polite, polite-cached or all")
	limit := flag.Duration("limit", 0, "the longest one strategy may run (default: max(20s, 2 × its theoretical minimum))")
	var w provider.Workload
	flag.IntVar(&w.N, "n", defaultN, "relevance judgments per strategy")
	flag.IntVar(&w.PromptTokens, "prompt-tokens", defaultPromptTokens, "input tokens of each prompt")
	flag.IntVar(&w.PrefixTokens, "prefix-tokens", defaultPrefixTokens, "of those, the instructions every prompt shares")
	flag.IntVar(&w.MaxTokens, "max-tokens", defaultMaxTokens, "max_tokens of each request")
	flag.IntVar(&w.MaxInFlight, "in-flight", defaultInFlight, "MaxInFlight of the polite strategies")
	cfg := provider.DefaultConfig()
	flag.Float64Var(&cfg.RequestsPerMinute, "rpm", cfg.RequestsPerMinute, "in-process API: requests per minute")
	flag.Float64Var(&cfg.InputTokensPerMinute, "itpm", cfg.InputTokensPerMinute, "in-process API: input tokens per minute")
	flag.Float64Var(&cfg.OutputTokensPerMinute, "otpm", cfg.OutputTokensPerMinute, "in-process API: output tokens per minute")
	flag.DurationVar(&cfg.Burst, "burst", cfg.Burst, "in-process API: how much refill each bucket holds")
	flag.DurationVar(&cfg.BaseLatency, "base-latency", cfg.BaseLatency, "in-process API: latency of every request")
	flag.DurationVar(&cfg.PerTokenLatency, "per-token-latency", cfg.PerTokenLatency, "in-process API: latency per output token")
	flag.IntVar(&cfg.SpendLimit, "spend-limit", 0, "in-process API: requests a key may have admitted (0: no limit)")
	overloadAt := flag.Duration("overload-at", 0, "in-process API: start of a 529 episode, from the start")
	overloadFor := flag.Duration("overload-for", 0, "in-process API: length of that episode (0: none)")
	flag.Parse()
	if *overloadFor > 0 {
		cfg.Overloaded = []provider.Episode{{Start: *overloadAt, Length: *overloadFor}}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := judge(ctx, *url, *inProcess, cfg, w, *strategy, *limit)
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

// judge checks the settings, finds or starts the API, and runs the
// strategies named by which.
func judge(ctx context.Context, url string, inProcess bool, cfg provider.Config, w provider.Workload, which string, limit time.Duration) (*provider.JudgeReport, error) {
	names := []string{which}
	if which == "all" {
		names = strategies
	} else if !slices.Contains(strategies, which) {
		return nil, fmt.Errorf("unknown strategy %q (want %s or all)", which, strings.Join(strategies, ", "))
	}
	switch {
	case w.N < 1 || w.PromptTokens < 1 || w.MaxTokens < 1 || w.MaxInFlight < 1:
		return nil, fmt.Errorf("--n, --prompt-tokens, --max-tokens and --in-flight must be at least 1")
	case w.PrefixTokens < 0 || w.PrefixTokens >= w.PromptTokens:
		return nil, fmt.Errorf("--prefix-tokens %d: want 0 or more and fewer than --prompt-tokens %d", w.PrefixTokens, w.PromptTokens)
	case (url == "") == !inProcess:
		return nil, errors.New("want exactly one of --url and --in-process")
	}
	if inProcess {
		srv, err := provider.New(cfg)
		if err != nil {
			return nil, err
		}
		in, err := provider.Listen(srv, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer in.Close()
		url = in.URL
	} else if err := harness.CheckLoopback(url); err != nil {
		return nil, err
	}
	url = strings.TrimRight(url, "/")
	st, err := readStats(ctx, url, "")
	if err != nil {
		return nil, err
	}
	r := &run{url: url, limits: st.Limits, workload: w, limit: limit}
	report := &provider.JudgeReport{
		Schema: provider.JudgeSchema, Client: clientFrom, URL: url, InProcess: inProcess,
		Limits: st.Limits, Workload: w,
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return report, ctx.Err()
		}
		res := r.strategy(ctx, name)
		fmt.Fprintf(os.Stderr, "judge: %-13s completed %d/%d, %d attempts, %d 429s, %.1fs (minimum %.1fs, ratio %.2f)%s\n",
			res.Name, res.Completed, res.N, res.Attempts, res.Rejected429, res.WallSeconds, res.MinSeconds, res.Ratio, errNote(res.Error))
		report.Strategies = append(report.Strategies, res)
	}
	return report, nil
}

func errNote(e string) string {
	if e == "" {
		return ""
	}
	return "; " + e
}

// minimum returns the theoretical minimum of a strategy and its two terms:
// N over the request rate, and the uncached input tokens over the token
// rate, where a cached prefix is written once and read for free after.
func (r *run) minimum(cached bool) (total, requests, tokens float64, boundBy string) {
	w := r.workload
	requests = float64(w.N) / (r.limits.RequestsPerMinute / 60)
	uncached := float64(w.N) * float64(w.PromptTokens)
	if cached && w.PrefixTokens >= provider.DefaultCacheMinTokens {
		uncached = float64(w.PrefixTokens) + float64(w.N)*float64(w.PromptTokens-w.PrefixTokens)
	}
	tokens = uncached / (r.limits.InputTokensPerMinute / 60)
	if tokens > requests {
		return tokens, requests, tokens, "input_tokens"
	}
	return requests, requests, tokens, "requests"
}

// strategy runs one strategy with a fresh key and measures it.
func (r *run) strategy(ctx context.Context, name string) provider.StrategyResult {
	cached := name == "polite-cached"
	res := provider.StrategyResult{Name: name, Key: fmt.Sprintf("judge-%s-%d", name, time.Now().UnixNano()), N: r.workload.N}
	res.MinSeconds, res.RequestsMinSeconds, res.InputTokensMinSeconds, res.MinBoundBy = r.minimum(cached)
	limit := r.limit
	if limit <= 0 {
		limit = max(20*time.Second, time.Duration(2*res.MinSeconds*float64(time.Second)))
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	tr := &http.Transport{MaxIdleConnsPerHost: r.workload.N + 16, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	prompts := r.prompts(cached)

	var call func(ctx context.Context, p provider.MessageParams) error
	switch name {
	case "naive":
		call = func(ctx context.Context, p provider.MessageParams) error { return naive(ctx, hc, r.url, res.Key, p) }
	case "sleep1":
		call = func(ctx context.Context, p provider.MessageParams) error { return sleep1(ctx, hc, r.url, res.Key, p) }
	default:
		c, err := makePolite(politeOptions{
			baseURL: r.url, key: res.Key, http: hc, inFlight: r.workload.MaxInFlight,
			rpm: r.limits.RequestsPerMinute, itpm: r.limits.InputTokensPerMinute,
		})
		if err != nil {
			res.Error = err.Error()
			res.Lost = int64(res.N)
			return res
		}
		call = func(ctx context.Context, p provider.MessageParams) error {
			msg, err := c.Create(ctx, p)
			if err == nil && msg == nil {
				err = errors.New("Create returned neither a message nor an error")
			}
			return err
		}
	}

	// Anthropic's advice: a cache entry can be read only once the reply
	// that wrote it has begun, so the cached strategy sends one request
	// first and waits.
	t, wall := callAll(sctx, protect(call), prompts, cached)
	res.WallSeconds = wall.Seconds()
	res.TimedOut = sctx.Err() != nil && ctx.Err() == nil
	res.Client = t.result()
	res.Timeline = t.timeline()
	if t.panic != "" {
		res.Error = t.panic
	}

	st, err := readStats(ctx, r.url, res.Key)
	if err != nil {
		res.Error = strings.TrimPrefix(res.Error+"; ", "; ") + err.Error()
	}
	k := st.Keys[res.Key]
	res.Server = k
	res.Completed, res.Attempts = k.Completed, k.Requests
	res.Rejected429, res.Overloaded529 = k.TooManyRequests(), k.Overloaded
	if k.Requests > 0 {
		res.RejectedFraction = float64(res.Rejected429) / float64(k.Requests)
	}
	res.Lost = int64(res.N) - k.Completed
	if res.MinSeconds > 0 {
		res.Ratio = res.WallSeconds / res.MinSeconds
	}
	return res
}

// makePolite calls the tree's NewPoliteClient, turning a panic (such as an
// unwritten stub) into an error.
func makePolite(o politeOptions) (c creator, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("NewPoliteClient panicked: %v", r)
		}
	}()
	c = newPolite(o)
	if c == nil {
		return nil, errors.New("NewPoliteClient returned nil")
	}
	return c, nil
}

// panicError is a panic of the code under test.
type panicError struct{ msg string }

func (e *panicError) Error() string { return e.msg }

// protect wraps call so that a panic becomes an error.
func protect(call func(context.Context, provider.MessageParams) error) func(context.Context, provider.MessageParams) error {
	return func(ctx context.Context, p provider.MessageParams) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = &panicError{fmt.Sprintf("Create panicked: %v", r)}
			}
		}()
		return call(ctx, p)
	}
}

// callAll calls call once per prompt, all at once, or the first alone and
// then the rest if firstAlone is set, and tallies what each call returned
// and when, on its own clock from just before the first call. It returns
// the tally and the time from then to the last return.
func callAll(ctx context.Context, call func(context.Context, provider.MessageParams) error, prompts []provider.MessageParams, firstAlone bool) (*tally, time.Duration) {
	t := newTally()
	start := time.Now()
	one := func(p provider.MessageParams) {
		err := call(ctx, p)
		t.record(ctx, err, time.Since(start))
	}
	if firstAlone && len(prompts) > 0 {
		one(prompts[0])
		prompts = prompts[1:]
	}
	var wg sync.WaitGroup
	for _, p := range prompts {
		wg.Go(func() { one(p) })
	}
	wg.Wait()
	return t, time.Since(start)
}

// prompts returns the workload: N prompts of PromptTokens tokens, the first
// PrefixTokens of which (the system prompt) are the same for all. With
// cached, the system prompt is marked cache_control.
func (r *run) prompts(cached bool) []provider.MessageParams {
	w := r.workload
	system := provider.TextBlock{Type: "text", Text: filler(w.PrefixTokens,
		"You judge search results. Given a query and a document, answer with a relevance grade from 0 (off topic) to 3 (exactly what was asked), then one sentence of reasons. ")}
	if cached {
		system.CacheControl = provider.Ephemeral()
	}
	ps := make([]provider.MessageParams, w.N)
	for i := range ps {
		p := provider.MessageParams{
			Model: model, MaxTokens: w.MaxTokens,
			Messages: []provider.MessageParam{{Role: "user", Content: provider.Blocks{provider.Text(filler(w.PromptTokens-w.PrefixTokens,
				fmt.Sprintf("Query %d: how do token buckets refill? Document %d: a bucket gains tokens at a steady rate up to its burst. ", i, i)))}}},
		}
		if w.PrefixTokens > 0 {
			p.System = provider.Blocks{system}
		}
		ps[i] = p
	}
	return ps
}

// filler returns exactly tokens tokens of text (4 ASCII characters each)
// starting with lead and padded with more of it.
func filler(tokens int, lead string) string {
	n := 4 * tokens
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(lead[:min(len(lead), n-b.Len())])
	}
	return b.String()
}

// tally counts what the calls of a strategy returned, and when: okAt and
// failedAt are the times after the start at which calls returned a
// message or an error.
type tally struct {
	mu       sync.Mutex
	t        provider.ClientTally
	panic    string
	okAt     []time.Duration
	failedAt []time.Duration
}

func newTally() *tally { return &tally{t: provider.ClientTally{Errors: map[string]int{}}} }

// record counts one call's outcome, which it returned at, after the
// start; a call cut short by the strategy's time limit is unfinished and
// has no time.
func (t *tally) record(ctx context.Context, err error, at time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var pe *panicError
	switch {
	case err == nil:
		t.t.OK++
		t.okAt = append(t.okAt, at)
		return
	case errors.As(err, &pe):
		if t.panic == "" {
			t.panic = pe.msg
		}
		t.t.Failed++
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		t.t.Unfinished++
		return
	default:
		t.t.Failed++
	}
	t.failedAt = append(t.failedAt, at)
	t.t.Errors[errorKind(err)]++
}

// timeline bins the times the calls returned at.
func (t *tally) timeline() *provider.Timeline {
	t.mu.Lock()
	defer t.mu.Unlock()
	return provider.NewTimeline(t.okAt, t.failedAt)
}

func (t *tally) result() provider.ClientTally {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.t
	if len(out.Errors) == 0 {
		out.Errors = nil
	}
	return out
}

// errorKind names an error for the tally, such as "429 rate_limit_error".
func errorKind(err error) string {
	var apiErr *provider.APIError
	var pe *panicError
	switch {
	case errors.As(err, &apiErr):
		kind := strconv.Itoa(apiErr.StatusCode) + " " + apiErr.Type
		if apiErr.ErrorCode != "" {
			kind += " " + apiErr.ErrorCode
		}
		return kind
	case errors.As(err, &pe):
		return "panic"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// post sends p once with the API key and returns nil for a 200, an
// *provider.APIError for another status, or the transport's error.
func post(ctx context.Context, hc *http.Client, url, key string, p provider.MessageParams) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(provider.HeaderAPIKey, key)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return provider.ReadError(resp)
	}
	defer resp.Body.Close()
	var m provider.Message
	return json.NewDecoder(resp.Body).Decode(&m)
}

// naive is what an SDK does for one call of asyncio.gather: up to 2
// retries of 408, 409, 429, 5xx (529 included) and connection errors,
// waiting what retry-after says if it is between 0 and 60 s, otherwise
// 0.5 s × 2^k (at most 8 s) less up to a quarter of jitter.
func naive(ctx context.Context, hc *http.Client, url, key string, p provider.MessageParams) error {
	const retries = 2
	for k := 0; ; k++ {
		err := post(ctx, hc, url, key, p)
		if err == nil || ctx.Err() != nil || k == retries {
			return err
		}
		var apiErr *provider.APIError
		isAPI := errors.As(err, &apiErr)
		if isAPI && !(apiErr.StatusCode == 408 || apiErr.StatusCode == 409 || apiErr.StatusCode == 429 || apiErr.StatusCode >= 500) {
			return err
		}
		delay := time.Duration(min(0.5*math.Pow(2, float64(k)), 8) * (1 - 0.25*rand.Float64()) * float64(time.Second))
		if isAPI && apiErr.RetryAfter > 0 && apiErr.RetryAfter <= time.Minute {
			delay = apiErr.RetryAfter
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// sleep1 is the lesson's loop: on a 429, a 529 or a connection error,
// sleep one second and try again, for as long as it takes.
func sleep1(ctx context.Context, hc *http.Client, url, key string, p provider.MessageParams) error {
	for {
		err := post(ctx, hc, url, key, p)
		if err == nil || ctx.Err() != nil {
			return err
		}
		var apiErr *provider.APIError
		if errors.As(err, &apiErr) && apiErr.StatusCode != 429 && apiErr.StatusCode != provider.StatusOverloaded {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readStats reads the API's /stats, for key only if key is set.
func readStats(ctx context.Context, url, key string) (provider.Stats, error) {
	var st provider.Stats
	u := url + "/stats"
	if key != "" {
		u += "?key=" + key
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("read the API's stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("read the API's stats: %s answered %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("read the API's stats: %w", err)
	}
	if !(st.Limits.RequestsPerMinute > 0 && st.Limits.InputTokensPerMinute > 0) {
		return st, fmt.Errorf("read the API's stats: %s reports no limits; is it the fake Messages API?", u)
	}
	return st, nil
}
