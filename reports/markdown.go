package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"ratelab/results"
)

// MarkdownLimit is the most Markdown writes: GitHub Actions refuses a job
// summary ($GITHUB_STEP_SUMMARY) over 1 MiB per step, so the summary stays
// a little under it however large the document.
const MarkdownLimit = 1<<20 - 32<<10

// Markdown writes doc as a GitHub-flavoured Markdown summary: the verdict,
// a score table per task, then each task's checks with their messages, the
// floods beside the model, and the notes. It never writes more than
// MarkdownLimit bytes: it first shortens the messages, then drops them, and
// as a last resort leaves out rows, saying how many and where to find them
// (results.json). Cells are escaped, so names and messages cannot break
// the tables.
func Markdown(w io.Writer, doc *results.Document) error {
	if doc == nil {
		return errors.New("reports: no document")
	}
	var out []byte
	for _, limit := range []int{400, 160, 60, 0} {
		var fits bool
		out, fits = renderMarkdown(doc, limit, limit == 0)
		if fits {
			break
		}
	}
	_, err := w.Write(out)
	return err
}

// Limits on single cells, whatever the budget.
const (
	mdNameRunes = 200
	mdRows      = 100 // floods listed at most
)

// renderMarkdown renders doc with messages cut to msgRunes (0 drops them).
// It reports whether everything fitted in MarkdownLimit; with omit, rows
// that do not fit are left out instead and it always fits.
func renderMarkdown(doc *results.Document, msgRunes int, omit bool) ([]byte, bool) {
	// reserve keeps room for the lines that close the document.
	const reserve = 4 << 10
	var b bytes.Buffer
	fits := true
	room := func(line string) bool {
		if b.Len()+len(line)+reserve <= MarkdownLimit {
			return true
		}
		fits = false
		return false
	}
	s := newSite(doc)

	fmt.Fprintf(&b, "## ratelab · %s · %s: %s %s, %s\n\n", mdText(doc.Task, 40), mdText(orDefault(doc.Impl, "?"), 40),
		statusEmoji(doc.Status), strings.ToUpper(string(doc.Status)), points(doc.Score, doc.MaxScore))
	if doc.Practice {
		b.WriteString("> **Practice run** (`--quick`): its floods were shorter than the lesson's 10 s, with the bounds scaled to their length. Grade without `--quick` for the score that counts.\n\n")
	}
	if doc.Interrupted {
		b.WriteString("> **Interrupted** (Ctrl-C): the checks and floods cover only what finished.\n\n")
	}
	if doc.Repeat > 1 {
		fmt.Fprintf(&b, "> Graded %d times (`--repeat %d`). ", doc.Repeat, doc.Repeat)
		if n := countStatus(doc.Checks, results.StatusInconclusive); n > 0 {
			fmt.Fprintf(&b, "%s **%d inconclusive**: their repeats disagreed, so they score 0 and list each repeat's verdict and values. That is the measurement's noise, not a verdict on the code: grade again on a quieter machine.\n\n", statusEmoji(results.StatusInconclusive), n)
		} else {
			b.WriteString("Every check agreed across the repeats.\n\n")
		}
	}

	// Scores per task.
	b.WriteString("| task | status | points | checks passed |\n|---|---|---:|---:|\n")
	for i, id := range s.tasks {
		checks := s.checks(id)
		v := taskVerdict(checks)
		row := fmt.Sprintf("| %s | %s %s | %s | %d of %d |\n", mdText(taskTitle(id), mdNameRunes), statusEmoji(v.Status), v.Status,
			v.Points(), countStatus(checks, results.StatusPass), len(checks))
		if !room(row) && omit {
			fmt.Fprintf(&b, "\n_%d more tasks in results.json._\n", len(s.tasks)-i)
			break
		}
		b.WriteString(row)
	}
	b.WriteString("\n")

	// Checks per task, open when the task did not pass.
	omitted := 0
	groups := s.tasks
	if len(s.checks("")) > 0 {
		groups = append(groups[:len(groups):len(groups)], "")
	}
	for _, id := range groups {
		checks := s.checks(id)
		if len(checks) == 0 {
			continue
		}
		v := taskVerdict(checks)
		open := ""
		if v.Status != results.StatusPass {
			open = " open"
		}
		title := taskTitle(id)
		if id == "" {
			title = "other checks"
		}
		head := fmt.Sprintf("<details%s><summary><b>%s</b>: %s %s, %s</summary>\n\n", open, mdText(title, mdNameRunes), statusEmoji(v.Status), v.Status, v.Points())
		if !room(head) && omit {
			omitted += len(checks)
			continue
		}
		b.WriteString(head)
		if msgRunes > 0 {
			b.WriteString("| | check | points | what was measured, against what |\n|---|---|---:|---|\n")
		} else {
			b.WriteString("| | check | points |\n|---|---|---:|\n")
		}
		for i, c := range checks {
			row := fmt.Sprintf("| %s | %s | %s |", statusEmoji(c.Status), mdText(c.Name, mdNameRunes), points(c.Score, c.MaxScore))
			if msgRunes > 0 {
				msg := c.Message
				if c.Run != "" {
					msg += " (run " + c.Run + ")"
				}
				row += " " + mdText(msg, msgRunes) + " |"
			}
			row += "\n"
			if !room(row) && omit {
				omitted += len(checks) - i
				break
			}
			b.WriteString(row)
		}
		b.WriteString("\n</details>\n\n")
	}

	// The floods beside the model.
	var runs []*results.Run
	for _, r := range doc.Runs {
		if r != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) > 0 {
		head := "| flood | sent | ok | model ok | goodput | p99 ok | model p99 | still waiting | dead |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
		if room(head) || !omit {
			b.WriteString("**Floods**\n\n" + head)
			for i, r := range runs {
				if i == mdRows {
					fmt.Fprintf(&b, "\n_%d more floods in results.json._\n", len(runs)-mdRows)
					break
				}
				row := fmt.Sprintf("| %s | %d | %d | %s | %.1f/s | %s | %s | %s | %s |\n", mdText(runLabel(r), 80), r.Issued, r.OK,
					predicted(r, "ok", "%.0f"), r.GoodputRPS, msOrDash(r.OK, r.P99MS), predicted(r, "p99_ms", "%.0f ms"),
					serverCount(r, r.ServerAfterFlood.Waiting), serverCount(r, r.ServerFinal.Dead))
				if !room(row) && omit {
					fmt.Fprintf(&b, "\n_%d more floods in results.json._\n", len(runs)-i)
					break
				}
				b.WriteString(row)
			}
			b.WriteString("\n")
		}
		for _, r := range runs {
			if !r.Reliable {
				line := fmt.Sprintf("> ⚠️ %s: the load generator fell behind its schedule; checks on it were not judged.\n", mdText(r.Name, 80))
				if room(line) || !omit {
					b.WriteString(line)
				}
			}
		}
	}
	for _, n := range doc.Notes {
		line := fmt.Sprintf("- %s\n", mdText(n, max(msgRunes, 200)))
		if !room(line) && omit {
			break
		}
		b.WriteString(line)
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "\n_%d checks left out to stay under GitHub's 1 MiB summary limit: see results.json._\n", omitted)
	}
	if msgRunes == 0 && len(doc.Checks) > 0 {
		b.WriteString("\n_Messages left out to stay under GitHub's 1 MiB summary limit: see results.json or the HTML report._\n")
	}
	return b.Bytes(), fits && b.Len() <= MarkdownLimit
}

// taskTitle names a task with its page's title when it has one.
func taskTitle(id string) string {
	if p := pageFor(id); p != nil {
		return id + ": " + p.Title
	}
	return id
}

func countStatus(checks []results.Check, s results.Status) int {
	n := 0
	for _, c := range checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

func statusEmoji(s results.Status) string {
	switch s {
	case results.StatusPass:
		return "✅"
	case results.StatusFail:
		return "❌"
	case results.StatusSkip:
		return "⏭️"
	case results.StatusError:
		return "⚠️"
	case results.StatusInconclusive:
		return "🔀"
	case results.StatusInterrupted:
		return "⏹️"
	}
	return "❔"
}

// mdEscaper keeps a cell's text literal: no table breaks, no HTML, no
// emphasis.
var mdEscaper = strings.NewReplacer(
	"\\", "\\\\", "|", "\\|", "*", "\\*", "_", "\\_", "`", "\\`",
	"&", "&amp;", "<", "&lt;", ">", "&gt;",
	"\r\n", " ", "\n", " ", "\r", " ", "\t", " ",
)

// mdText cuts s to at most n runes (with an ellipsis) and escapes it for a
// table cell.
func mdText(s string, n int) string {
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:max(n-1, 0)])) + "…"
	}
	return mdEscaper.Replace(s)
}
