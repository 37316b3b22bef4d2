package harness

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"ratelab/model/ties"
	"ratelab/results"
)

// PatternKind names an open-loop arrival pattern.
type PatternKind string

// The arrival patterns a flood can follow, after k6's arrival-rate
// executors: the schedule is fixed before the flood starts and never waits
// for answers.
const (
	// PatternConstant sends at Options.Rate, evenly spaced (the default).
	PatternConstant PatternKind = "constant"
	// PatternSpikes sends Pattern.Spike requests at once every
	// Pattern.Every, and nothing in between.
	PatternSpikes PatternKind = "spikes"
	// PatternRamp changes the rate linearly from Pattern.From to Pattern.To
	// over the flood's duration.
	PatternRamp PatternKind = "ramp"
	// PatternPoisson sends at random, exponentially distributed gaps of mean
	// 1/Options.Rate drawn from Pattern.Seed: a Poisson process.
	PatternPoisson PatternKind = "poisson"
)

// PatternKinds lists every pattern, the default first.
var PatternKinds = []PatternKind{PatternConstant, PatternSpikes, PatternRamp, PatternPoisson}

// ParsePatternKind returns the pattern named s, or an error listing the
// valid names.
func ParsePatternKind(s string) (PatternKind, error) {
	for _, k := range PatternKinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown pattern %q (want one of constant, spikes, ramp, poisson)", s)
}

// MaxSpike is the largest spike a flood sends: the spike goes out in
// MaxSpike × ties.Grid (100 ms), far faster than a steady MaxRate.
const MaxSpike = 10000

// Pattern is the shape of a flood's arrivals over time (Options.Pattern).
// The zero value is PatternConstant at Options.Rate, today's flood. Only
// the fields of its Kind are used; the others must be zero.
//
// Every pattern is due on ties.Grid (10 µs from the flood's start),
// and no two of its requests share an instant, so a flood in virtual time
// happens in one order only (package ties):
//
//   - constant: request k at (k+1)/Rate, as ties.Send rounds it.
//   - spikes: spike j (0-based) at (j+1)·Every; its requests do not leave
//     at one instant but one grid step apart, in sequence order: request i
//     of a spike at (j+1)·Every + i·10 µs. floor(Duration/Every) spikes.
//   - ramp: the rate goes linearly from From at 0 to To at Duration;
//     request k is due when the integral of the rate reaches k+1 (so a ramp
//     with From = To is the constant pattern), rounded to the grid.
//     floor((From+To)/2·Duration) requests.
//   - poisson: gaps drawn from Exp(Rate) by a PCG seeded with Seed; every
//     arrival in (0, Duration] is sent, so the count is itself random
//     (Poisson with mean Rate·Duration). A gap shorter than a grid step
//     after rounding is lengthened to one step.
type Pattern struct {
	// Kind is the pattern; empty means PatternConstant.
	Kind PatternKind `json:"kind,omitempty"`
	// Spike is how many requests each spike sends (spikes).
	Spike uint64 `json:"spike,omitempty"`
	// Every is the time from one spike to the next (spikes), a multiple of
	// ties.Grid of at least Spike grid steps.
	Every time.Duration `json:"every,omitempty"`
	// From and To are the ramp's first and last rates, in requests per
	// second (ramp).
	From float64 `json:"from,omitempty"`
	To   float64 `json:"to,omitempty"`
	// Seed seeds the Poisson process's gaps (poisson); the same seed gives
	// the same schedule.
	Seed uint64 `json:"seed,omitempty"`
}

// kind returns p's kind with the default filled in.
func (p Pattern) kind() PatternKind {
	if p.Kind == "" {
		return PatternConstant
	}
	return p.Kind
}

// IsConstant reports whether p is the default, constant pattern.
func (p Pattern) IsConstant() bool { return p.kind() == PatternConstant }

// MeanRate returns the average rate, in requests per second, of p over a
// flood of duration d whose Options.Rate is rate: rate for constant and
// poisson, Spike/Every for spikes, (From+To)/2 for ramp.
func (p Pattern) MeanRate(rate float64) float64 {
	switch p.kind() {
	case PatternSpikes:
		if p.Every <= 0 {
			return 0
		}
		return float64(p.Spike) / p.Every.Seconds()
	case PatternRamp:
		return (p.From + p.To) / 2
	}
	return rate
}

// Record returns p as a run records it, nil for the constant pattern, so
// that documents of constant floods stay as they were.
func (p Pattern) Record() *results.Pattern {
	if p.IsConstant() {
		return nil
	}
	r := &results.Pattern{Kind: string(p.kind()), Spike: p.Spike, EveryS: p.Every.Seconds(), FromRPS: p.From, ToRPS: p.To}
	if p.kind() == PatternPoisson {
		seed := p.Seed
		r.Seed = &seed
	}
	return r
}

// String describes p in a few words, such as "spikes of 30 every 5s".
func (p Pattern) String() string {
	switch p.kind() {
	case PatternSpikes:
		return fmt.Sprintf("spikes of %d every %s", p.Spike, p.Every)
	case PatternRamp:
		return fmt.Sprintf("ramp from %g/s to %g/s", p.From, p.To)
	case PatternPoisson:
		return fmt.Sprintf("poisson, seed %d", p.Seed)
	}
	return "constant"
}

// Arrivals describes o's offered load for a log line: "240 req/s", or the
// mean and the pattern, such as "5 req/s on average (spikes of 30 every
// 6s)".
func (o Options) Arrivals() string {
	if o.Pattern.IsConstant() {
		return fmt.Sprintf("%g req/s", o.Rate)
	}
	return fmt.Sprintf("%g req/s on average (%s)", o.Pattern.MeanRate(o.Rate), o.Pattern)
}

// check returns an error if p's fields are invalid for a flood at rate
// (Options.Rate; spikes and ramps ignore it). Whether the schedule holds
// any request is NewSchedule's to say.
func (p Pattern) check(rate float64) error {
	k := p.kind()
	if k != PatternSpikes && (p.Spike != 0 || p.Every != 0) {
		return fmt.Errorf("pattern %s: spike and every belong to spikes", k)
	}
	if k != PatternRamp && (p.From != 0 || p.To != 0) {
		return fmt.Errorf("pattern %s: from and to belong to ramp", k)
	}
	if k != PatternPoisson && p.Seed != 0 {
		return fmt.Errorf("pattern %s: seed belongs to poisson", k)
	}
	switch k {
	case PatternConstant, PatternPoisson:
		if math.IsNaN(rate) || rate <= 0 || rate > MaxRate {
			return fmt.Errorf("rate %v: want more than 0 and at most %v requests per second", rate, MaxRate)
		}
	case PatternSpikes:
		if p.Spike < 1 || p.Spike > MaxSpike {
			return fmt.Errorf("spike %d: want 1 to %d requests", p.Spike, MaxSpike)
		}
		if p.Every <= 0 || p.Every%ties.Grid != 0 || p.Every < time.Duration(p.Spike)*ties.Grid {
			return fmt.Errorf("every %s: want a multiple of %s, at least %s for spikes of %d (one send per %s)",
				p.Every, ties.Grid, time.Duration(p.Spike)*ties.Grid, p.Spike, ties.Grid)
		}
		if m := p.MeanRate(0); m > MaxRate {
			return fmt.Errorf("spikes of %d every %s average %v requests per second: want at most %v", p.Spike, p.Every, m, MaxRate)
		}
	case PatternRamp:
		for _, r := range []float64{p.From, p.To} {
			if math.IsNaN(r) || r < 0 || r > MaxRate {
				return fmt.Errorf("ramp rate %v: want 0 to %v requests per second", r, MaxRate)
			}
		}
	default:
		return fmt.Errorf("unknown pattern %q (want one of constant, spikes, ramp, poisson)", p.Kind)
	}
	return nil
}

// Schedule is a flood's arrivals as a pure function: when each request is
// due, measured from the flood's start, and how many there are. Make one
// with NewSchedule; it is read-only and safe for concurrent use.
type Schedule struct {
	p     Pattern
	rate  float64
	d     time.Duration
	count uint64
	due   []time.Duration // poisson only: every due time, drawn once
}

// NewSchedule returns the schedule of p for a flood of duration d whose
// Options.Rate is rate (unused by spikes and ramp), or an error if p is
// invalid or holds no request at all.
func NewSchedule(p Pattern, rate float64, d time.Duration) (*Schedule, error) {
	if err := p.check(rate); err != nil {
		return nil, err
	}
	if d <= 0 || d > MaxDuration {
		return nil, fmt.Errorf("duration %s: want more than 0 and at most %s", d, MaxDuration)
	}
	s := &Schedule{p: p, rate: rate, d: d}
	switch p.kind() {
	case PatternConstant:
		s.count = uint64(math.Floor(rate * d.Seconds()))
	case PatternSpikes:
		s.count = uint64(d/p.Every) * p.Spike
	case PatternRamp:
		s.count = uint64(math.Floor((p.From + p.To) / 2 * d.Seconds()))
	case PatternPoisson:
		s.due = poissonDue(rate, d, p.Seed)
		s.count = uint64(len(s.due))
	}
	if s.count < 1 {
		return nil, fmt.Errorf("%s at %v/s for %s sends no request at all", p, p.MeanRate(rate), d)
	}
	return s, nil
}

// Count returns how many requests the schedule holds.
func (s *Schedule) Count() uint64 { return s.count }

// Pattern returns the pattern s was made from.
func (s *Schedule) Pattern() Pattern { return s.p }

// Due returns when request seq (0-based, seq < Count) is due, measured from
// the flood's start, on ties.Grid; see Pattern for each pattern's
// formula. Due times increase strictly with seq.
func (s *Schedule) Due(seq uint64) time.Duration {
	switch s.p.kind() {
	case PatternSpikes:
		j, i := seq/s.p.Spike, seq%s.p.Spike
		return time.Duration(j+1)*s.p.Every + time.Duration(i)*ties.Grid
	case PatternRamp:
		return rampDue(s.p.From, s.p.To, s.d, seq)
	case PatternPoisson:
		return s.due[seq]
	}
	return ties.Send(s.rate, seq)
}

// RateAt returns the schedule's nominal rate at elapsed, in requests per
// second, as vegeta's Pacer interface asks: the ramp's rate there, the
// mean rate of the others.
func (s *Schedule) RateAt(elapsed time.Duration) float64 {
	if s.p.kind() == PatternRamp {
		f := min(max(elapsed.Seconds()/s.d.Seconds(), 0), 1)
		return s.p.From + (s.p.To-s.p.From)*f
	}
	return s.p.MeanRate(s.rate)
}

// Pace is Pace over s: given the time elapsed since the start and the
// requests sent so far, how long to wait before the next one, or stop once
// all are sent. A request already due waits 0.
func (s *Schedule) Pace(elapsed time.Duration, hits uint64) (wait time.Duration, stop bool) {
	if hits >= s.count {
		return 0, true
	}
	due := s.Due(hits)
	if due <= elapsed {
		return 0, false
	}
	return due - elapsed, false
}

// InFlight returns an upper bound on how many requests of s are due within
// any window of length w: as many as can be in flight at once when each
// client gives up after w. For constant it is ceil(Rate·w), as before
// patterns; for spikes whole spikes; for a ramp its higher end; for
// poisson the most the drawn schedule really holds.
func (s *Schedule) InFlight(w time.Duration) uint64 {
	return inFlight(s.p, s.rate, w, s)
}

// inFlight is InFlight for a pattern whose schedule may not be made yet
// (nil s); poisson then bounds the window's count from its mean.
func inFlight(p Pattern, rate float64, w time.Duration, s *Schedule) uint64 {
	switch p.kind() {
	case PatternSpikes:
		if p.Every <= 0 {
			return p.Spike
		}
		return (uint64(w/p.Every) + 1) * p.Spike
	case PatternRamp:
		return uint64(math.Ceil(max(p.From, p.To) * w.Seconds()))
	case PatternPoisson:
		if s == nil {
			// Six standard deviations over the mean, and a little more for
			// small windows: a file limit, not a measurement.
			n := rate * w.Seconds()
			return uint64(math.Ceil(n + 6*math.Sqrt(n) + 16))
		}
		var most uint64
		lo := 0
		for hi, t := range s.due {
			for t-s.due[lo] > w {
				lo++
			}
			most = max(most, uint64(hi-lo+1))
		}
		return most
	}
	return uint64(math.Ceil(rate * w.Seconds()))
}

// rampDue solves N(t) = seq+1 for t, where N(t) = from·t + (to−from)·t²/(2d)
// is the integral of the ramp's rate, in the form
// t = 2(seq+1) / (from + sqrt(from² + 2(to−from)(seq+1)/d)), which stays
// accurate when from = to (it is then (seq+1)/from, as the constant
// pattern) and when from is 0, and rounds it to ties.Grid.
func rampDue(from, to float64, d time.Duration, seq uint64) time.Duration {
	n := float64(seq + 1)
	disc := max(from*from+2*(to-from)*n/d.Seconds(), 0)
	t := 2 * n / (from + math.Sqrt(disc))
	return ties.Round(t)
}

// poissonDue draws the arrivals of a Poisson process of rate over (0, d]
// from seed, each rounded to ties.Grid and at least one step after
// the one before.
func poissonDue(rate float64, d time.Duration, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 0x7261746561726976)) // "ratearriv"
	due := make([]time.Duration, 0, int(rate*d.Seconds())+1)
	var t float64 // seconds
	last := time.Duration(0)
	for {
		t += rng.ExpFloat64() / rate
		at := ties.Round(t)
		at = max(at, last+ties.Grid)
		if at > d {
			return due
		}
		due = append(due, at)
		last = at
	}
}
