package results

import "time"

// JudgeSchema names the format of a JudgeReport.
const JudgeSchema = "ratelab.judge/v1"

// A JudgeReport is task 5's judge (scenario.Judge, printed by cmd/judge):
// one run of one or more strategies against the same fake Messages API.
// Every count a check should rely on comes from the API's own /stats, per
// strategy key.
type JudgeReport struct {
	Schema string `json:"schema"` // JudgeSchema
	// Client is the tree the polite strategies took PoliteClient from:
	// "solutions/llmclient" or "exercises/llmclient".
	Client string `json:"client"`
	// URL is the API's base URL; InProcess says whether the judge started
	// it itself.
	URL       string `json:"url"`
	InProcess bool   `json:"in_process"`
	// Clock is the clock the judge ran on; empty is ClockWall.
	Clock Clock `json:"clock,omitempty"`
	// Limits are the API's limits, read from its /stats.
	Limits     APILimits       `json:"limits"`
	Workload   JudgeWorkload   `json:"workload"`
	Strategies []JudgeStrategy `json:"strategies"`
}

// JudgeWorkload describes the job every strategy runs: N relevance
// judgments, each a prompt of PromptTokens tokens of which the first
// PrefixTokens (the instructions, in the system prompt) are the same for
// all.
type JudgeWorkload struct {
	N            int `json:"n"`
	PromptTokens int `json:"prompt_tokens"`
	PrefixTokens int `json:"prefix_tokens"`
	MaxTokens    int `json:"max_tokens"`
	// MaxInFlight is what the polite strategies give PoliteClient.
	MaxInFlight int `json:"max_in_flight"`
}

// A JudgeStrategy is one strategy's run. Each strategy uses its own API key
// (Key), so its limits and counts are its own.
type JudgeStrategy struct {
	// Name is naive, sleep1, polite, polite-cached, polite-faults or batch.
	Name string `json:"name"`
	Key  string `json:"key"`
	N    int    `json:"n"`
	// MaxInFlight is the limit the polite client was given (0 for the
	// other strategies and in reports from before it was recorded), and
	// AttemptTimeoutMS its timeout of one attempt, in milliseconds, where
	// the strategy set one.
	MaxInFlight      int     `json:"max_in_flight,omitempty"`
	AttemptTimeoutMS float64 `json:"attempt_timeout_ms,omitempty"`

	// From the API's /stats for Key:
	//
	// Completed counts judgments answered 200 (or succeeded in a batch),
	// Attempts every request sent (batched requests included),
	// Rejected429 every 429 and Overloaded529 every 529.
	// RejectedFraction is Rejected429 / Attempts, and Lost is N − Completed:
	// judgments the strategy gave up on or did not finish in time.
	Completed        int64   `json:"completed"`
	Attempts         int64   `json:"attempts"`
	Rejected429      int64   `json:"rejected_429"`
	Overloaded529    int64   `json:"overloaded_529"`
	RejectedFraction float64 `json:"rejected_fraction"`
	Lost             int64   `json:"lost"`

	// WallSeconds runs from the strategy's first request to its last
	// answer (or to the time limit).
	WallSeconds float64 `json:"wall_seconds"`
	// MostSeconds runs from the strategy's first request to the answer
	// that completed all but JudgeTailShare of its N judgments (0 if fewer
	// were completed, or in reports from before it was recorded). A
	// judgment refused with 429 waits out a Retry-After of at least a
	// second, so the few refused near the end can stretch WallSeconds of a
	// five-second run by a fifth; MostSeconds leaves them out.
	MostSeconds float64 `json:"most_seconds,omitempty"`
	// MinSeconds is the theoretical minimum, max(RequestsMinSeconds,
	// InputTokensMinSeconds): N over the request rate, and the uncached
	// input tokens the workload needs (each prefix written to the cache
	// once, if cached) over the input-token rate. It ignores the buckets'
	// initial burst and the last reply's latency, both small. MinBoundBy
	// names the larger term: "requests" or "input_tokens".
	MinSeconds            float64 `json:"min_seconds"`
	RequestsMinSeconds    float64 `json:"requests_min_seconds"`
	InputTokensMinSeconds float64 `json:"input_tokens_min_seconds"`
	MinBoundBy            string  `json:"min_bound_by"`
	// Ratio is WallSeconds / MinSeconds.
	Ratio float64 `json:"ratio"`
	// CostUSD is what the strategy's requests cost at the API's prices, in
	// US dollars: Server.CostUSD + Server.BatchCostUSD, batched tokens at
	// half price. Reports before prices have none (0).
	CostUSD float64 `json:"cost_usd,omitempty"`

	// TimedOut says the strategy was stopped at the time limit.
	TimedOut bool `json:"timed_out"`
	// Client is what the strategy's calls returned, for information only.
	Client JudgeTally `json:"client"`
	// Timeline is when the strategy's calls returned, on the judge's own
	// clock. Reports before it was recorded have none.
	Timeline *JudgeTimeline `json:"timeline,omitempty"`
	// Server is the API's full count for Key.
	Server APIKeyStats `json:"server"`
	// Error, if set, says why the strategy could not run or finish
	// normally, such as a panic in the client.
	Error string `json:"error,omitempty"`
}

// JudgeTally is what one strategy's calls returned, as the caller saw it.
type JudgeTally struct {
	OK         int `json:"ok"`         // returned a message
	Failed     int `json:"failed"`     // returned an error
	Unfinished int `json:"unfinished"` // still running at the time limit
	// Errors counts the errors by kind, such as "429 rate_limit_error".
	Errors map[string]int `json:"errors,omitempty"`
}

// JudgeTailShare is the share of a strategy's judgments that
// JudgeStrategy.MostSeconds leaves out: the last 2%, as many as a polite
// client may see refused (task 5's bound on 429s).
const JudgeTailShare = 0.02

// JudgeTimelineBin is the width of a JudgeTimeline's bins: a quarter of a
// second, as the floods' and storms' timelines. The shortest job (the
// cached one, about 5 s) still gets some twenty points, and sleep1's
// waves, a second apart, show as steps.
const JudgeTimelineBin = 250 * time.Millisecond

// MaxJudgeTimelineBins is the most bins a JudgeTimeline holds: five
// minutes of JudgeTimelineBin. A longer run doubles its bins' width until
// they fit, so the document stays small at any time limit.
const MaxJudgeTimelineBins = 1200

// A JudgeTimeline counts one strategy's calls by when they returned,
// measured by the judge from the strategy's first request: bin k holds the
// calls that returned in [k·BinMS, (k+1)·BinMS) milliseconds. OK counts calls
// that returned a message, Failed those that returned an error (nil when
// none did); calls still running at the time limit are in neither. The
// running sum of OK is the number of judgments done over time. It is for
// the report: no check relies on it.
type JudgeTimeline struct {
	BinMS  float64 `json:"bin_ms"`
	OK     []int64 `json:"ok"`
	Failed []int64 `json:"failed,omitempty"`
}

// NewJudgeTimeline bins ok and failed, the times after the strategy's first
// request at which its calls returned a message or an error, in bins of
// JudgeTimelineBin, or of JudgeTimelineBin doubled as often as it takes to
// fit in MaxJudgeTimelineBins. A time below zero counts in the first bin.
// It returns nil when there is no time at all.
func NewJudgeTimeline(ok, failed []time.Duration) *JudgeTimeline {
	if len(ok) == 0 && len(failed) == 0 {
		return nil
	}
	last := time.Duration(0)
	for _, d := range ok {
		last = max(last, d)
	}
	for _, d := range failed {
		last = max(last, d)
	}
	bin := JudgeTimelineBin
	for last/bin+1 > MaxJudgeTimelineBins {
		bin *= 2
	}
	n := int(last/bin) + 1
	count := func(at []time.Duration) []int64 {
		if len(at) == 0 {
			return nil
		}
		c := make([]int64, n)
		for _, d := range at {
			c[max(0, int(d/bin))]++
		}
		return c
	}
	tl := &JudgeTimeline{BinMS: float64(bin) / float64(time.Millisecond), OK: count(ok), Failed: count(failed)}
	if tl.OK == nil {
		tl.OK = make([]int64, n)
	}
	return tl
}

// APILimits are the fake Messages API's rate limits (package provider), as
// its /stats reports them.
type APILimits struct {
	RequestsPerMinute     float64 `json:"requests_per_minute"`
	InputTokensPerMinute  float64 `json:"input_tokens_per_minute"`
	OutputTokensPerMinute float64 `json:"output_tokens_per_minute"`
	// BurstMS is how much refill each bucket holds, in milliseconds
	// (provider.Config.Burst).
	BurstMS float64 `json:"burst_ms"`
	// RequestBurst, InputTokenBurst and OutputTokenBurst are what each
	// bucket holds when full.
	RequestBurst     float64 `json:"request_burst"`
	InputTokenBurst  float64 `json:"input_token_burst"`
	OutputTokenBurst float64 `json:"output_token_burst"`
	// BatchRequestsPerSecond is how fast the Message Batches API processes
	// one key's batched requests; MaxBatchRequests the most requests in one
	// batch; MaxBatchQueue the most batched requests a key may have not yet
	// processed. Reports before batches have zeros.
	BatchRequestsPerSecond float64 `json:"batch_requests_per_second,omitempty"`
	MaxBatchRequests       int     `json:"max_batch_requests,omitempty"`
	MaxBatchQueue          int     `json:"max_batch_queue,omitempty"`
	// Prices are what the API charges. Reports before prices have zeros.
	Prices APIPrices `json:"prices,omitzero"`
}

// APIPrices are what the fake Messages API charges, in US dollars per
// million tokens, by kind of token. Batched tokens cost
// BatchPriceFraction of these. One cache-write price serves both TTLs
// (the real API charges an hour's write more than five minutes').
type APIPrices struct {
	InputUSDPerMTok      float64 `json:"input_usd_per_mtok"`
	OutputUSDPerMTok     float64 `json:"output_usd_per_mtok"`
	CacheWriteUSDPerMTok float64 `json:"cache_write_usd_per_mtok"`
	CacheReadUSDPerMTok  float64 `json:"cache_read_usd_per_mtok"`
}

// BatchPriceFraction is what a batched token costs as a fraction of the
// same token sent to POST /v1/messages: half, as the real API's.
const BatchPriceFraction = 0.5

// Cost returns what the tokens cost at p, in US dollars: each kind times
// its price, over a million.
func (p APIPrices) Cost(input, cacheWrite, cacheRead, output int64) float64 {
	return (float64(input)*p.InputUSDPerMTok + float64(cacheWrite)*p.CacheWriteUSDPerMTok +
		float64(cacheRead)*p.CacheReadUSDPerMTok + float64(output)*p.OutputUSDPerMTok) / 1e6
}

// APIKeyStats is what one API key did, as the fake Messages API (package
// provider) saw it and reports it in its /stats. Counts start at zero when
// the key is first used.
type APIKeyStats struct {
	// Requests counts POST /v1/messages with this key, whatever the answer.
	Requests int64 `json:"requests"`
	// Completed counts 200 answers: replies delivered.
	Completed int64 `json:"completed"`
	// RateLimited counts 429 rate_limit_error answers from a bucket (not
	// the spend limit), each with a retry-after.
	RateLimited int64 `json:"rate_limited"`
	// LimitedByRequests, LimitedByInputTokens and LimitedByOutputTokens
	// count the 429s that bucket refused; one 429 may count under several.
	LimitedByRequests     int64 `json:"limited_by_requests"`
	LimitedByInputTokens  int64 `json:"limited_by_input_tokens"`
	LimitedByOutputTokens int64 `json:"limited_by_output_tokens"`
	// SpendLimited counts spend-limit 429s.
	SpendLimited int64 `json:"spend_limited"`
	// Overloaded counts 529 overloaded_error answers.
	Overloaded int64 `json:"overloaded"`
	// Invalid counts 400 (and 413) answers.
	Invalid int64 `json:"invalid"`
	// Cancelled counts admitted requests whose client left before the reply.
	Cancelled int64 `json:"cancelled"`
	// InFlight is how many admitted requests are being answered now, and
	// MaxInFlight the most there ever were at once.
	InFlight    int64 `json:"in_flight"`
	MaxInFlight int64 `json:"max_in_flight"`
	// InputTokens, CacheCreationInputTokens and CacheReadInputTokens sum the
	// usage of every admitted request. The input-token limit was charged
	// InputTokens + CacheCreationInputTokens.
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// OutputTokens sums the output tokens generated, cancelled replies
	// included.
	OutputTokens int64 `json:"output_tokens"`
	// CountTokensCalls counts POST /v1/messages/count_tokens, which no limit
	// applies to.
	CountTokensCalls int64 `json:"count_tokens_calls"`
	// CostUSD is what the requests to POST /v1/messages cost at the API's
	// prices, in US dollars: the token counts above times their prices.
	CostUSD float64 `json:"cost_usd,omitempty"`

	// Batches counts the Message Batches the key created, BatchRequests the
	// requests in them. BatchSucceeded, BatchErrored and BatchCanceled count
	// the batched requests processed so far by their result.
	Batches        int64 `json:"batches,omitempty"`
	BatchRequests  int64 `json:"batch_requests,omitempty"`
	BatchSucceeded int64 `json:"batch_succeeded,omitempty"`
	BatchErrored   int64 `json:"batch_errored,omitempty"`
	BatchCanceled  int64 `json:"batch_canceled,omitempty"`
	// BatchInputTokens and BatchOutputTokens sum the usage of the batched
	// requests that succeeded (batches do not cache in this fake), and
	// BatchCostUSD is what they cost: BatchPriceFraction of the full price.
	BatchInputTokens  int64   `json:"batch_input_tokens,omitempty"`
	BatchOutputTokens int64   `json:"batch_output_tokens,omitempty"`
	BatchCostUSD      float64 `json:"batch_cost_usd,omitempty"`

	// Faults is what the key's fault plan did (see APIFaultStats); nil
	// for a key that had none.
	Faults *APIFaultStats `json:"faults,omitempty"`
}

// TooManyRequests returns every 429 the key got: rate limits and the spend
// limit.
func (k APIKeyStats) TooManyRequests() int64 { return k.RateLimited + k.SpendLimited }

// UncachedInputTokens returns what the input-token limit was charged.
func (k APIKeyStats) UncachedInputTokens() int64 { return k.InputTokens + k.CacheCreationInputTokens }
