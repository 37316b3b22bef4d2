package reports

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"ratelab/results"
)

// Brief writes doc as a learner first reads it: the floods' table as Text
// has it, one line per check that did not pass, and the score. Checks that
// did not pass for the same reason share one line with their count and
// their points: every check whose message says a function "is not
// implemented yet" (a stub's panic), and every check with the same "not
// run ..." message. A document of several tasks (grade all) gets a line
// per task, with its checks that did not pass under it. Notes and the
// checks that passed are left to Text, which writes everything. It returns
// the first write error.
func Brief(w io.Writer, doc *results.Document) error {
	ew := &errWriter{w: w}
	writeRuns(ew, doc)
	tasks := taskOrder(doc)
	passed := 0
	for _, c := range doc.Checks {
		if c.Status == results.StatusPass {
			passed++
		}
	}
	switch passed {
	case len(doc.Checks):
		fmt.Fprintf(ew, "\nchecks: all %d pass\n", len(doc.Checks))
	default:
		fmt.Fprintf(ew, "\nchecks: %d of %d pass\n", passed, len(doc.Checks))
	}
	for _, task := range tasks {
		var checks []results.Check
		for _, c := range doc.Checks {
			if c.Task == task {
				checks = append(checks, c)
			}
		}
		indent := "  "
		if len(tasks) > 1 {
			var score, most float64
			status := results.StatusPass
			for _, c := range checks {
				score += c.Score
				most += c.MaxScore
				switch {
				case c.Status == results.StatusError:
					status = results.StatusError
				case c.Status != results.StatusPass && status == results.StatusPass:
					status = results.StatusFail
				}
			}
			fmt.Fprintf(ew, "  %-6s %-4s %s\n", task, strings.ToUpper(string(status)), points(score, most))
			indent = "    "
		}
		for _, l := range briefLines(checks) {
			fmt.Fprintf(ew, "%s%-5s %5s  %s\n", indent, strings.ToUpper(string(l.status)), points(0, l.max), l.text)
		}
	}
	writeScore(ew, doc)
	return ew.err
}

// briefLine is one line of Brief's list of checks that did not pass.
type briefLine struct {
	status results.Status
	max    float64 // the points the line's checks could have scored
	text   string
}

// notWritten finds what a stub's panic says is missing (see Unwritten).
var notWritten = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?) is not implemented yet`)

// Unwritten returns what a check's message says is not written yet, in
// order and once each: the functions ("NewTokenBucket") and methods
// ("TokenBucket.TryTake") whose stub panicked with "task 3: NewTokenBucket
// is not implemented yet". It returns nil when the message says no such
// thing.
func Unwritten(message string) []string {
	var names []string
	for _, m := range notWritten.FindAllStringSubmatch(message, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// taskPrefix is the "task 3 (exercises/bucket/bucket.go): " a unit check's
// message starts with; Brief names the file elsewhere.
var taskPrefix = regexp.MustCompile(`^task \d+ \([^)]*\): `)

// briefWidth is the most runes of a check's name and message a line of
// Brief shows.
const briefWidth = 120

// briefNames is the most names of unwritten functions a line of Brief
// lists; it counts the others.
const briefNames = 4

// briefLines lists checks that did not pass, in order, a reason shared by
// several (see Brief) on one line at the place of the first.
func briefLines(checks []results.Check) []briefLine {
	var lines []briefLine
	stub := -1                    // the line of the checks whose code is not written yet
	var missing []string          // what those checks say is not written, in order
	var stubCount int             // how many checks that line stands for
	same := map[string]int{}      // a "not run" message → its line
	sameCount := map[string]int{} // and how many checks share it
	for _, c := range checks {
		if c.Status == results.StatusPass {
			continue
		}
		if strings.HasPrefix(c.Message, "not run") || strings.HasPrefix(c.Message, "not judged") {
			key := string(c.Status) + " " + c.Message
			i, ok := same[key]
			if !ok {
				i = len(lines)
				same[key] = i
				lines = append(lines, briefLine{status: c.Status, text: c.Message})
			}
			lines[i].max += c.MaxScore
			sameCount[key]++
			continue
		}
		if names := Unwritten(c.Message); names != nil {
			if stub < 0 {
				stub = len(lines)
				lines = append(lines, briefLine{status: c.Status})
			}
			lines[stub].max += c.MaxScore
			stubCount++
			for _, n := range names {
				if !slices.Contains(missing, n) {
					missing = append(missing, n)
				}
			}
			continue
		}
		text := c.Name
		if reason := taskPrefix.ReplaceAllString(c.Message, ""); reason != "" {
			text += ": " + reason
		}
		if r := []rune(text); len(r) > briefWidth {
			text = string(r[:briefWidth-1]) + "…"
		}
		lines = append(lines, briefLine{status: c.Status, max: c.MaxScore, text: text})
	}
	if stub >= 0 {
		if len(missing) > briefNames {
			missing = append(missing[:briefNames], fmt.Sprintf("%d more", len(missing)-briefNames))
		}
		lines[stub].text = fmt.Sprintf("%s: not implemented yet: %s", checksOf(stubCount), strings.Join(missing, ", "))
	}
	for key, i := range same {
		if n := sameCount[key]; n > 1 {
			lines[i].text = fmt.Sprintf("%s %s", checksOf(n), lines[i].text)
		}
	}
	return lines
}

// checksOf is "1 check" or "n checks".
func checksOf(n int) string {
	if n == 1 {
		return "1 check"
	}
	return fmt.Sprintf("%d checks", n)
}

// taskOrder returns the tasks of doc's checks in the order they first
// appear.
func taskOrder(doc *results.Document) []string {
	var tasks []string
	for _, c := range doc.Checks {
		if !slices.Contains(tasks, c.Task) {
			tasks = append(tasks, c.Task)
		}
	}
	return tasks
}
