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

	// CPUS is the CPU time, user and system, of the process serving the
	// stats since it started, in seconds; 0 where it is unknown. In-process
	// servers (task 1) leave it out: their process is the grader's.
	CPUS float64 `json:"cpu_s,omitempty"`
	// Goroutines is how many goroutines that process has.
	Goroutines int64 `json:"goroutines,omitempty"`
	// MaxGoroutines is the most goroutines that process had, sampled as
	// each request arrived (protected modes). Go keeps a descriptor of
	// about 480 bytes per goroutine it ever had at once, so the heap
	// grows with it.
	MaxGoroutines int64 `json:"max_goroutines,omitempty"`
	// Refusals judges the Retry-After of every 429 and 503 in the
	// protected modes; nil in mode none, which refuses nothing.
	Refusals *Refusals `json:"refusals,omitempty"`
	// Clients counts the answers per client key; only GET
	// /stats?detail=1 carries it.
	Clients *ClientStats `json:"clients,omitempty"`
	// Calls holds the attempts of each call that named itself with
	// X-Call-Id (task 4's storms); only GET /stats?detail=1 carries it.
	Calls *CallStats `json:"calls,omitempty"`
	// Memory is the process's live memory after a garbage collection;
	// only GET /stats?gc=1 carries it.
	Memory *MemoryStats `json:"memory,omitempty"`
}

// SumWorkers returns the counters of several server workers that share one
// port (task 6) as one server's: counts add up, MaxWaiting is the longest
// any worker's line was. The detail, memory and process figures are left
// out: they belong to each worker.
func SumWorkers(each []ServerStats) ServerStats {
	var sum ServerStats
	for _, st := range each {
		sum.Received += st.Received
		sum.Finished += st.Finished
		sum.Waiting += st.Waiting
		sum.MaxWaiting = max(sum.MaxWaiting, st.MaxWaiting)
		sum.InFlight += st.InFlight
		sum.Shed += st.Shed
		sum.Limited += st.Limited
		sum.Expired += st.Expired
		sum.Dead += st.Dead
		sum.Leaked += st.Leaked
		sum.FailOpen += st.FailOpen
	}
	return sum
}
