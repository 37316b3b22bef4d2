package provider

import "time"

// JudgeSchema names the format of the document cmd/judge prints.
const JudgeSchema = "ratelab.judge/v1"

// A JudgeReport is what cmd/judge prints on stdout: one JSON document for
// one run of one or more strategies against the same fake API. Every count
// a check should rely on comes from the API's own /stats, per strategy key.
type JudgeReport struct {
	Schema string `json:"schema"` // JudgeSchema
	// Client is the tree the polite strategies took PoliteClient from:
	// "solutions/llmclient" or "exercises/llmclient".
	Client string `json:"client"`
	// URL is the API's base URL; InProcess says whether cmd/judge started
	// it itself.
	URL       string `json:"url"`
	InProcess bool   `json:"in_process"`
	// Limits are the API's limits, read from its /stats.
	Limits     Limits           `json:"limits"`
	Workload   Workload         `json:"workload"`
	Strategies []StrategyResult `json:"strategies"`
}

// Workload describes the job every strategy runs: N relevance judgments,
// each a prompt of PromptTokens tokens of which the first PrefixTokens (the
// instructions, in the system prompt) are the same for all.
type Workload struct {
	N            int `json:"n"`
	PromptTokens int `json:"prompt_tokens"`
	PrefixTokens int `json:"prefix_tokens"`
	MaxTokens    int `json:"max_tokens"`
	// MaxInFlight is what the polite strategies give PoliteClient.
	MaxInFlight int `json:"max_in_flight"`
}

// A StrategyResult is one strategy's run. Each strategy uses its own API key
// (Key), so its limits and counts are its own.
type StrategyResult struct {
	// Name is naive, sleep1, polite or polite-cached.
	Name string `json:"name"`
	Key  string `json:"key"`
	N    int    `json:"n"`

	// From the API's /stats for Key:
	//
	// Completed counts judgments answered 200, Attempts every request sent,
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

	// TimedOut says the strategy was stopped at the time limit.
	TimedOut bool `json:"timed_out"`
	// Client is what the strategy's calls returned, for information only.
	Client ClientTally `json:"client"`
	// Timeline is when the strategy's calls returned, on the judge's own
	// clock. Reports before it was recorded have none.
	Timeline *Timeline `json:"timeline,omitempty"`
	// Server is the API's full count for Key.
	Server KeyStats `json:"server"`
	// Error, if set, says why the strategy could not run or finish
	// normally, such as a panic in the client.
	Error string `json:"error,omitempty"`
}

// ClientTally is what one strategy's calls returned, as the caller saw it.
type ClientTally struct {
	OK         int `json:"ok"`         // returned a message
	Failed     int `json:"failed"`     // returned an error
	Unfinished int `json:"unfinished"` // still running at the time limit
	// Errors counts the errors by kind, such as "429 rate_limit_error".
	Errors map[string]int `json:"errors,omitempty"`
}

// TimelineBin is the width of a Timeline's bins: a quarter of a second,
// as the floods' and storms' timelines. The shortest job (the cached one,
// about 5 s) still gets some twenty points, and sleep1's waves, a second
// apart, show as steps.
const TimelineBin = 250 * time.Millisecond

// MaxTimelineBins is the most bins a Timeline holds: five minutes of
// TimelineBin. A longer run doubles its bins' width until they fit, so the
// document stays small at any time limit.
const MaxTimelineBins = 1200

// A Timeline counts one strategy's calls by when they returned, measured
// by the judge from the strategy's first request: bin k holds the calls
// that returned in [k·BinMS, (k+1)·BinMS) milliseconds. OK counts calls
// that returned a message, Failed those that returned an error (nil when
// none did); calls still running at the time limit are in neither. The
// running sum of OK is the number of judgments done over time. It is for
// the report: no check relies on it.
type Timeline struct {
	BinMS  float64 `json:"bin_ms"`
	OK     []int64 `json:"ok"`
	Failed []int64 `json:"failed,omitempty"`
}

// NewTimeline bins ok and failed, the times after the strategy's first
// request at which its calls returned a message or an error, in bins of
// TimelineBin, or of TimelineBin doubled as often as it takes to fit in
// MaxTimelineBins. A time below zero counts in the first bin. It returns
// nil when there is no time at all.
func NewTimeline(ok, failed []time.Duration) *Timeline {
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
	bin := TimelineBin
	for last/bin+1 > MaxTimelineBins {
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
	tl := &Timeline{BinMS: float64(bin) / float64(time.Millisecond), OK: count(ok), Failed: count(failed)}
	if tl.OK == nil {
		tl.OK = make([]int64, n)
	}
	return tl
}
