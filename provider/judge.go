package provider

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
