// Package compare puts two grade runs side by side: two results documents,
// or two folders of repeated runs of one task (the before and after of a
// learner's change, or of a change to the lab). Every figure the two hold
// is listed with its delta: the score, each check's measured values, and
// every number of every flood, storm, scenario, play and judge record
// (goodput, outcome counts, percentiles, the server's counters, ...).
//
// Where both sides hold repeats measured on the wall clock, each figure is
// tested as benchstat tests benchmarks: a Mann-Whitney U test of the two
// samples (golang.org/x/perf/benchmath, assuming nothing of their
// distribution), its p-value against alpha (DefaultAlpha, 0.05), and "~"
// when the difference is not significant. Figures measured in virtual time
// are exact, the same on every run, so they are compared by their delta
// alone, with no test. Interrupted documents are shown as interrupted: they
// have no score, and what they finished is compared as it is.
//
// Load reads a side, Compare compares two, and Text writes the comparison
// for people; the Comparison itself encodes as JSON.
package compare

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/perf/benchmath"

	"ratelab/results"
)

// DefaultAlpha is the significance level of the tests when Options gives
// none: benchstat's, benchmath.DefaultThresholds.CompareAlpha (0.05).
var DefaultAlpha = benchmath.DefaultThresholds.CompareAlpha

// Options tune Compare. The zero value is benchstat's settings.
type Options struct {
	// Alpha is the significance level of the Mann-Whitney U tests: a
	// difference is significant when its p-value is below it, as in
	// benchstat. 0 means DefaultAlpha.
	Alpha float64
}

// Comparison is two sides compared figure by figure.
type Comparison struct {
	// Task and Impl are what both sides graded, such as "task2" and
	// "solutions".
	Task string `json:"task"`
	Impl string `json:"impl"`
	// A and B describe the two sides, in the order given.
	A Side `json:"a"`
	B Side `json:"b"`
	// Alpha is the significance level the tests used.
	Alpha float64 `json:"alpha"`
	// Checks holds every check's verdicts on both sides, in the order the
	// first side's first document holds them, then any only later
	// documents hold.
	Checks []CheckVerdicts `json:"checks"`
	// Figures holds every figure: the score first, then the checks'
	// measurements, then the floods', storms', scenarios', plays',
	// counting's and the judge's, in document order.
	Figures []Figure `json:"figures"`
	// Notes say what the reader should know of the comparison as a whole,
	// such as that virtual time needs no test.
	Notes []string `json:"notes,omitempty"`
}

// Side describes one side of a comparison.
type Side struct {
	// Path is the file or folder given; Files the documents read there.
	Path  string   `json:"path"`
	Files []string `json:"files"`
	// Statuses counts the documents by status (pass, fail, inconclusive,
	// error, interrupted).
	Statuses map[results.Status]int `json:"statuses"`
	// Interrupted counts the documents that were interrupted (SIGINT or
	// SIGTERM): they have no score and are never counted as failures.
	Interrupted int `json:"interrupted"`
	// Clock is the clock the side's traffic ran on: ClockVirtual when every
	// flood, storm and measurement record says virtual, else ClockWall.
	Clock results.Clock `json:"clock"`
	// Repeats is how many graded runs the side holds: its documents, each
	// counted as many times as it was graded (grade --repeat N).
	Repeats int `json:"repeats"`
	// MaxScore is the most points the side's documents could score.
	MaxScore float64 `json:"max_score"`
}

// CheckVerdicts is one check's statuses on both sides, one per graded run
// that reached it (a run interrupted before it did not).
type CheckVerdicts struct {
	Task string           `json:"task"`
	Name string           `json:"name"`
	A    []results.Status `json:"a"`
	B    []results.Status `json:"b"`
	// Changed is true when the two sides' statuses are not the same
	// multiset.
	Changed bool `json:"changed"`
}

// Change says how a figure moved from side A to side B.
type Change string

// The changes.
const (
	// ChangeExact: both sides measured the figure in virtual time, where
	// every run gives the same value; Delta is the whole difference and
	// no test is needed.
	ChangeExact Change = "exact"
	// ChangeUntested: a side has a single value, so there is no spread to
	// test against; Delta is the difference of the two values.
	ChangeUntested Change = "untested"
	// ChangeSame: tested, and not significant at Alpha (benchstat's "~").
	ChangeSame Change = "~"
	// ChangeSignificant: tested, and significant at Alpha.
	ChangeSignificant Change = "significant"
	// ChangeOnlyA and ChangeOnlyB: only one side holds the figure.
	ChangeOnlyA Change = "only in A"
	ChangeOnlyB Change = "only in B"
)

// Figure is one number on both sides.
type Figure struct {
	// Section is what holds the figure: "score", "check", "run", "storm",
	// "scenario", "play", "counting" or "judge".
	Section string `json:"section"`
	// Item names the check, flood, storm, ... within the section (runs of
	// a combined document's later repeats under their first repeat's
	// name); "" for the score.
	Item string `json:"item"`
	// Key is the figure's name, with its unit, as the document's JSON
	// spells it: "ok", "p99_ms", "server_final.dead", "counts.429".
	Key string `json:"key"`
	// Clock is the clock the figure was measured on, on both sides:
	// ClockVirtual only when both measured it in virtual time (idle CPU
	// and memory never are).
	Clock results.Clock `json:"clock"`
	A     Sample        `json:"a"`
	B     Sample        `json:"b"`
	// Delta is B's median minus A's; DeltaPct the same in percent of A's
	// median, nil when A's median is 0 and B's is not. Both are 0 when a
	// side has no value.
	Delta    float64  `json:"delta"`
	DeltaPct *float64 `json:"delta_pct"`
	Change   Change   `json:"change"`
	// Test is the Mann-Whitney U test of the two samples; nil when the
	// figure was not tested (Change exact, untested or only in one side).
	Test *Test `json:"test,omitempty"`
}

// Sample is one side's values of a figure, one per graded run.
type Sample struct {
	// N is how many values there are; 0 when the side does not hold the
	// figure.
	N      int       `json:"n"`
	Values []float64 `json:"values"`
	// Median, Min and Max summarise Values (benchstat's centre is the
	// median); 0 when N is 0.
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Test is a Mann-Whitney U test of two samples, as benchmath computes it.
type Test struct {
	// P is the p-value of the hypothesis that both samples come from one
	// distribution; the difference is significant when P < Alpha.
	P     float64 `json:"p"`
	N1    int     `json:"n1"`
	N2    int     `json:"n2"`
	Alpha float64 `json:"alpha"`
	// Warnings are benchmath's, such as "need >= 4 samples to detect a
	// difference at alpha level 0.05".
	Warnings []string `json:"warnings,omitempty"`
}

// Significant reports whether the test rejected the hypothesis that both
// samples come from one distribution.
func (t *Test) Significant() bool { return t != nil && t.P < t.Alpha }

// Compare compares side a with side b. Both must hold documents of the
// same task and tree; the error names both paths when they do not.
func Compare(a, b *Input, o Options) (*Comparison, error) {
	if a == nil || b == nil || len(a.Docs) == 0 || len(b.Docs) == 0 {
		return nil, errNoDocuments
	}
	da, db := a.Docs[0], b.Docs[0]
	if da.Task != db.Task {
		return nil, fmt.Errorf("%s grades %s but %s grades %s: compare runs of the same task", a.Files[0], da.Task, b.Files[0], db.Task)
	}
	if o.Alpha == 0 {
		o.Alpha = DefaultAlpha
	}
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return nil, fmt.Errorf("alpha %g: want a significance level between 0 and 1, such as 0.05", o.Alpha)
	}
	ea, eb := extract(a), extract(b)
	c := &Comparison{Task: da.Task, Impl: da.Impl, A: side(a, ea), B: side(b, eb), Alpha: o.Alpha}
	if da.Impl != db.Impl {
		c.Impl = da.Impl + " → " + db.Impl
	}
	c.Checks = verdicts(ea, eb)
	for _, k := range mergeOrder(ea.order, eb.order) {
		c.Figures = append(c.Figures, figure(k, ea.values[k], eb.values[k], ea.virtual[k] && eb.virtual[k], o.Alpha))
	}
	c.Notes = notes(c)
	return c, nil
}

// figure compares one figure's two samples.
func figure(k figureKey, va, vb []float64, virtual bool, alpha float64) Figure {
	f := Figure{Section: k.section, Item: k.item, Key: k.key, Clock: results.ClockWall, A: newSample(va), B: newSample(vb)}
	if virtual {
		f.Clock = results.ClockVirtual
	}
	switch {
	case f.A.N == 0:
		f.Change = ChangeOnlyB
		return f
	case f.B.N == 0:
		f.Change = ChangeOnlyA
		return f
	}
	f.Delta = f.B.Median - f.A.Median
	switch {
	case f.Delta == 0:
		f.DeltaPct = new(0.0)
	case f.A.Median != 0:
		f.DeltaPct = new(100 * f.Delta / math.Abs(f.A.Median))
	}
	exact := virtual && f.A.Min == f.A.Max && f.B.Min == f.B.Max
	switch {
	case exact:
		f.Change = ChangeExact
	case f.A.N < 2 || f.B.N < 2:
		f.Change = ChangeUntested
	default:
		f.Test = mannWhitney(va, vb, alpha)
		f.Change = ChangeSame
		if f.Test.Significant() {
			f.Change = ChangeSignificant
		}
	}
	return f
}

// mannWhitney tests whether a and b come from one distribution, as
// benchstat does (benchmath.AssumeNothing): a two-sided Mann-Whitney U
// test. A test that cannot be computed (every value the same) has P 1,
// with benchmath's reason among the warnings.
func mannWhitney(a, b []float64, alpha float64) *Test {
	th := benchmath.DefaultThresholds
	th.CompareAlpha = alpha
	s1 := benchmath.NewSample(slices.Clone(a), &th)
	s2 := benchmath.NewSample(slices.Clone(b), &th)
	c := benchmath.AssumeNothing.Compare(s1, s2)
	t := &Test{P: c.P, N1: c.N1, N2: c.N2, Alpha: c.Alpha}
	for _, w := range c.Warnings {
		t.Warnings = append(t.Warnings, w.Error())
	}
	return t
}

func newSample(v []float64) Sample {
	if len(v) == 0 {
		return Sample{Values: []float64{}}
	}
	s := slices.Sorted(slices.Values(v))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Sample{N: len(v), Values: v, Median: med, Min: s[0], Max: s[len(s)-1]}
}

// side describes one input.
func side(in *Input, e *extracted) Side {
	s := Side{Path: in.Path, Files: in.Files, Statuses: map[results.Status]int{}, Clock: results.ClockWall, Repeats: e.repeats}
	for _, d := range in.Docs {
		s.Statuses[d.Status]++
		if d.Interrupted || d.Status == results.StatusInterrupted {
			s.Interrupted++
		}
		s.MaxScore = max(s.MaxScore, d.MaxScore)
	}
	if e.allVirtual {
		s.Clock = results.ClockVirtual
	}
	return s
}

// verdicts lists every check's statuses on both sides.
func verdicts(a, b *extracted) []CheckVerdicts {
	var out []CheckVerdicts
	for _, k := range mergeOrder(a.checkOrder, b.checkOrder) {
		v := CheckVerdicts{Task: k[0], Name: k[1], A: a.statuses[k], B: b.statuses[k]}
		v.Changed = !slices.Equal(slices.Sorted(slices.Values(v.A)), slices.Sorted(slices.Values(v.B)))
		if v.A == nil {
			v.A = []results.Status{}
		}
		if v.B == nil {
			v.B = []results.Status{}
		}
		out = append(out, v)
	}
	return out
}

// notes says how the comparison's figures were judged.
func notes(c *Comparison) []string {
	var out []string
	if c.A.Clock == results.ClockVirtual && c.B.Clock == results.ClockVirtual {
		out = append(out, "virtual time on both sides: every run gives the same figures, so each delta is the whole difference and no significance test is needed (idle CPU and memory, measured on the wall clock, excepted)")
	}
	tested := 0
	for _, f := range c.Figures {
		if f.Test != nil {
			tested++
		}
	}
	if tested > 0 {
		out = append(out, fmt.Sprintf("%d figure(s) measured on the wall clock with repeats on both sides (%d+%d runs): each tested with a Mann-Whitney U test as benchstat does, at alpha %g; \"~\" means the difference is not significant", tested, c.A.Repeats, c.B.Repeats, c.Alpha))
		if c.A.Repeats < 4 || c.B.Repeats < 4 {
			out = append(out, "with fewer than 4 runs on a side, no difference can be significant at alpha 0.05 (the U test's smallest p-value for 3+3 runs is 0.1): grade each side at least 4 times")
		}
	} else if c.A.Clock == results.ClockWall || c.B.Clock == results.ClockWall {
		if c.A.Repeats < 2 || c.B.Repeats < 2 {
			out = append(out, "one run on a side: the wall clock's figures vary from run to run, and with no repeats there is no telling noise from change; compare folders of repeated runs for a significance test")
		}
	}
	if n := c.A.Interrupted + c.B.Interrupted; n > 0 {
		out = append(out, fmt.Sprintf("%d document(s) were interrupted: they have no score and are not failures; the checks and floods they finished are compared as they are", n))
	}
	return out
}

// mergeOrder is a's keys in order, then b's that a lacks.
func mergeOrder[K comparable](a, b []K) []K {
	out := slices.Clone(a)
	in := map[K]bool{}
	for _, k := range a {
		in[k] = true
	}
	for _, k := range b {
		if !in[k] {
			out = append(out, k)
		}
	}
	return out
}

// repeatSuffix is what results.Combine puts after the name of a later
// repeat's run, storm, scenario or play.
var repeatSuffix = regexp.MustCompile(` \(repeat [0-9]+\)$`)

// baseName is a record's name without its repeat suffix.
func baseName(name string) string { return repeatSuffix.ReplaceAllString(name, "") }

// itemName joins a check's task and name for a document of every task.
func itemName(task, name string, all bool) string {
	if all && task != "" && !strings.HasPrefix(name, task+" ") {
		return task + " " + name
	}
	return name
}
