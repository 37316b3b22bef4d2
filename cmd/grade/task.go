package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"ratelab/grader"
	"ratelab/reports"
	"ratelab/results"
)

// taskFlags are the flags every grading command takes.
type taskFlags struct {
	solutions bool
	out       string
	json      bool
	force     bool
}

func (f *taskFlags) declare(fs *flag.FlagSet) {
	fs.BoolVar(&f.solutions, "solutions", false, "grade the reference in solutions/ instead of your exercises/")
	fs.StringVar(&f.out, "out", "", "write results.json into this folder (default: a new folder under ratelab-runs/)")
	fs.BoolVar(&f.json, "json", false, "print the results document as JSON on stdout (the table goes to stderr)")
	fs.BoolVar(&f.force, "force", false, "replace an existing results.json in --out")
}

func init() {
	for _, t := range grader.Tasks() {
		commands = append(commands, &command{
			Name:      t.ID,
			UsageLine: t.ID + " [--solutions] [--out DIR] [--json] [--force]",
			Short:     fmt.Sprintf("grade task %d: %s", t.Number, t.Title),
			Long: fmt.Sprintf(`%s runs task %d's stages, checks the lesson's invariants and prints a
score. The handout is %s; 'grade hint %s' prints the hints.

The results document (schema %s, see docs/RESULTS.md) is written to
DIR/results.json; an existing one is kept unless --force is given.`, t.ID, t.Number, t.Handout, t.ID, results.Schema),
			Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
				var f taskFlags
				f.declare(fs)
				return func(ctx context.Context, args []string) error {
					if len(args) > 0 {
						return usagef("%s takes no arguments, got %q", t.ID, args)
					}
					return gradeTasks(ctx, t.ID, []grader.Task{t}, f)
				}
			},
		})
	}
	commands = append(commands, &command{
		Name:      "all",
		UsageLine: "all [--solutions] [--out DIR] [--json] [--force]",
		Short:     "grade every task",
		Long: `All grades every task in order and writes one results document for the
lot. Use --solutions to grade the reference (it must score full marks).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var f taskFlags
			f.declare(fs)
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("all takes no arguments, got %q", args)
				}
				return gradeTasks(ctx, "all", grader.Tasks(), f)
			}
		},
	})
}

// gradeTasks grades tasks, merges their documents into one named id, writes
// it and prints it.
func gradeTasks(ctx context.Context, id string, tasks []grader.Task, f taskFlags) error {
	impl := grader.Exercises
	if f.solutions {
		impl = grader.Solutions
	}
	dir, err := outDir(f, id, impl)
	if err != nil {
		return err
	}
	human := stdout
	if f.json {
		human = stderr
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	opts := grader.Options{Impl: impl, Log: human, Root: root}
	var doc *results.Document
	var gradeErr error
	for _, t := range tasks {
		d, err := grader.Grade(ctx, t, opts)
		doc = merge(doc, d, id)
		if err != nil {
			gradeErr = err
			break
		}
	}
	path := filepath.Join(dir, "results.json")
	if werr := results.WriteFile(path, doc, f.force); werr != nil {
		return werr
	}
	if err := reports.Text(human, doc); err != nil {
		return err
	}
	fmt.Fprintf(human, "results: %s\n", path)
	if f.json {
		if err := doc.Encode(stdout); err != nil {
			return err
		}
	}
	switch {
	case gradeErr != nil && ctx.Err() != nil:
		return gradeErr
	case gradeErr != nil:
		return fmt.Errorf("grading stopped: %w", gradeErr)
	case doc.Status == results.StatusError:
		return errors.New("some checks could not be judged (status error); see their messages")
	case doc.Status != results.StatusPass:
		return failError{fmt.Sprintf("%s scored %g of %g", id, doc.Score, doc.MaxScore)}
	}
	return nil
}

// merge folds one task's document into the running one.
func merge(into, d *results.Document, id string) *results.Document {
	if into == nil {
		d.Task = id
		return d
	}
	into.Checks = append(into.Checks, d.Checks...)
	into.Runs = append(into.Runs, d.Runs...)
	into.Notes = append(into.Notes, d.Notes...)
	into.Interrupted = into.Interrupted || d.Interrupted
	into.Finished = d.Finished
	into.Total()
	return into
}

// outDir picks the results folder: --out, or a new timestamped folder that
// cannot collide with an earlier run's.
func outDir(f taskFlags, id string, impl grader.Impl) (string, error) {
	if f.out != "" {
		if !f.force {
			if _, err := os.Stat(filepath.Join(f.out, "results.json")); err == nil {
				return "", usagef("%s already holds a results.json; choose another --out or pass --force", f.out)
			}
		}
		return f.out, nil
	}
	base := filepath.Join("ratelab-runs", fmt.Sprintf("%s-%s-%s", id, impl, time.Now().UTC().Format("20060102-150405")))
	dir := base
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dir, nil
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}
