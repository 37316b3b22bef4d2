package results

// The names of task 8's four limiters, as Counting's records give them.
const (
	LimiterFixed   = "fixed window"
	LimiterLog     = "sliding log"
	LimiterCounter = "sliding counter"
	LimiterBucket  = "token bucket"
)

// Counting is task 8's measurements of its four limiters on the real clock
// (scenario.MeasureCounting, printed by cmd/counting): the same traffic fed
// to each, and what each admitted.
type Counting struct {
	// Tree is the tree the limiters came from: "solutions/counting" or
	// "exercises/counting".
	Tree string `json:"tree"`
	// Clock is the clock the measurements ran on; empty is ClockWall.
	Clock Clock `json:"clock,omitempty"`
	// Boundary is the boundary burst, one record per limiter.
	Boundary []CountingBoundary `json:"boundary,omitempty"`
	// Return is the synchronised return, one record per limiter.
	Return []CountingReturn `json:"return,omitempty"`
	// Memory is the heap kept per client, one record per limiter and limit.
	Memory []CountingMemory `json:"memory,omitempty"`
	// Disagreement compares the sliding counter with the sliding log.
	Disagreement *CountingDisagreement `json:"disagreement,omitempty"`
	// Server is the floods of the fake GPU with each limiter in front of
	// shedding, one record per limiter, from the server's own records.
	Server []CountingServer `json:"server,omitempty"`
	// Warnings say what the machine did to the timing, such as a batch of
	// the boundary burst that ran across the boundary.
	Warnings []string `json:"warnings,omitempty"`
}

// CountingServer is one flood of the fake GPU with one limiter (Counting
// is "fixed", "log", "counter" or "bucket"; Limiter its name as the other
// records give it) keyed by X-Client-Id in front of task 2's shedding, as
// the server counted it. Run names the flood's run in the document.
type CountingServer struct {
	Limiter  string  `json:"limiter"`
	Run      string  `json:"run"`
	Limit    int     `json:"limit"`
	WindowMS float64 `json:"window_ms"`
	Burst    int     `json:"burst,omitempty"` // the token bucket's
	// RatePerClient is what each client sent, per second, for DurationS.
	RatePerClient float64 `json:"rate_per_client"`
	DurationS     float64 `json:"duration_s"`
	// Clients are the server's counts of each client key.
	Clients []CountingServerClient `json:"clients"`
	// Limited429 counts the 429s the server judged, BadRetryAfter those
	// whose Retry-After was wrong, Gone those sent to clients already gone
	// (not judged).
	Limited429    int64 `json:"limited_429"`
	BadRetryAfter int64 `json:"bad_retry_after"`
	Gone          int64 `json:"gone,omitempty"`
	// MaxRetryAfterS is the longest wait the limiter reported to any
	// client, in whole seconds rounded up: what its Retry-After said.
	MaxRetryAfterS int64 `json:"max_retry_after_s"`
}

// CountingServerClient is the server's count of one client key: admitted
// (any answer but 429) and limited (429) over SpanS seconds, from its first
// request to its last admission, and the most its limiter may admit in
// that span (Bound).
type CountingServerClient struct {
	Key      string  `json:"key"`
	Admitted int64   `json:"admitted"`
	Limited  int64   `json:"limited"`
	SpanS    float64 `json:"span_s"`
	Bound    float64 `json:"bound"`
}

// CountingBoundary is one limiter's answers to the boundary burst: one
// fresh client sends Limit requests just before a window boundary (aligned
// on the Unix epoch) and Limit more just after. Times are in milliseconds
// from the boundary, read around each call to Allow.
type CountingBoundary struct {
	Limiter  string  `json:"limiter"`
	Limit    int     `json:"limit"`
	WindowMS float64 `json:"window_ms"`
	Burst    int     `json:"burst,omitempty"` // the token bucket's
	Sent     int     `json:"sent"`
	// AdmittedBefore and AdmittedAfter count the admissions of each batch.
	AdmittedBefore int `json:"admitted_before"`
	AdmittedAfter  int `json:"admitted_after"`
	// FirstStartMS is when the first call began (negative), BeforeEndMS
	// when the first batch's last call returned, AfterStartMS when the
	// second batch's first call began and LastEndMS when the last call
	// returned. A clean trial has BeforeEndMS < 0 ≤ AfterStartMS.
	FirstStartMS float64 `json:"first_start_ms"`
	BeforeEndMS  float64 `json:"before_end_ms"`
	AfterStartMS float64 `json:"after_start_ms"`
	LastEndMS    float64 `json:"last_end_ms"`
}

// Admitted is the admissions of both batches.
func (b CountingBoundary) Admitted() int { return b.AdmittedBefore + b.AdmittedAfter }

// Straddled reports whether a batch ran across the boundary, so that which
// window each request fell in is not known.
func (b CountingBoundary) Straddled() bool { return b.BeforeEndMS >= 0 || b.AfterStartMS < 0 }

// CountingReturn is one limiter's synchronised return: Clients clients,
// each wanting more than its Limit per window, start at instants spread
// evenly over one window, send at once when admitted and retry exactly
// when the limiter's wait says. Bins counts admissions per bin of BinMS
// over the measured windows, after the warm-up ones.
type CountingReturn struct {
	Limiter  string  `json:"limiter"`
	Clients  int     `json:"clients"`
	Limit    int     `json:"limit"`
	WindowMS float64 `json:"window_ms"`
	BinMS    float64 `json:"bin_ms"`
	Bins     []int64 `json:"bins"`
	Admitted int64   `json:"admitted"` // in the measured windows
	Refused  int64   `json:"refused"`  // in the measured windows
	// PeakOverMean is the fullest bin over the mean bin; 0 with no
	// admissions.
	PeakOverMean float64 `json:"peak_over_mean"`
	// LateP99MS is the 99th percentile of how late the clients' retries
	// woke up after the wait they slept, over every limiter.
	LateP99MS float64 `json:"late_p99_ms"`
}

// CountingMemory is the heap one limiter keeps for Clients clients that
// each sent Limit requests within one window of WindowMS, measured after
// a garbage collection before and after.
type CountingMemory struct {
	Limiter        string  `json:"limiter"`
	Limit          int     `json:"limit"`
	WindowMS       float64 `json:"window_ms"`
	Clients        int     `json:"clients"`
	Admitted       int64   `json:"admitted"`
	HeapBytes      int64   `json:"heap_bytes"`
	BytesPerClient float64 `json:"bytes_per_client"`
}

// CountingDisagreement feeds a seeded random trace, Clients clients each
// sending near its Limit per window as a Poisson process, to a sliding
// counter and a sliding log at the same instants (one call right after the
// other), and counts the decisions that differ. Model* are the same counts
// for the two limiters written from their definitions in the harness, at
// the instants the calls were made.
type CountingDisagreement struct {
	Seed     uint64  `json:"seed"`
	Clients  int     `json:"clients"`
	Limit    int     `json:"limit"`
	WindowMS float64 `json:"window_ms"`
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	// Differ counts requests one admitted and the other refused;
	// CounterOnly those only the counter admitted, LogOnly those only the
	// log admitted.
	Differ      int64 `json:"differ"`
	CounterOnly int64 `json:"counter_only"`
	LogOnly     int64 `json:"log_only"`
	// LogAdmitted and CounterAdmitted count each limiter's admissions.
	LogAdmitted     int64 `json:"log_admitted"`
	CounterAdmitted int64 `json:"counter_admitted"`
	// ModelDiffer is Differ for the definitions on the same instants.
	ModelDiffer int64 `json:"model_differ"`
}

// Share is the share of requests on which the two limiters differed.
func (d *CountingDisagreement) Share() float64 {
	if d.Requests == 0 {
		return 0
	}
	return float64(d.Differ) / float64(d.Requests)
}

// ModelShare is Share for the definitions.
func (d *CountingDisagreement) ModelShare() float64 {
	if d.Requests == 0 {
		return 0
	}
	return float64(d.ModelDiffer) / float64(d.Requests)
}
