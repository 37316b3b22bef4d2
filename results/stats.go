package results

// ServerStats are the fake GPU server's own observations, as its GET /stats
// reports them (fakegpu produces them). All counts start at zero when the
// server is created.
type ServerStats struct {
	// Received counts /generate requests that reached the handler.
	Received int64 `json:"received"`
	// Finished counts requests whose work was completed, including dead ones.
	Finished int64 `json:"finished"`
	// Waiting is how many requests wait for a slot right now.
	Waiting int64 `json:"waiting"`
	// MaxWaiting is the longest the line has been.
	MaxWaiting int64 `json:"max_waiting"`
	// InFlight is how many slots are held right now.
	InFlight int64 `json:"in_flight"`
	// Shed counts 503 answers given without ever taking a slot.
	Shed int64 `json:"shed"`
	// Limited counts 429 answers.
	Limited int64 `json:"limited"`
	// Expired counts 503 answers given after taking a slot, because the
	// request waited past the deadline.
	Expired int64 `json:"expired"`
	// Dead counts work completed after its client had already gone: GPU time
	// spent on answers nobody receives.
	Dead int64 `json:"dead"`
	// Leaked counts requests whose handler returned still holding a slot.
	// A leaked slot is lost for good; a correct server keeps this at 0.
	Leaked int64 `json:"leaked"`
	// FailOpen counts limiter decisions made locally because the shared
	// store (Redis) did not answer: the limiter failed open (task 6).
	FailOpen int64 `json:"fail_open,omitempty"`
}
