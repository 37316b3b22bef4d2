package harness

import (
	"encoding/json"
	"math"
	"ratelab/model/ties"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// drawPattern draws a valid pattern, its Options.Rate and a duration, small
// enough that a schedule is made in well under a millisecond.
func drawPattern(t *rapid.T) (Pattern, float64, time.Duration) {
	d := time.Duration(rapid.IntRange(1, 2000).Draw(t, "d_10ms")) * 10 * time.Millisecond
	switch rapid.SampledFrom(PatternKinds).Draw(t, "kind") {
	case PatternSpikes:
		spike := rapid.Uint64Range(1, 200).Draw(t, "spike")
		steps := rapid.Int64Range(int64(spike), 200_000).Draw(t, "every_steps")
		return Pattern{Kind: PatternSpikes, Spike: spike, Every: time.Duration(steps) * ties.Grid}, 0, d
	case PatternRamp:
		from := rapid.Float64Range(0, 3000).Draw(t, "from")
		to := rapid.Float64Range(0, 3000).Draw(t, "to")
		return Pattern{Kind: PatternRamp, From: from, To: to}, 0, d
	case PatternPoisson:
		return Pattern{Kind: PatternPoisson, Seed: rapid.Uint64().Draw(t, "seed")}, rapid.Float64Range(0.5, 3000).Draw(t, "rate"), d
	}
	return Pattern{}, rapid.Float64Range(0.5, MaxRate).Draw(t, "rate"), d
}

// Every pattern's due times lie on the 10 µs grid and increase strictly,
// so no two requests of one flood share an instant in virtual time; the
// schedule's pace sends exactly Count requests, each when due.
func TestScheduleIsOnTheGridAndStrictlyIncreasing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, rate, d := drawPattern(t)
		s, err := NewSchedule(p, rate, d)
		if err != nil {
			t.Skip(err) // no request at all in so short a flood
		}
		prev := time.Duration(0)
		for seq := range s.Count() {
			due := s.Due(seq)
			if due%ties.Grid != 0 {
				t.Fatalf("%s: Due(%d) = %s; want a multiple of %s", p, seq, due, ties.Grid)
			}
			if due <= prev {
				t.Fatalf("%s: Due(%d) = %s; want after Due(%d) = %s", p, seq, due, seq-1, prev)
			}
			if wait, stop := s.Pace(prev, seq); stop || wait != due-prev {
				t.Fatalf("%s: Pace(%s, %d) = (%s, %t); want (%s, false)", p, prev, seq, wait, stop, due-prev)
			}
			prev = due
		}
		if wait, stop := s.Pace(prev, s.Count()); !stop || wait != 0 {
			t.Fatalf("%s: Pace(%s, %d) = (%s, %t); want (0s, true)", p, prev, s.Count(), wait, stop)
		}
	})
}

// The constant pattern is today's schedule, request for request.
func TestConstantPatternIsIntended(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(0.5, MaxRate).Draw(t, "rate")
		d := time.Duration(rapid.IntRange(2, 3000).Draw(t, "d_ms")) * time.Millisecond
		s, err := NewSchedule(Pattern{}, rate, d)
		if err != nil {
			t.Skip(err)
		}
		if want := uint64(math.Floor(rate * d.Seconds())); s.Count() != want {
			t.Fatalf("Count at %v/s for %s = %d; want floor(rate·duration) = %d", rate, d, s.Count(), want)
		}
		seq := rapid.Uint64Range(0, s.Count()-1).Draw(t, "seq")
		if got, want := s.Due(seq), Intended(rate, seq); got != want {
			t.Fatalf("Due(%d) at %v/s = %s; want Intended = %s", seq, rate, got, want)
		}
		ramp, err := NewSchedule(Pattern{Kind: PatternRamp, From: rate, To: rate}, 0, d)
		if err != nil {
			t.Fatal(err)
		}
		if ramp.Count() != s.Count() || ramp.Due(seq) != s.Due(seq) {
			t.Fatalf("a flat ramp at %v/s: Count %d, Due(%d) = %s; want the constant's %d, %s",
				rate, ramp.Count(), seq, ramp.Due(seq), s.Count(), s.Due(seq))
		}
	})
}

// A ramp holds the integral of its rate, floor((from+to)/2·d) requests, and
// request k is due when the integral reaches k+1, to within a grid step.
func TestRampIsTheIntegral(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := rapid.Float64Range(0, 5000).Draw(t, "from")
		to := rapid.Float64Range(0, 5000).Draw(t, "to")
		d := time.Duration(rapid.IntRange(1, 600).Draw(t, "d_100ms")) * 100 * time.Millisecond
		s, err := NewSchedule(Pattern{Kind: PatternRamp, From: from, To: to}, 0, d)
		if err != nil {
			t.Skip(err)
		}
		if want := uint64(math.Floor((from + to) / 2 * d.Seconds())); s.Count() != want {
			t.Fatalf("Count of ramp %v→%v over %s = %d; want %d", from, to, d, s.Count(), want)
		}
		seq := rapid.Uint64Range(0, s.Count()-1).Draw(t, "seq")
		at := s.Due(seq).Seconds()
		integral := from*at + (to-from)*at*at/(2*d.Seconds())
		// Half a grid step of rounding, at the ramp's highest rate.
		slack := max(from, to)*ties.Grid.Seconds()/2 + 1e-6
		if math.Abs(integral-float64(seq+1)) > slack {
			t.Fatalf("ramp %v→%v over %s: the integral at Due(%d) = %s is %v; want %d ± %v", from, to, d, seq, s.Due(seq), integral, seq+1, slack)
		}
		if last := s.Due(s.Count() - 1); last > d+ties.Grid {
			t.Fatalf("ramp %v→%v over %s: last request due at %s; want by the end", from, to, d, last)
		}
	})
}

func TestSpikes(t *testing.T) {
	s, err := NewSchedule(Pattern{Kind: PatternSpikes, Spike: 3, Every: 2 * time.Second}, 0, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), s.Count(), "two whole spikes of 3 in 5 s")
	us := time.Microsecond
	want := []time.Duration{2*time.Second + 0*us, 2*time.Second + 10*us, 2*time.Second + 20*us, 4 * time.Second, 4*time.Second + 10*us, 4*time.Second + 20*us}
	for seq, w := range want {
		assert.Equal(t, w, s.Due(uint64(seq)), "Due(%d)", seq)
	}
	assert.Equal(t, 1.5, s.RateAt(0), "mean rate 3 per 2 s")
	assert.Equal(t, uint64(3), s.InFlight(time.Second), "one spike within 1 s")
	assert.Equal(t, uint64(6), s.InFlight(2*time.Second), "two spikes within 2 s")
}

// The Poisson process keeps to its seed, and its count over the flood is
// within the statistical bound of a Poisson variable of mean rate·d: four
// standard deviations (one draw in 15,000 falls outside). Its seed is
// drawn and, on failure, printed by rapid.
func TestPoissonMeanRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(1, 2000).Draw(t, "rate")
		seed := rapid.Uint64().Draw(t, "seed")
		const d = 20 * time.Second
		p := Pattern{Kind: PatternPoisson, Seed: seed}
		s, err := NewSchedule(p, rate, d)
		if err != nil {
			t.Fatal(err)
		}
		mean := rate * d.Seconds()
		if dev := math.Abs(float64(s.Count()) - mean); dev > 4*math.Sqrt(mean)+1 {
			t.Fatalf("poisson at %v/s, seed %d: %d arrivals in %s; want %v ± %v", rate, seed, s.Count(), d, mean, 4*math.Sqrt(mean)+1)
		}
		again, err := NewSchedule(p, rate, d)
		if err != nil {
			t.Fatal(err)
		}
		if again.Count() != s.Count() || again.Due(s.Count()-1) != s.Due(s.Count()-1) {
			t.Fatalf("poisson at %v/s, seed %d: a second schedule differs", rate, seed)
		}
		if w := time.Second; s.InFlight(w) > inFlight(p, rate, w, nil) {
			t.Fatalf("poisson at %v/s, seed %d: %d due within %s; the file limit's bound is %d", rate, seed, s.InFlight(w), w, inFlight(p, rate, w, nil))
		}
	})
}

func TestPatternRecord(t *testing.T) {
	assert.Nil(t, Pattern{}.Record(), "a constant flood records no pattern")
	assert.Nil(t, Pattern{Kind: PatternConstant}.Record())
	r := Pattern{Kind: PatternPoisson}.Record()
	require.NotNil(t, r.Seed, "seed 0 is recorded too")
	assert.Equal(t, uint64(0), *r.Seed)
	r = Pattern{Kind: PatternSpikes, Spike: 30, Every: 5 * time.Second}.Record()
	assert.Equal(t, 5.0, r.EveryS)
	assert.Nil(t, r.Seed)
}

func TestPatternValidate(t *testing.T) {
	good := Options{URL: "http://127.0.0.1:1/generate", Duration: 10 * time.Second}
	ok := []Pattern{
		{Kind: PatternSpikes, Spike: 30, Every: 5 * time.Second},
		{Kind: PatternRamp, From: 10, To: 200},
		{Kind: PatternRamp, From: 200, To: 0},
	}
	for _, p := range ok {
		o := good
		o.Pattern = p
		require.NoError(t, o.validate(), "validate(%s)", p)
		assert.Equal(t, p.MeanRate(0), o.Rate, "%s: the rate recorded is the mean", p)
	}
	bad := []Pattern{
		{Kind: "square"},
		{Kind: PatternSpikes, Spike: 0, Every: time.Second},
		{Kind: PatternSpikes, Spike: MaxSpike + 1, Every: time.Minute},
		{Kind: PatternSpikes, Spike: 30, Every: 5*time.Second + time.Microsecond}, // off the grid
		{Kind: PatternSpikes, Spike: 30, Every: 200 * time.Microsecond},           // spikes would overlap
		{Kind: PatternSpikes, Spike: 30, Every: 20 * time.Second},                 // none within 10 s
		{Kind: PatternSpikes, Spike: 10000, Every: 100 * time.Millisecond},        // 100,000/s on average
		{Kind: PatternRamp, From: 10, To: MaxRate + 1},
		{Kind: PatternRamp, From: -1, To: 10},
		{Kind: PatternRamp},
		{Kind: PatternRamp, From: 10, To: 20, Seed: 3},
		{Kind: PatternSpikes, Spike: 3, Every: time.Second, From: 3},
	}
	for _, p := range bad {
		o := good
		o.Pattern = p
		assert.ErrorIs(t, o.validate(), ErrBadOptions, "validate(%+v)", p)
	}
	o := good
	o.Rate, o.Pattern = 5, Pattern{Kind: PatternRamp, From: 10, To: 20}
	assert.ErrorIs(t, o.validate(), ErrBadOptions, "a rate beside a ramp")
	o = good
	o.Pattern = Pattern{Kind: PatternPoisson, Seed: 1}
	assert.ErrorIs(t, o.validate(), ErrBadOptions, "poisson needs its mean rate")
}

// A flood's open-file need counts what a pattern may have in flight: whole
// spikes within one timeout, a ramp's higher end.
func TestFileNeedOfPatterns(t *testing.T) {
	o := Options{Rate: 6, Timeout: time.Second, ServerElsewhere: true,
		Pattern: Pattern{Kind: PatternSpikes, Spike: 5000, Every: 500 * time.Millisecond}}
	assert.Equal(t, uint64(3*5000+256), fileNeed(o), "three spikes within 1 s")
	o.Pattern = Pattern{Kind: PatternRamp, From: 100, To: 2000}
	assert.Equal(t, uint64(2000+256), fileNeed(o), "the ramp's top")
}

// A pattern travels in Options as JSON, as a virtual-time session
// receives its floods.
func TestPatternJSON(t *testing.T) {
	o := Options{Rate: 60, Duration: time.Second, Pattern: Pattern{Kind: PatternSpikes, Spike: 30, Every: 6 * time.Second}}
	b, err := json.Marshal(o)
	require.NoError(t, err)
	var back Options
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, o.Pattern, back.Pattern, "from %s", b)
	b, err = json.Marshal(Options{Rate: 60})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"Pattern":{}`, "a constant pattern is empty")
}

// A log line says a patterned flood's mean and its shape.
func TestOptionsArrivals(t *testing.T) {
	assert.Equal(t, "240 req/s", Options{Rate: 240}.Arrivals())
	spikes := Options{Pattern: Pattern{Kind: PatternSpikes, Spike: 30, Every: 6 * time.Second}}
	assert.Equal(t, "5 req/s on average (spikes of 30 every 6s)", spikes.Arrivals())
}
