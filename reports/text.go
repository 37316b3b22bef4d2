// Package reports renders results documents for people: a text table for
// the terminal, HTML pages per task and summaries of a cohort.
package reports

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"ratelab/results"
)

// runLabel names a run in the tables, saying when it ran in virtual time.
func runLabel(r *results.Run) string {
	if r.IsVirtual() {
		return r.Name + " (virtual time)"
	}
	return r.Name
}

// Text writes doc as the terminal sees it: the floods as a table with the
// model's predictions beside the measurements, then every check, then the
// score. It returns the first write error.
func Text(w io.Writer, doc *results.Document) error {
	ew := &errWriter{w: w}
	writeRuns(ew, doc)
	fmt.Fprintf(ew, "\nchecks:\n")
	// The status column is as wide as "error", or as the longest status
	// shown (INCONCLUSIVE, after --repeat).
	width := 5
	for _, c := range doc.Checks {
		width = max(width, len(c.Status))
	}
	indent := strings.Repeat(" ", 2+width+1+4+2)
	for _, c := range doc.Checks {
		fmt.Fprintf(ew, "  %-*s %4s  %s\n", width, strings.ToUpper(string(c.Status)), points(c.Score, c.MaxScore), c.Name)
		if c.Message != "" {
			fmt.Fprintf(ew, "%s%s\n", indent, c.Message)
		}
	}
	for _, n := range doc.Notes {
		fmt.Fprintf(ew, "note: %s\n", n)
	}
	writeScore(ew, doc)
	return ew.err
}

// writeRuns writes doc's floods as a table, with the model's predictions
// beside the measurements, and the runs' warnings.
func writeRuns(ew *errWriter, doc *results.Document) {
	if len(doc.Runs) > 0 {
		fmt.Fprintf(ew, "\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\tsent\tok\tmodel\t429\t503\ttimeout\tgoodput/s\tp99 ok\tmodel p99\tstill waiting\tdead\tsend lag p99\t")
		for _, r := range doc.Runs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%.1f ms\t\n",
				runLabel(r), r.Issued, r.OK, predicted(r, "ok", "%.0f"),
				r.Counts[results.OutcomeTooMany], r.Counts[results.OutcomeUnavailable], r.Counts[results.OutcomeTimeout],
				r.GoodputRPS, msOrDash(r.OK, r.P99MS), predicted(r, "p99_ms", "%.0f ms"),
				serverCount(r, r.ServerAfterFlood.Waiting), serverCount(r, r.ServerFinal.Dead), r.SendLagP99MS)
		}
		tw.Flush()
		for _, r := range doc.Runs {
			for _, warn := range r.Warnings {
				fmt.Fprintf(ew, "warning: %s: %s\n", r.Name, warn)
			}
		}
	}
}

// writeScore writes doc's last line: its status and score, or that it was
// interrupted and has none.
func writeScore(ew *errWriter, doc *results.Document) {
	practice := ""
	if doc.Practice {
		practice = " (PRACTICE RUN, --quick: not the graded score)"
	}
	if doc.Interrupted {
		// No score: part of a grading is no verdict.
		fmt.Fprintf(ew, "\n%s %s: INTERRUPTED, no score (%d of %d checks judged before it stopped; grade again for a score)%s\n", doc.Task, doc.Impl, judged(doc), len(doc.Checks), practice)
		return
	}
	fmt.Fprintf(ew, "\n%s %s: %s, score %s%s\n", doc.Task, doc.Impl, strings.ToUpper(string(doc.Status)), points(doc.Score, doc.MaxScore), practice)
}

// judged counts doc's checks that have a verdict (not skipped).
func judged(doc *results.Document) int {
	n := 0
	for _, c := range doc.Checks {
		if c.Status != results.StatusSkip {
			n++
		}
	}
	return n
}

// FloodLine writes one run as a single line, like the lesson's flood script.
func FloodLine(w io.Writer, r *results.Run) error {
	var parts []string
	for _, o := range results.Outcomes {
		if n := r.Counts[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", o, n))
		}
	}
	server := fmt.Sprintf("finished %d, still waiting %d, dead %d", r.ServerAfterFlood.Finished, r.ServerAfterFlood.Waiting, r.ServerFinal.Dead)
	if r.NoServerStats {
		server = "not available (no /stats)"
	}
	offered := fmt.Sprintf("%g/s", r.OfferedRPS)
	if r.Pattern != nil {
		offered += " (" + r.Pattern.String() + ")"
	}
	_, err := fmt.Fprintf(w, "offered %s  goodput %.1f/s  {%s}  p99 %s  server: %s\n",
		offered, r.GoodputRPS, strings.Join(parts, ", "), msOrDash(r.OK, r.P99MS), server)
	for _, warn := range r.Warnings {
		if err == nil {
			_, err = fmt.Fprintf(w, "warning: %s\n", warn)
		}
	}
	return err
}

func predicted(r *results.Run, key, format string) string {
	if v, ok := r.Predicted[key]; ok {
		return fmt.Sprintf(format, v)
	}
	return "-"
}

// serverCount prints a count from the server's own /stats, or "-" when
// the flooded server had none.
func serverCount(r *results.Run, v int64) string {
	if r.NoServerStats {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

func msOrDash(n int64, v float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", v)
}

func points(score, max float64) string {
	return fmt.Sprintf("%g/%g", score, max)
}

// errWriter remembers the first write error so callers can check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
