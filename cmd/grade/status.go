package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"ratelab/grader"
	"ratelab/internal/layout"
	"ratelab/results"
)

var cmdStatus = &command{
	Name:      "status",
	UsageLine: "status [DIR...]",
	Short:     "show every task's best score so far and the next task to take",
	Long: `Status reads the results documents of the gradings already on disk
(every results.json under ratelab-runs/, or under each DIR given) and shows
every task with its best score so far, when it was scored and how many
runs graded it, then the next task to take: the first, in the lab's order,
that is not at full marks. It grades nothing. 'grade' with no arguments,
inside a checkout, is 'grade status'.

Only gradings of your exercises count: runs of the reference
(--solutions) and practice runs (--quick) are left out. An interrupted
run has no score: a task that has only such runs shows "interrupted". A
document that cannot be read, or whose score does not follow from its
checks, is named in a warning and left out.`,
	Run: noFlags(runStatus),
}

func runStatus(_ context.Context, args []string) error {
	dirs := args
	if len(dirs) == 0 {
		dirs = []string{layout.Runs}
	}
	for _, d := range args {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return usagef("%s: no such folder", d)
		}
	}
	var docs []statusDoc
	for _, d := range dirs {
		docs = append(docs, readRuns(d, stderr)...)
	}
	rows := progress(docs)
	writeProgress(stdout, rows, len(docs), dirs)
	return nil
}

// statusDoc is one results document read from disk, with its path.
type statusDoc struct {
	path string
	doc  *results.Document
}

// readRuns reads every results.json under dir (their report/ folders
// aside), in no particular order. A document that cannot be read, or is
// not consistent (results.Document.Consistent), is named in a warning on
// warn and left out; a dir that does not exist holds no runs.
func readRuns(dir string, warn io.Writer) []statusDoc {
	var docs []statusDoc
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir {
				fmt.Fprintf(warn, "grade: warning: %s: %v; left out\n", p, err)
			}
			return nil
		}
		if d.IsDir() && d.Name() == "report" {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "results.json" {
			return nil
		}
		doc, err := readDocument(p)
		if err != nil {
			fmt.Fprintf(warn, "grade: warning: %s: %v; left out\n", p, err)
			return nil
		}
		docs = append(docs, statusDoc{p, doc})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(warn, "grade: warning: %s: %v\n", dir, err)
	}
	return docs
}

// readDocument decodes the results document at path and checks that its
// verdict follows from its checks.
func readDocument(path string) (*results.Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := results.Decode(f)
	if err != nil {
		return nil, err
	}
	if err := doc.Consistent(); err != nil {
		return nil, err
	}
	return doc, nil
}

// taskProgress is one task's line of grade status.
type taskProgress struct {
	Task grader.Task
	// Best is the task's best graded attempt: its checks, status and score
	// (results.Document.Total); nil when no run scored it.
	Best *results.Document
	// When is when Best (or, without one, the last interrupted run)
	// finished.
	When time.Time
	// Runs counts the runs that graded the task, interrupted ones too.
	Runs int
	// Interrupted is true when the newest run of the task was interrupted.
	Interrupted bool
}

// Full reports whether the task is at full marks: its best run passed.
func (p taskProgress) Full() bool { return p.Best != nil && p.Best.Status == results.StatusPass }

// progress works out every task's progress from docs: per task, the
// attempt with the highest score among the runs of the learner's
// exercises that were neither interrupted nor practice, the newest of
// equals. A document of several tasks (grade all) is an attempt at each.
func progress(docs []statusDoc) []taskProgress {
	var rows []taskProgress
	for _, t := range grader.Tasks() {
		row := taskProgress{Task: t}
		var newest time.Time
		for _, d := range docs {
			if d.doc.Impl != string(grader.Exercises) || d.doc.Practice {
				continue
			}
			part := &results.Document{Task: t.ID, Interrupted: d.doc.Interrupted, Finished: d.doc.Finished}
			for _, c := range d.doc.Checks {
				if c.Task == t.ID {
					part.Checks = append(part.Checks, c)
				}
			}
			if len(part.Checks) == 0 {
				continue
			}
			part.Total()
			row.Runs++
			if part.Finished.After(newest) {
				newest = part.Finished
				row.Interrupted = part.Interrupted
			}
			switch {
			case part.Interrupted:
				if row.Best == nil && part.Finished.After(row.When) {
					row.When = part.Finished
				}
			case row.Best == nil || part.Score > row.Best.Score ||
				part.Score == row.Best.Score && part.Finished.After(row.Best.Finished):
				row.Best, row.When = part, part.Finished
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// nextTask returns the first task in rows not at full marks, or false
// when every one is.
func nextTask(rows []taskProgress) (taskProgress, bool) {
	for _, r := range rows {
		if !r.Full() {
			return r, true
		}
	}
	return taskProgress{}, false
}

// writeProgress writes rows as a table, then the next task to take.
func writeProgress(w io.Writer, rows []taskProgress, runs int, dirs []string) {
	full := 0
	for _, r := range rows {
		if r.Full() {
			full++
		}
	}
	fmt.Fprintf(w, "progress: %d of %d tasks at full marks, from %d runs under %s\n", full, len(rows), runs, joinDirs(dirs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  task\tbest\tverdict\twhen\truns")
	for _, r := range rows {
		switch {
		case r.Best != nil:
			status := string(r.Best.Status)
			if r.Interrupted {
				status += ", last run interrupted"
			}
			fmt.Fprintf(tw, "  %s\t%g/%g\t%s\t%s\t%d\n", r.Task.ID, r.Best.Score, r.Best.MaxScore, status, r.When.Local().Format("2006-01-02 15:04"), r.Runs)
		case r.Runs > 0:
			fmt.Fprintf(tw, "  %s\t-\tinterrupted, no score\t%s\t%d\n", r.Task.ID, r.When.Local().Format("2006-01-02 15:04"), r.Runs)
		default:
			fmt.Fprintf(tw, "  %s\t-\tnot graded yet\t-\t0\n", r.Task.ID)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, statusLine(rows))
}

// statusLine is the one line that says what to take next.
func statusLine(rows []taskProgress) string {
	next, ok := nextTask(rows)
	if !ok {
		return "next: nothing: every task is at full marks"
	}
	what := "not graded yet"
	switch {
	case next.Best != nil:
		what = fmt.Sprintf("best %g/%g", next.Best.Score, next.Best.MaxScore)
	case next.Runs > 0:
		what = "interrupted, no score yet"
	}
	return fmt.Sprintf("next: %s (%s), %s: grade %s; stuck? grade hint %s", next.Task.ID, what, next.Task.Title, next.Task.ID, next.Task.ID)
}

// joinDirs names the folders status read.
func joinDirs(dirs []string) string {
	s := ""
	for i, d := range dirs {
		if i > 0 {
			s += ", "
		}
		s += d + string(filepath.Separator)
	}
	return s
}
