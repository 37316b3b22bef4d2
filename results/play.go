package results

// BucketPlay is one of the lesson's token-bucket plays measured on the fake
// GPU: one client's arrivals against a per-client bucket (task 3's limiter
// in front of task 2's shedding), counted by the server.
type BucketPlay struct {
	// Name is the play: "steady" (6/s against a refill of 4/s) or "spikes"
	// (30 at once against a burst of 10).
	Name string `json:"name"`
	// Clock is the clock the play's time came from; empty is ClockWall.
	Clock Clock `json:"clock,omitempty"`
	// Pattern is the client's arrivals; nil for a constant OfferedRPS.
	Pattern    *Pattern `json:"pattern,omitempty"`
	OfferedRPS float64  `json:"offered_rps"` // the mean rate
	DurationS  float64  `json:"duration_s"`
	// BucketRate (tokens per second) and BucketBurst (tokens) configure
	// the client's bucket.
	BucketRate  float64 `json:"bucket_rate"`
	BucketBurst float64 `json:"bucket_burst"`

	// Sent is how many requests the server received.
	Sent int64 `json:"sent"`
	// Admitted counts the server's answers other than 429, Refused its
	// 429s: the bucket's decisions, from the server's own counters.
	Admitted int64 `json:"admitted"`
	Refused  int64 `json:"refused"`
	// OK counts the 200s the client saw (the admitted that were also
	// served in time).
	OK int64 `json:"ok"`
	// Predicted is the admitted count of the schedule replayed against the
	// bucket (model.BucketAdmits): exact in virtual time.
	Predicted int64 `json:"predicted"`
	// Bound is burst + rate × the time from the first request to the
	// last: no bucket admits more.
	Bound float64 `json:"bound"`

	// AdmittedOverTime and RefusedOverTime count the answers per BinS
	// seconds of due time, from the start of the flood.
	BinS             float64 `json:"bin_s"`
	AdmittedOverTime []int64 `json:"admitted_over_time"`
	RefusedOverTime  []int64 `json:"refused_over_time"`
}
