package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ratelab/harness"
	"ratelab/model/ties"
	"ratelab/provider"
	"ratelab/results"
)

// JudgeStrategies are the judge's strategies, in the order Judge runs them
// when JudgeOptions.Strategies is empty:
//
//	naive          fire all N at once, each retried twice the way the SDKs do
//	               (retry-after if given, else 0.5 s × 2^k with a little jitter)
//	sleep1         the lesson's retry loop: on 429 or 529 sleep 1 s and retry,
//	               for ever; every rejected request comes back in step
//	polite         task 5's PoliteClient, with the API's limits
//	polite-cached  the same with the shared prefix marked cache_control; the
//	               first judgment goes alone, to write the cache
//	polite-faults  the polite client on a smaller job (FaultsWorkload) while
//	               the API fails one request in FaultsEvery on purpose, each
//	               kind of results.FaultKinds in turn: every path a retry
//	               can take, counted by the API
//	batch          the lesson's last word: the Message Batches API, at half
//	               the price; the judge's own client (judgeBatches), not
//	               learner code
var JudgeStrategies = []string{"naive", "sleep1", "polite", "polite-cached", "polite-faults", "batch"}

// The polite-faults strategy's settings. The job is small enough that
// every fault is a retry while the client is at its in-flight limit: 300
// judgments with 8 in flight keep all 8 busy, and one request in six fails,
// 50 faults in all, 10 of each kind. An attempt the API holds on purpose
// is given up after FaultsAttemptTimeout.
const (
	FaultsN              = 300
	FaultsMaxInFlight    = 8
	FaultsEvery          = 6
	FaultsAttemptTimeout = 2 * time.Second
)

// DefaultJudgeWorkload is the lesson's Problem: 2,000 relevance judgments
// of 3,000 prompt tokens, 2,900 of them the shared instructions, up to 64
// output tokens each. The polite strategies may have 100 calls in flight:
// by Little's Law, at the default 400 requests a second and about 130 ms a
// reply some 52 are, and 100 leaves room for the slower replies.
func DefaultJudgeWorkload() results.JudgeWorkload {
	return results.JudgeWorkload{N: 2000, PromptTokens: 3000, PrefixTokens: 2900, MaxTokens: 64, MaxInFlight: 100}
}

// judgeModel is the model every judgment asks for.
const judgeModel = "claude-fake-judge"

// Creator is what the polite strategies need of task 5's PoliteClient.
type Creator interface {
	Create(ctx context.Context, params provider.MessageParams) (*provider.Message, error)
}

// PoliteOptions are what the polite client under test is built with for
// one strategy: the API, the strategy's own key and HTTP client, the API's
// limits (RPM requests and ITPM input tokens per minute) and the workload's
// MaxInFlight.
type PoliteOptions struct {
	BaseURL     string
	APIKey      string
	HTTPClient  *http.Client
	RPM, ITPM   float64
	MaxInFlight int
	// AttemptTimeout bounds one attempt (0: the client's default).
	AttemptTimeout time.Duration
}

// JudgeOptions describe one run of the judge: the strategies, one after
// the other, each with a fresh API key, against the fake Messages API.
type JudgeOptions struct {
	// URL is the API's base URL, such as http://127.0.0.1:8080. It must be
	// loopback. The judge reads the API's limits from its /stats.
	URL string
	// InProcess says whether the caller started the API itself; it is
	// recorded in the report.
	InProcess bool
	// Workload is the job each strategy runs (see DefaultJudgeWorkload).
	Workload results.JudgeWorkload
	// Strategies names the strategies to run, from JudgeStrategies; empty
	// runs them all.
	Strategies []string
	// Limit is the longest one strategy may run; 0 allows max(20 s, twice
	// its theoretical minimum).
	Limit time.Duration
	// NewPolite builds the polite client under test (task 5's
	// NewPoliteClient, from the learner's tree or the reference), so that
	// harness never imports it. A panic in it, or in its Create, is
	// reported in the strategy's Error.
	NewPolite func(PoliteOptions) Creator `json:"-"`
	// Client names the tree NewPolite comes from, such as
	// "solutions/llmclient", for the report.
	Client string
	// Log, if set, gets one line per strategy as it ends.
	Log io.Writer `json:"-"`
	// Dial, if set, opens every connection to the API instead of the
	// operating system's network (see Options.Dial).
	Dial harness.DialFunc `json:"-"`
}

// Judge runs the strategies and returns their report. Every count a check
// should rely on comes from the API's own /stats for the strategy's key.
// It returns the report so far and ctx's error if ctx ends between
// strategies.
func Judge(ctx context.Context, o JudgeOptions) (*results.JudgeReport, error) {
	names := o.Strategies
	if len(names) == 0 {
		names = JudgeStrategies
	}
	for _, n := range names {
		if !slices.Contains(JudgeStrategies, n) {
			return nil, fmt.Errorf("unknown strategy %q (want %s)", n, strings.Join(JudgeStrategies, ", "))
		}
	}
	w := o.Workload
	switch {
	case w.N < 1 || w.PromptTokens < 1 || w.MaxTokens < 1 || w.MaxInFlight < 1:
		return nil, fmt.Errorf("workload %+v: N, PromptTokens, MaxTokens and MaxInFlight must be at least 1", w)
	case w.PrefixTokens < 0 || w.PrefixTokens >= w.PromptTokens:
		return nil, fmt.Errorf("workload: PrefixTokens %d: want 0 or more and fewer than PromptTokens %d", w.PrefixTokens, w.PromptTokens)
	case o.NewPolite == nil && slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "polite") }):
		return nil, errors.New("the polite strategies need NewPolite")
	}
	if err := harness.CheckLoopback(o.URL); err != nil {
		return nil, err
	}
	url := strings.TrimRight(o.URL, "/")
	statsTr := &http.Transport{DialContext: o.Dial}
	defer statsTr.CloseIdleConnections()
	stats := &http.Client{Transport: statsTr}
	st, err := readAPIStats(ctx, stats, url, "")
	if err != nil {
		return nil, err
	}
	r := &judgeRun{url: url, limits: st.Limits, opts: o, stats: stats}
	report := &results.JudgeReport{
		Schema: results.JudgeSchema, Client: o.Client, URL: url, InProcess: o.InProcess,
		Limits: st.Limits, Workload: w,
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return report, ctx.Err()
		}
		res := r.strategy(ctx, name)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "judge: %-13s completed %d/%d, %d attempts, %d 429s, %.1fs (minimum %.1fs, ratio %.2f), $%.2f%s\n",
				res.Name, res.Completed, res.N, res.Attempts, res.Rejected429, res.WallSeconds, res.MinSeconds, res.Ratio, res.CostUSD, errNote(res.Error))
		}
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

// judgeRun is one Judge call against one API.
type judgeRun struct {
	url    string
	limits results.APILimits
	opts   JudgeOptions
	stats  *http.Client // reads the API's /stats
}

// minimum returns the theoretical minimum of a strategy and its two terms:
// N over the request rate, and the uncached input tokens over the token
// rate, where a cached prefix is written once and read for free after.
func (r *judgeRun) minimum(w results.JudgeWorkload, cached bool) (total, requests, tokens float64, boundBy string) {
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
func (r *judgeRun) strategy(ctx context.Context, name string) results.JudgeStrategy {
	w := r.opts.Workload
	cached, faults := name == "polite-cached", name == "polite-faults"
	var timeout time.Duration
	if faults {
		w.N, w.MaxInFlight, timeout = min(w.N, FaultsN), FaultsMaxInFlight, FaultsAttemptTimeout
	}
	res := results.JudgeStrategy{Name: name, Key: fmt.Sprintf("judge-%s-%d", name, time.Now().UnixNano()), N: w.N}
	if strings.HasPrefix(name, "polite") {
		res.MaxInFlight, res.AttemptTimeoutMS = w.MaxInFlight, float64(timeout)/float64(time.Millisecond)
	}
	res.MinSeconds, res.RequestsMinSeconds, res.InputTokensMinSeconds, res.MinBoundBy = r.minimum(w, cached)
	if name == "batch" {
		// Batches bypass the rate limits: the bound is the API's batch
		// throughput, counted under requests.
		// An API without batches has no such bound (and the strategy
		// fails).
		res.MinSeconds = 0
		if r.limits.BatchRequestsPerSecond > 0 {
			res.MinSeconds = float64(w.N) / r.limits.BatchRequestsPerSecond
		}
		res.RequestsMinSeconds, res.InputTokensMinSeconds, res.MinBoundBy = res.MinSeconds, 0, "batch_requests"
	}
	limit := r.opts.Limit
	if limit <= 0 {
		limit = max(20*time.Second, time.Duration(2*res.MinSeconds*float64(time.Second)))
		if faults {
			// Each fault costs a backoff or a retry-after, and a held attempt
			// its whole timeout: ten of them hold a slot 2 s each.
			limit = max(limit, time.Minute)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	tr := &http.Transport{MaxIdleConnsPerHost: w.N + 16, IdleConnTimeout: 30 * time.Second, DisableCompression: true, DialContext: r.opts.Dial}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	prompts := judgePrompts(w, cached)

	var call func(ctx context.Context, p provider.MessageParams) error
	var t *judgeTally
	var wall time.Duration
	switch name {
	case "batch":
		t, wall = judgeBatches(sctx, hc, r.url, res.Key, r.limits, prompts)
	case "naive":
		call = func(ctx context.Context, p provider.MessageParams) error {
			return naiveCall(ctx, hc, r.url, res.Key, p)
		}
	case "sleep1":
		call = func(ctx context.Context, p provider.MessageParams) error {
			return sleep1Call(ctx, hc, r.url, res.Key, p)
		}
	default:
		if faults {
			if err := putFaultPlan(sctx, r.stats, r.url, res.Key, results.APIFaultPlan{Every: FaultsEvery}); err != nil {
				res.Error = err.Error()
				res.Lost = int64(res.N)
				return res
			}
		}
		c, err := makePolite(r.opts.NewPolite, PoliteOptions{
			BaseURL: r.url, APIKey: res.Key, HTTPClient: hc, MaxInFlight: w.MaxInFlight,
			RPM: r.limits.RequestsPerMinute, ITPM: r.limits.InputTokensPerMinute, AttemptTimeout: timeout,
		})
		if err != nil {
			res.Error = err.Error()
			res.Lost = int64(res.N)
			return res
		}
		call = func(ctx context.Context, p provider.MessageParams) error {
			msg, err := c.Create(ctx, p)
			if err == nil && msg == nil {
				err = errors.New("the client's Create returned neither a message nor an error")
			}
			return err
		}
	}

	// Anthropic's advice: a cache entry can be read only once the reply
	// that wrote it has begun, so the cached strategy sends one request
	// first and waits.
	if call != nil {
		t, wall = callAll(sctx, protect(call), prompts, cached)
	}
	res.WallSeconds = wall.Seconds()
	res.MostSeconds = t.mostDone(res.N).Seconds()
	res.TimedOut = sctx.Err() != nil && ctx.Err() == nil
	res.Client = t.result()
	res.Timeline = t.timeline()
	if t.panic != "" {
		res.Error = t.panic
	}

	st, err := readAPIStats(ctx, r.stats, r.url, res.Key)
	if err != nil {
		res.Error = strings.TrimPrefix(res.Error+"; ", "; ") + err.Error()
	}
	k := st.Keys[res.Key]
	res.Server = k
	res.Completed, res.Attempts = k.Completed+k.BatchSucceeded, k.Requests+k.BatchRequests
	res.CostUSD = k.CostUSD + k.BatchCostUSD
	res.Rejected429, res.Overloaded529 = k.TooManyRequests(), k.Overloaded
	if k.Requests > 0 {
		res.RejectedFraction = float64(res.Rejected429) / float64(k.Requests)
	}
	res.Lost = int64(res.N) - res.Completed
	if res.MinSeconds > 0 {
		res.Ratio = res.WallSeconds / res.MinSeconds
	}
	return res
}

// makePolite calls newPolite, turning a panic (such as an unwritten stub)
// into an error.
func makePolite(newPolite func(PoliteOptions) Creator, o PoliteOptions) (c Creator, err error) {
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
func callAll(ctx context.Context, call func(context.Context, provider.MessageParams) error, prompts []provider.MessageParams, firstAlone bool) (*judgeTally, time.Duration) {
	t := newJudgeTally()
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
	for i, p := range prompts {
		wg.Go(func() {
			// Call i starts i × ties.Start(1) after call 0: the
			// API admits the lowest indices first, and a call refused and
			// retried a second later keeps its own nanoseconds, not the
			// scheduler's order (package ties).
			if d := ties.Start(i); d > 0 {
				time.Sleep(d)
			}
			one(p)
		})
	}
	wg.Wait()
	return t, time.Since(start)
}

// judgePrompts returns the workload: N prompts of PromptTokens tokens, the
// first PrefixTokens of which (the system prompt) are the same for all.
// With cached, the system prompt is marked cache_control.
func judgePrompts(w results.JudgeWorkload, cached bool) []provider.MessageParams {
	system := provider.TextBlock{Type: "text", Text: filler(w.PrefixTokens,
		"You judge search results. Given a query and a document, answer with a relevance grade from 0 (off topic) to 3 (exactly what was asked), then one sentence of reasons. ")}
	if cached {
		system.CacheControl = provider.Ephemeral()
	}
	ps := make([]provider.MessageParams, w.N)
	for i := range ps {
		p := provider.MessageParams{
			Model: judgeModel, MaxTokens: w.MaxTokens,
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

// judgeTally counts what the calls of a strategy returned, and when: okAt
// and failedAt are the times after the start at which calls returned a
// message or an error.
type judgeTally struct {
	mu       sync.Mutex
	t        results.JudgeTally
	panic    string
	okAt     []time.Duration
	failedAt []time.Duration
}

func newJudgeTally() *judgeTally {
	return &judgeTally{t: results.JudgeTally{Errors: map[string]int{}}}
}

// record counts one call's outcome, which it returned at, after the
// start; a call cut short by the strategy's time limit is unfinished and
// has no time.
func (t *judgeTally) record(ctx context.Context, err error, at time.Duration) {
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

// mostDone returns when all but results.JudgeTailShare of n calls had
// returned a message, or 0 if fewer did.
func (t *judgeTally) mostDone(n int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := n - int(math.Floor(results.JudgeTailShare*float64(n)+1e-9))
	if k <= 0 || len(t.okAt) < k {
		return 0
	}
	at := slices.Clone(t.okAt)
	slices.Sort(at)
	return at[k-1]
}

// timeline bins the times the calls returned at.
func (t *judgeTally) timeline() *results.JudgeTimeline {
	t.mu.Lock()
	defer t.mu.Unlock()
	return results.NewJudgeTimeline(t.okAt, t.failedAt)
}

func (t *judgeTally) result() results.JudgeTally {
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
