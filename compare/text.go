package compare

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"ratelab/results"
)

// TextOptions shape Text's output.
type TextOptions struct {
	// Changed lists only the figures that differ (a non-zero delta, a
	// significant test, or a figure only one side holds), and only the
	// checks whose verdicts changed; the count of the others is printed.
	Changed bool
}

// Text writes c for people: the two sides, the score, the checks whose
// verdicts changed, then every figure with both sides' values (the median
// of a side's runs) and its delta. A tested figure's delta is the change
// of the medians in percent with the test's p-value, or "~" where the
// difference is not significant, as benchstat prints it.
func Text(w io.Writer, c *Comparison, o TextOptions) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "compare %s (%s)\n", c.Task, c.Impl)
	fmt.Fprintf(ew, "  A: %s\n  B: %s\n", describeSide(c.A), describeSide(c.B))
	for _, n := range c.Notes {
		fmt.Fprintf(ew, "note: %s\n", n)
	}

	changed := 0
	for _, v := range c.Checks {
		if v.Changed {
			changed++
		}
	}
	fmt.Fprintln(ew)
	switch {
	case len(c.Checks) == 0:
		fmt.Fprintln(ew, "checks: none on either side")
	case changed == 0:
		fmt.Fprintf(ew, "checks: all %d have the same verdicts on both sides\n", len(c.Checks))
	default:
		fmt.Fprintf(ew, "checks: %d of %d changed verdict (A → B)\n", changed, len(c.Checks))
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	for _, v := range c.Checks {
		if !v.Changed && (o.Changed || changed == 0) {
			continue
		}
		mark := " "
		if v.Changed {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s %s\t→ %s\t%s\n", mark, statusList(v.A), statusList(v.B), itemName(v.Task, v.Name, c.Task == "all"))
	}
	tw.Flush()

	fmt.Fprintln(ew)
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tA\tB\tdelta\t\n")
	hidden, group := 0, ""
	for _, f := range c.Figures {
		if o.Changed && !f.differs() {
			hidden++
			continue
		}
		if g := f.Section + " " + f.Item; f.Section != "score" && g != group {
			group = g
			fmt.Fprintf(tw, "%s\t\t\t\t\n", strings.TrimSpace(g))
		}
		name := "  " + f.Key
		a, b := sampleText(f.A), sampleText(f.B)
		if f.Section == "score" {
			name = "score"
			a, b = scoreText(f.A, c.A), scoreText(f.B, c.B)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, a, b, deltaText(f), noteText(f))
	}
	if !slices.ContainsFunc(c.Figures, func(f Figure) bool { return f.Section == "score" }) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\t\n", "score", scoreText(Sample{}, c.A), scoreText(Sample{}, c.B))
	}
	tw.Flush()
	if hidden > 0 {
		fmt.Fprintf(ew, "(%d figure(s) the same on both sides not shown)\n", hidden)
	}
	return ew.err
}

// differs reports whether f changed between the sides, or only one holds it.
func (f Figure) differs() bool {
	switch f.Change {
	case ChangeOnlyA, ChangeOnlyB, ChangeSignificant:
		return true
	case ChangeSame:
		return false
	}
	return f.Delta != 0
}

func describeSide(s Side) string {
	runs := fmt.Sprintf("%d document(s)", len(s.Files))
	if s.Repeats != len(s.Files) {
		runs += fmt.Sprintf(", %d runs", s.Repeats)
	}
	var st []string
	for _, k := range []results.Status{results.StatusPass, results.StatusFail, results.StatusInconclusive, results.StatusError, results.StatusInterrupted} {
		if n := s.Statuses[k]; n > 0 {
			st = append(st, fmt.Sprintf("%s %d", k, n))
		}
	}
	return fmt.Sprintf("%s (%s: %s; %s time)", s.Path, runs, strings.Join(st, ", "), s.Clock)
}

// statusList writes a check's statuses briefly: "pass", or "pass 2, fail 1".
func statusList(st []results.Status) string {
	if len(st) == 0 {
		return "absent"
	}
	count := map[results.Status]int{}
	var order []results.Status
	for _, s := range st {
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	if len(order) == 1 && len(st) == 1 {
		return string(st[0])
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%s %d", s, count[s])
	}
	return strings.Join(parts, ", ")
}

// scoreText is a side's score: its median of the scored runs out of the
// most, or "interrupted" when every run was.
func scoreText(s Sample, side Side) string {
	if s.N == 0 {
		if side.Interrupted > 0 {
			return "interrupted"
		}
		return "—"
	}
	t := fmt.Sprintf("%s/%s", num(s.Median), num(side.MaxScore))
	if side.Interrupted > 0 {
		t += fmt.Sprintf(" (+%d interrupted)", side.Interrupted)
	}
	return t
}

func sampleText(s Sample) string {
	switch s.N {
	case 0:
		return "—"
	case 1:
		return num(s.Median)
	}
	if s.Min == s.Max {
		return num(s.Median)
	}
	return fmt.Sprintf("%s ±%s", num(s.Median), spread(s))
}

// spread is how far a sample's values reach from its median, in percent of
// it: benchstat's "±" column, but from the extremes rather than a
// confidence interval.
func spread(s Sample) string {
	if s.Median == 0 {
		return num(math.Max(s.Max-s.Median, s.Median-s.Min))
	}
	return fmt.Sprintf("%.0f%%", 100*math.Max(s.Max-s.Median, s.Median-s.Min)/math.Abs(s.Median))
}

func deltaText(f Figure) string {
	switch f.Change {
	case ChangeOnlyA, ChangeOnlyB:
		return string(f.Change)
	case ChangeSame:
		return "~"
	case ChangeSignificant:
		if f.DeltaPct == nil {
			return sign(f.Delta)
		}
		return fmt.Sprintf("%+.1f%%", *f.DeltaPct)
	}
	if f.Delta == 0 {
		return "0"
	}
	if f.DeltaPct == nil {
		return sign(f.Delta)
	}
	return fmt.Sprintf("%s (%+.1f%%)", sign(f.Delta), *f.DeltaPct)
}

func noteText(f Figure) string {
	switch f.Change {
	case ChangeExact:
		return "exact (virtual time)"
	case ChangeUntested:
		if f.Clock == results.ClockVirtual {
			return "virtual time, but the runs differ"
		}
		return "not tested: one run"
	case ChangeSame, ChangeSignificant:
		t := f.Test
		s := fmt.Sprintf("p=%.3f n=%d+%d", t.P, t.N1, t.N2)
		if t.N1 == t.N2 {
			s = fmt.Sprintf("p=%.3f n=%d", t.P, t.N1)
		}
		return s
	}
	return ""
}

func sign(v float64) string {
	if v > 0 {
		return "+" + num(v)
	}
	return num(v)
}

// num writes a figure briefly: integers whole, others to 4 significant
// digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// errWriter keeps the first write error, so Text can write freely and
// report it once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}
