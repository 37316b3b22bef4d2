package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

var cmdList = &command{
	Name:      "list",
	UsageLine: "list",
	Short:     "list the lab's tasks",
	Long: `List shows every task with its title, the files to edit and its handout, and
how it fared in the newest run under ratelab-runs/ that graded it.`,
	Run: noFlags(runList),
}

func runList(_ context.Context, args []string) error {
	if len(args) > 0 {
		return usagef("list takes no arguments")
	}
	last := lastRuns("ratelab-runs", stderr)
	for _, t := range grader.Tasks() {
		files := "nothing to edit: watch and measure"
		if len(t.Files) > 0 {
			files = "edit " + strings.Join(t.Files, ", ")
		}
		status := "not graded yet"
		if r, ok := last[t.ID]; ok {
			status = r
		}
		fmt.Fprintf(stdout, "%-7s %s\n        %s; handout %s\n        last run: %s\n", t.ID, t.Title, files, t.Handout, status)
	}
	return nil
}

// lastRuns reads every results.json under dir, as grade status reads
// them (readRuns: an unreadable or inconsistent one is named in a warning
// on warn and left out), and returns, per task, a line about the newest
// run that graded it.
func lastRuns(dir string, warn io.Writer) map[string]string {
	type seen struct {
		at   time.Time
		line string
	}
	best := map[string]seen{}
	for _, r := range readRuns(dir, warn) {
		doc := r.doc
		type tally struct {
			score, max float64
			failed     int
		}
		per := map[string]*tally{}
		for _, c := range doc.Checks {
			t := per[c.Task]
			if t == nil {
				t = &tally{}
				per[c.Task] = t
			}
			t.score += c.Score
			t.max += c.MaxScore
			if c.Status != results.StatusPass {
				t.failed++
			}
		}
		for task, t := range per {
			if prev, ok := best[task]; ok && !doc.Finished.After(prev.at) {
				continue
			}
			verdict := "pass"
			if t.failed > 0 {
				verdict = fmt.Sprintf("%d check(s) not passed", t.failed)
			}
			score := fmt.Sprintf("%g/%g, ", t.score, t.max)
			if doc.Interrupted {
				// Stopped before the end: what it did not judge is no
				// failure, and what it scored is no score.
				score, verdict = "", "interrupted, no score"
			}
			if doc.Practice {
				verdict += ", practice run (--quick)"
			}
			best[task] = seen{doc.Finished, fmt.Sprintf("%s%s (%s, %s, %s)", score, verdict, doc.Impl,
				doc.Finished.Local().Format("Jan 2 15:04"), filepath.Dir(r.path))}
		}
	}
	out := map[string]string{}
	for k, v := range best {
		out[k] = v.line
	}
	return out
}
