package results

// The server's own judgement of what it answered, beyond its counters: the
// Retry-After of every refusal, the answers to each client, and the serving
// process's memory and CPU. The fake GPU records them from what passes
// through its hooks (fakegpu's observe.go), so the code under test can
// neither print nor fake them.

// Refusal kinds, as the server classifies its 429 and 503 answers.
const (
	RefusalShed    = "shed"    // 503 before any slot was taken
	RefusalExpired = "expired" // 503 after a slot was taken (the deadline)
	RefusalLimited = "limited" // 429 from the client's bucket
)

// MaxBadRefusals is how many wrong refusals a server keeps as examples.
const MaxBadRefusals = 5

// Refusals is the server's judgement of the Retry-After header of every
// refusal it answered while its client still waited, by kind.
type Refusals struct {
	Shed    RefusalCounts `json:"shed"`
	Expired RefusalCounts `json:"expired"`
	Limited RefusalCounts `json:"limited"`
	// Bad holds the first few refusals judged wrong (at most
	// MaxBadRefusals), in the order they were answered. Only the detailed
	// stats (GET /stats?detail=1) carry them.
	Bad []BadRefusal `json:"bad,omitempty"`
}

// Kind returns the counts of refusal kind k (RefusalShed, ...), or nil.
func (r *Refusals) Kind(k string) *RefusalCounts {
	switch k {
	case RefusalShed:
		return &r.Shed
	case RefusalExpired:
		return &r.Expired
	case RefusalLimited:
		return &r.Limited
	}
	return nil
}

// Judged returns the refusals judged, and of those the wrong ones, over
// every kind.
func (r *Refusals) Judged() (judged, bad int64) {
	for _, c := range []RefusalCounts{r.Shed, r.Expired, r.Limited} {
		judged += c.Judged
		bad += c.Bad
	}
	return judged, bad
}

// RefusalCounts counts the refusals of one kind.
type RefusalCounts struct {
	// Judged counts the refusals whose Retry-After was judged.
	Judged int64 `json:"judged"`
	// Bad counts judged refusals whose Retry-After was missing, not whole
	// seconds of at least 1, or not the value the server expected.
	Bad int64 `json:"bad"`
	// Gone counts refusals not judged, because their client had already
	// gone or the server was closing: nobody reads those answers.
	Gone int64 `json:"gone"`
}

// BadRefusal is one refusal whose Retry-After the server judged wrong.
type BadRefusal struct {
	// Kind is RefusalShed, RefusalExpired or RefusalLimited.
	Kind string `json:"kind"`
	// Status is the HTTP status answered: 429 or 503.
	Status int `json:"status"`
	// Header is the Retry-After sent, "" when there was none.
	Header string `json:"header"`
	// WantMinS and WantMaxS are the values, in whole seconds, the server
	// would have accepted; equal when one value was right, WantMaxS 0 when
	// any value of at least WantMinS was. Both are 0 when no Retry-After
	// could be right (a 429 the limiter never asked for).
	WantMinS int64 `json:"want_min_s"`
	WantMaxS int64 `json:"want_max_s"`
	// Why says what the expected value came from, such as "the line of 300
	// this request saw drains in 3.75s".
	Why string `json:"why"`
}

// ClientStats are the answers the server gave each client key (the
// X-Client-Id header, or else the client's address), for the keys it
// tracks. The server tracks at most Capacity keys at once: when its table
// is full it forgets the keys that sent a single request, and if there are
// none, it counts a new key's requests in Untracked only. Only the
// detailed stats (GET /stats?detail=1) carry them.
type ClientStats struct {
	// Capacity is the most keys tracked at once.
	Capacity int `json:"capacity"`
	// Clients holds every key tracked at the end, most requests first.
	Clients []ClientCount `json:"clients"`
	// NewKeys counts the keys the table took in while they had no entry:
	// clients it had not seen, or that it had forgotten.
	NewKeys int64 `json:"new_keys"`
	// NewLimited counts the first requests of those keys that were
	// answered 429, whether or not the table still held the key then. A new client meets a full bucket, so a correct limiter
	// keeps this at 0 whenever the burst is at least 1.
	NewLimited int64 `json:"new_limited"`
	// Forgotten counts the keys dropped from a full table.
	Forgotten int64 `json:"forgotten"`
	// Untracked counts the requests of keys that found the table full.
	Untracked int64 `json:"untracked"`
	// OtherKeys counts the requests whose admission code asked the
	// limiter about a key other than the request's own (Job.ClientKey),
	// and OtherKeyExample describes the first. ExtraTokens counts the
	// requests granted more than one token in all. A request takes one
	// token from its own client's bucket, so both stay 0.
	OtherKeys       int64  `json:"other_keys"`
	OtherKeyExample string `json:"other_key_example,omitempty"`
	ExtraTokens     int64  `json:"extra_tokens"`
}

// Client returns the count of key, or nil if it is not tracked.
func (c *ClientStats) Client(key string) *ClientCount {
	if c == nil {
		return nil
	}
	for i := range c.Clients {
		if c.Clients[i].Key == key {
			return &c.Clients[i]
		}
	}
	return nil
}

// ClientCount is what the server answered one client key, from the moment
// it began tracking the key.
type ClientCount struct {
	Key string `json:"key"`
	// Requests counts the key's answered requests.
	Requests int64 `json:"requests"`
	// Limited counts its 429 answers.
	Limited int64 `json:"limited"`
	// Admitted counts its answers other than 429: the requests its bucket
	// let through, whatever happened to them next.
	Admitted int64 `json:"admitted"`
	// SpanS is the time in seconds from the key's first request reaching
	// the server to the last admission: the moment the limiter's last
	// grant to it returned (or, for a request admitted without asking the
	// limiter, its arrival). Over that span a bucket of burst b refilling
	// at r lets at most b + r·SpanS requests through.
	SpanS float64 `json:"span_s"`
	// MaxWaitMS is the longest wait the limiter reported to the key when
	// it refused, in milliseconds.
	MaxWaitMS float64 `json:"max_wait_ms,omitempty"`
}

// MemoryStats is the serving process's memory after a full garbage
// collection (GET /stats?gc=1), in bytes.
type MemoryStats struct {
	// HeapBytes is the live heap (runtime.MemStats.HeapAlloc after
	// runtime.GC, twice, so sync.Pools are emptied).
	HeapBytes int64 `json:"heap_bytes"`
	// StackBytes is the memory of goroutine stacks (StackInuse).
	StackBytes int64 `json:"stack_bytes"`
	// Goroutines is how many goroutines the process had, MaxGoroutines
	// the most it had had by then (see ServerStats.MaxGoroutines).
	Goroutines    int64 `json:"goroutines"`
	MaxGoroutines int64 `json:"max_goroutines"`
	// Received is how many /generate requests the server had received by
	// then.
	Received int64 `json:"received"`
}

// Total returns the heap and the stacks together.
func (m *MemoryStats) Total() int64 { return m.HeapBytes + m.StackBytes }

// IdleStats is the CPU a server process used while nobody called it, after
// its floods had drained.
type IdleStats struct {
	// WallS is how long the grader left it alone, in seconds.
	WallS float64 `json:"wall_s"`
	// CPUS is the CPU time (user and system) it used meanwhile, in seconds.
	CPUS float64 `json:"cpu_s"`
	// Goroutines is how many goroutines it had at the end.
	Goroutines int64 `json:"goroutines"`
}

// Share returns the CPU used per second of wall time: 1 is one core kept
// busy the whole time.
func (s *IdleStats) Share() float64 {
	if s.WallS <= 0 {
		return 0
	}
	return s.CPUS / s.WallS
}
