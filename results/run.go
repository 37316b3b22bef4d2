package results

import (
	"encoding/json"
	"fmt"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Outcome classifies one request of a flood.
type Outcome string

// The outcomes a flood records, each with its own latency histogram.
const (
	OutcomeOK          Outcome = "200"
	OutcomeTooMany     Outcome = "429"
	OutcomeUnavailable Outcome = "503"
	OutcomeTimeout     Outcome = "timeout" // the client gave up after its timeout
	OutcomeOther       Outcome = "other"   // any other status or error
)

// Outcomes lists every outcome in report order.
var Outcomes = []Outcome{OutcomeOK, OutcomeTooMany, OutcomeUnavailable, OutcomeTimeout, OutcomeOther}

// Run is one open-loop flood: what was offered, what came back, and what
// the server observed while it happened.
type Run struct {
	Name string `json:"name"`
	// Task is the task that ran the flood, such as "task2".
	Task       string  `json:"task,omitempty"`
	Target     string  `json:"target"`      // base URL flooded, always loopback
	OfferedRPS float64 `json:"offered_rps"` // λ, requests per second
	DurationS  float64 `json:"duration_s"`  // how long requests were sent
	TimeoutS   float64 `json:"timeout_s"`   // the client's timeout

	Expected int64 `json:"expected"` // requests the schedule holds: floor(λ·D) at a constant rate
	Issued   int64 `json:"issued"`   // requests actually sent

	// Counts holds how many requests ended in each outcome.
	Counts map[Outcome]int64 `json:"counts"`
	// OK is Counts["200"], repeated for convenience.
	OK         int64   `json:"ok"`
	GoodputRPS float64 `json:"goodput_rps"` // OK / DurationS

	// Latency of successes, from each request's intended send time.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// PickupP99MS is the p99 of successes as vegeta itself measures it,
	// from when a worker picked the request up. It hides the time requests
	// spent waiting for a free worker (coordinated omission); it is kept
	// only to show the difference.
	PickupP99MS float64 `json:"pickup_p99_ms"`

	// SendLag is how late requests left compared with their schedule.
	SendLagP99MS float64 `json:"send_lag_p99_ms"`
	SendLagMaxMS float64 `json:"send_lag_max_ms"`
	// Reliable is false when the load generator fell behind its schedule;
	// Warnings then says how. Checks on an unreliable run are not trusted.
	Reliable bool     `json:"reliable"`
	Warnings []string `json:"warnings,omitempty"`

	Interrupted bool `json:"interrupted,omitempty"`
	// Clock is the clock the run's time came from; empty is ClockWall.
	Clock Clock `json:"clock,omitempty"`
	// NoServerStats is set when the flooded server gave no /stats (any
	// HTTP server that is not a fake GPU): the Server* fields are then
	// empty, not zeros it reported.
	NoServerStats bool `json:"no_server_stats,omitempty"`

	// RetryAfter summarises the Retry-After headers of the 429 and 503
	// answers, by outcome.
	RetryAfter map[Outcome]*RetryAfterStats `json:"retry_after,omitempty"`

	// Pattern is the shape of the flood's arrivals; nil for the constant
	// rate OfferedRPS (every flood before patterns). With a pattern,
	// OfferedRPS is its mean rate.
	Pattern *Pattern `json:"pattern,omitempty"`

	// Clients is how many client keys the flood spread its requests over
	// (X-Client-Id); 0 when every request carried the same header.
	Clients int64 `json:"clients,omitempty"`

	// MemoryBefore, MemoryMid and MemoryAfter are the server's live
	// memory before the flood, halfway through it and once it had drained,
	// for floods that measure it (task 3's many keys); with several clients
	// flooding one server, on the first client's run only.
	MemoryBefore *MemoryStats `json:"memory_before,omitempty"`
	MemoryMid    *MemoryStats `json:"memory_mid,omitempty"`
	MemoryAfter  *MemoryStats `json:"memory_after,omitempty"`
	// Idle is the server's CPU use while nobody called it, after the flood
	// drained; nil where not measured (in-process servers), and on the
	// first client's run only when several flooded one server.
	Idle *IdleStats `json:"idle,omitempty"`

	// Workers holds each server worker's own final /stats, when the flood
	// hit several workers sharing one port (task 6).
	Workers []ServerStats `json:"workers,omitempty"`

	// Predicted holds the model's figures for this run, keyed like the
	// measured ones ("ok", "p99_ms", ...), for tables and reports.
	Predicted map[string]float64 `json:"predicted,omitempty"`
	// Server is the fake GPU flooded, as it was configured; nil when the
	// flood was not of a fake GPU (task 7's service, see Scenario).
	Server *Server `json:"server,omitempty"`

	// ServerAfterFlood is the server's /stats the moment sending stopped;
	// ServerFinal after the queue drained (or the drain cap was reached).
	ServerAfterFlood ServerStats `json:"server_after_flood"`
	ServerFinal      ServerStats `json:"server_final"`
	// DrainedS is how long after the flood the server's line took to empty,
	// or -1 if it had not emptied by the drain cap.
	DrainedS float64 `json:"drained_s"`

	// Samples is the server's /stats every SampleEveryMS from the start of
	// the flood until its line drained.
	SampleEveryMS float64  `json:"sample_every_ms"`
	Samples       []Sample `json:"samples"`

	// Timeline counts outcomes per TimelineBinMS of intended send time.
	TimelineBinMS float64             `json:"timeline_bin_ms"`
	Timeline      map[Outcome][]int64 `json:"timeline"`

	// Histograms holds each outcome's latency histogram (microseconds,
	// 1 µs to 60 s, 3 significant figures) in HdrHistogram's compressed V2
	// encoding, base64.
	Histograms map[Outcome]string `json:"histograms"`
}

// Pattern is a flood's arrival pattern other than the constant rate
// (harness.Pattern describes each): the fields of its Kind only.
type Pattern struct {
	// Kind is "spikes", "ramp" or "poisson".
	Kind string `json:"kind"`
	// Spike requests sent one 10 µs grid step apart every EveryS seconds
	// (spikes).
	Spike  uint64  `json:"spike,omitempty"`
	EveryS float64 `json:"every_s,omitempty"`
	// FromRPS and ToRPS are the ramp's first and last rates.
	FromRPS float64 `json:"from_rps,omitempty"`
	ToRPS   float64 `json:"to_rps,omitempty"`
	// Seed drew the Poisson process's gaps; replaying it replays the
	// schedule. Set for poisson only (a seed may be 0).
	Seed *uint64 `json:"seed,omitempty"`
}

// String describes p in a few words, such as "spikes of 30 every 5s".
func (p *Pattern) String() string {
	switch p.Kind {
	case "spikes":
		return fmt.Sprintf("spikes of %d every %gs", p.Spike, p.EveryS)
	case "ramp":
		return fmt.Sprintf("ramp from %g/s to %g/s", p.FromRPS, p.ToRPS)
	case "poisson":
		if p.Seed != nil {
			return fmt.Sprintf("poisson, seed %d", *p.Seed)
		}
	}
	return p.Kind
}

// RetryAfterStats counts the Retry-After headers of one outcome's answers.
type RetryAfterStats struct {
	// Valid counts headers holding whole seconds of at least 1.
	Valid int64 `json:"valid"`
	// Invalid counts answers whose header was missing, 0, negative or not
	// whole seconds: a client cannot act on them.
	Invalid int64 `json:"invalid"`
	// MinS and MaxS are the smallest and largest valid values, in seconds.
	MinS int64 `json:"min_s"`
	MaxS int64 `json:"max_s"`
}

// Sample is one reading of the server's /stats during a flood.
type Sample struct {
	TS    float64     `json:"t_s"` // seconds since the flood started
	Stats ServerStats `json:"stats"`
}

// Histogram decodes the latency histogram of outcome o, in microseconds.
func (r *Run) Histogram(o Outcome) (*hdr.Histogram, error) {
	s, ok := r.Histograms[o]
	if !ok {
		return nil, fmt.Errorf("run %s has no histogram for %s", r.Name, o)
	}
	h, err := hdr.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("run %s, histogram %s: %w", r.Name, o, err)
	}
	return h, nil
}

// QuantileMS returns the latency of outcome o at quantile q (0 to 100) in
// milliseconds, or an error if the run has no such histogram.
func (r *Run) QuantileMS(o Outcome, q float64) (float64, error) {
	h, err := r.Histogram(o)
	if err != nil {
		return 0, err
	}
	return float64(h.ValueAtQuantile(q)) / 1000, nil
}

// Storm is a crowd of retrying clients: the retry storm (all clients fire
// at once) or the retry amplifier (clients arrive open-loop at a rate).
type Storm struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "storm" or "amplify"
	// Clock is the clock the storm's time came from; empty is ClockWall.
	Clock Clock `json:"clock,omitempty"`
	// Options of the clients' retry loop.
	Jitter          bool    `json:"jitter"`
	HonorRetryAfter bool    `json:"honor_retry_after"`
	Budget          float64 `json:"budget,omitempty"` // retry budget ratio, 0 for none
	MaxTries        int     `json:"max_tries"`
	BaseMS          float64 `json:"base_ms"`
	CapMS           float64 `json:"cap_ms"`
	// Server is the fake GPU the clients called, as it was configured.
	Server *Server `json:"server,omitempty"`

	// Clients is how many calls were made (storm: clients at once;
	// amplify: OfferedRPS × DurationS).
	Clients    int     `json:"clients"`
	OfferedRPS float64 `json:"offered_rps,omitempty"`
	DurationS  float64 `json:"duration_s,omitempty"`

	Attempts int64 `json:"attempts"` // attempts the clients reported through OnAttempt
	// ServerReceived is how many attempts the server counted: the figure
	// checks rely on, since it does not depend on the code under test.
	ServerReceived int64 `json:"server_received"`
	Succeeded      int64 `json:"succeeded"` // calls that ended in a 200
	Failed         int64 `json:"failed"`    // calls that gave up
	// LastDoneS is when the last call ended, in seconds from the start.
	LastDoneS float64 `json:"last_done_s"`
	// IdealS is the shortest possible storm: clients × work / slots.
	IdealS float64 `json:"ideal_s,omitempty"`
	// SimulatedS is the simulation's time for the same storm (model.Sim;
	// the median over seeds with jitter), 0 if none was made.
	SimulatedS float64 `json:"simulated_s,omitempty"`
	// TimedOut is true when the storm hit its time limit before every
	// client was done.
	TimedOut bool `json:"timed_out,omitempty"`

	// Calls is what the server recorded of each client's call (X-Call-Id),
	// summarised: attempts, attempts open at once, gaps and returns after
	// Retry-After. Nil for a run that did not read them.
	Calls *CallSummary `json:"server_calls,omitempty"`

	// SendsPerBin counts attempts per BinMS from the start.
	BinMS       float64 `json:"bin_ms"`
	SendsPerBin []int64 `json:"sends_per_bin"`
	// PeakToMean is the largest bin over the mean of the non-empty bins
	// until the last success: about 1 to 3 for spread-out retries, far more
	// for lockstep waves.
	PeakToMean float64 `json:"peak_to_mean"`
	// EmptyShare is the share of bins with no attempt at all, from 1 s
	// after the start until the last call ended: near 0 when retries are
	// spread by jitter, near 1 when they come in lockstep waves with
	// silence between them.
	EmptyShare float64 `json:"empty_share"`

	// ServerSamples is the server's /stats over time (the amplifier reads
	// the attempts it received per second from them).
	SampleEveryMS float64  `json:"sample_every_ms,omitempty"`
	ServerSamples []Sample `json:"server_samples,omitempty"`

	Errors []string `json:"errors,omitempty"` // a few distinct final errors, for messages
}

// Scenario is the dead-dependency scenario of task 7: a service flooded by
// its clients while the dependency it calls goes dead for a while.
type Scenario struct {
	Name    string `json:"name"`
	Breaker bool   `json:"breaker"` // whether the service used a circuit breaker
	// Run is the flood of the service's clients, as the load generator saw it.
	Run *Run `json:"run"`

	DeadAtS      float64 `json:"dead_at_s"`
	DeadForS     float64 `json:"dead_for_s"`
	SlowCallMS   float64 `json:"slow_call_ms"`
	CallTimeoutS float64 `json:"call_timeout_s"`

	// The service's and the dependency's own counts.
	DependencyCalls     int64   `json:"dependency_calls"`
	DependencyCallsDead int64   `json:"dependency_calls_dead"` // calls that reached it while dead
	InFlightMax         int64   `json:"in_flight_max"`
	HeapMaxMB           float64 `json:"heap_max_mb"`
	// RecoveredS is how long after the dependency came back the service
	// answered at least 90% of its clients again; -1 if it never did.
	RecoveredS float64 `json:"recovered_s"`
	// With a breaker: FirstRefusalS is when the breaker first refused a
	// call, in seconds from the start (-1 if it never did), and
	// DeadCallsAllowedS, for each call the dependency got while it was
	// dead (its own record), when the breaker had let that call through
	// (at most 10,000, in order).
	FirstRefusalS     float64   `json:"first_refusal_s"`
	DeadCallsAllowedS []float64 `json:"dead_calls_allowed_s,omitempty"`

	Samples []ScenarioSample `json:"samples"`
}

// ScenarioSample is the service's state at one moment.
type ScenarioSample struct {
	TS              float64 `json:"t_s"`
	InFlight        int64   `json:"in_flight"`
	HeapMB          float64 `json:"heap_mb"`
	DependencyCalls int64   `json:"dependency_calls"`
}

// ReceivedRate returns the attempts per second the server counted between
// from and to seconds after the start, from its own samples; ok is false
// (and the rate 0) if the samples do not cover that span.
func (st *Storm) ReceivedRate(from, to float64) (perSecond float64, ok bool) {
	at := func(t float64) (float64, bool) {
		for _, s := range st.ServerSamples {
			if s.TS >= t {
				return float64(s.Stats.Received), true
			}
		}
		return 0, false
	}
	a, ok1 := at(from)
	b, ok2 := at(to)
	if !ok1 || !ok2 || to <= from {
		return 0, false
	}
	return (b - a) / (to - from), true
}

// Clock names the clock a run was measured on.
type Clock string

// The clocks a run may be measured on.
const (
	// ClockWall is the machine's clock: real sockets, real waiting, and
	// the machine's noise. A run that names no clock used it.
	ClockWall Clock = "wall"
	// ClockVirtual is a testing/synctest bubble's clock over an in-memory
	// network: time moves only when every goroutine waits, so the run is
	// the same on every machine, and computation takes no time at all.
	ClockVirtual Clock = "virtual"
)

// IsVirtual reports whether the run was measured in virtual time.
func (r *Run) IsVirtual() bool { return r.Clock == ClockVirtual }

// runWire is Run without its methods, for MarshalJSON.
type runWire Run

// MarshalJSON encodes r as its fields say, except that where the server
// gave no /stats (NoServerStats) what only /stats could tell is null
// rather than zeros nobody measured: server_after_flood, server_final,
// drained_s, sample_every_ms and samples. Decoding needs no counterpart:
// null leaves a field at its zero value.
func (r Run) MarshalJSON() ([]byte, error) {
	if !r.NoServerStats {
		return json.Marshal(runWire(r))
	}
	return json.Marshal(struct {
		runWire
		ServerAfterFlood *ServerStats `json:"server_after_flood"`
		ServerFinal      *ServerStats `json:"server_final"`
		DrainedS         *float64     `json:"drained_s"`
		SampleEveryMS    *float64     `json:"sample_every_ms"`
		Samples          []Sample     `json:"samples"`
	}{runWire: runWire(r)})
}
