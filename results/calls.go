package results

// CallStats are the attempts the fake GPU server saw of each call, keyed by
// the call's X-Call-Id header: every attempt of one call, retries
// included, carries the same id (a retry loop resends one request, so a
// header set once survives). The server keeps a fixed record per call and
// at most Capacity calls; the attempts of a call that finds the table full
// are counted in Untracked only. Requests without the header are not
// recorded. Only the detailed stats (GET /stats?detail=1) of a protected
// mode carry them.
type CallStats struct {
	// Capacity is the most calls recorded.
	Capacity int `json:"capacity"`
	// Calls holds every call recorded, by id.
	Calls []CallRecord `json:"calls"`
	// Untracked counts the attempts of calls that found the table full.
	Untracked int64 `json:"untracked"`
}

// CallRecord is what the server saw of one call's attempts. An attempt is
// open from its arrival until the server commits its answer (the status
// line, before any byte leaves) or notices that the client hung up.
type CallRecord struct {
	ID string `json:"id"`
	// Attempts counts the attempts that arrived.
	Attempts int64 `json:"attempts"`
	// MaxOpen is the most attempts of the call open at once: 1 for a retry
	// loop, which never sends an attempt before the previous one ended.
	MaxOpen int64 `json:"max_open"`
	// Gaps counts the attempts that arrived after an earlier one's answer,
	// with none open; MinGapMS is the shortest time from that answer to the
	// next arrival, in milliseconds (0 when Gaps is 0).
	Gaps     int64   `json:"gaps"`
	MinGapMS float64 `json:"min_gap_ms"`
	// RetryAfterReturns counts the attempts that arrived after an answer
	// that carried a Retry-After in whole seconds; Early counts those that
	// arrived sooner after that answer than the header said.
	RetryAfterReturns int64 `json:"retry_after_returns"`
	Early             int64 `json:"early"`
	// The return that fell furthest short of its Retry-After (or came
	// latest past it, if none fell short): the header, in seconds, and the
	// time from that answer to the next arrival, in milliseconds. Set when
	// RetryAfterReturns > 0.
	WorstRetryAfterS int64   `json:"worst_retry_after_s,omitempty"`
	WorstGapMS       float64 `json:"worst_gap_ms,omitempty"`
}

// CallSummary is what the grader keeps of a storm's CallStats: the worst
// call for each property the storm checks judge, as the server saw it.
type CallSummary struct {
	// Calls counts the calls the server recorded; Attempts their attempts;
	// Untracked the attempts of calls that found its table full.
	Calls     int   `json:"calls"`
	Attempts  int64 `json:"attempts"`
	Untracked int64 `json:"untracked,omitempty"`
	// MostAttempts is the most attempts of one call (MostAttemptsCall).
	MostAttempts     int64  `json:"most_attempts"`
	MostAttemptsCall string `json:"most_attempts_call,omitempty"`
	// MaxOpen is the most attempts of one call open at once (MaxOpenCall),
	// Overlapping the calls that had two or more open at once.
	MaxOpen     int64  `json:"max_open"`
	MaxOpenCall string `json:"max_open_call,omitempty"`
	Overlapping int    `json:"overlapping"`
	// MinGapMS is the shortest time, over every call, from an attempt's
	// answer to the next attempt's arrival; -1 if no call sent a retry
	// after an answer.
	MinGapMS float64 `json:"min_gap_ms"`
	// RetryAfterReturns counts the attempts that arrived after an answer
	// with a Retry-After. EarlyCalls counts the calls whose worst such
	// return came more than ToleranceMS before the header's time (capped
	// at the clients' Cap, as the contract caps it). The worst of all is
	// WorstCall's: told WorstRetryAfterS, back after WorstGapMS.
	RetryAfterReturns int64   `json:"retry_after_returns"`
	EarlyCalls        int     `json:"early_calls"`
	ToleranceMS       float64 `json:"tolerance_ms"`
	WorstCall         string  `json:"worst_call,omitempty"`
	WorstRetryAfterS  int64   `json:"worst_retry_after_s,omitempty"`
	WorstGapMS        float64 `json:"worst_gap_ms,omitempty"`
	// WorstEarlyMS is how far WorstCall's return fell short of the
	// header's time, capped (negative: it came that much later).
	WorstEarlyMS float64 `json:"worst_early_ms,omitempty"`
}
