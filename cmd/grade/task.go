package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	format    string
	junit     string
	summary   string
	noReport  bool
	redis     string
	cluster   bool
	quick     bool
	real      bool
	virtual   bool // accepted and ignored: virtual time is the default
	repeat    int
	seed      uint64
	verbose   bool
}

// gradeFlags declares the flags of the grading commands (task1 ... and all)
// on fs.
func gradeFlags(fs *flag.FlagSet) *taskFlags {
	var f taskFlags
	fs.BoolVar(&f.solutions, "solutions", false, "grade the reference in solutions/ instead of your exercises/")
	fs.StringVar(&f.out, "out", "", "write results.json into this folder (default: a new folder under ratelab-runs/)")
	fs.BoolVar(&f.json, "json", false, "print the results document as JSON on stdout (the table goes to stderr); same as --format json")
	fs.BoolVar(&f.force, "force", false, "replace an existing results.json in --out")
	fs.StringVar(&f.format, "format", "text", "what to print on stdout: text, json, github (annotations and a job summary), classroom (GitHub Classroom's base64 result) or gradescope (its results.json)")
	fs.StringVar(&f.junit, "junit", "", "also write the checks as JUnit XML to this file")
	fs.StringVar(&f.summary, "summary", "", "also write a Markdown score table to this file (with --format github, $GITHUB_STEP_SUMMARY is used when set)")
	fs.BoolVar(&f.noReport, "no-report", false, "do not write the HTML report beside results.json")
	fs.BoolVar(&f.quick, "quick", false, fmt.Sprintf("practice run: every flood sends for %s instead of 10 s, with the bounds scaled to that; the result is marked practice and is not the graded score", grader.QuickDuration))
	fs.BoolVar(&f.real, "real", false, "run the traffic on the wall clock, as the lesson's hands-on part does, instead of in virtual time: minutes per task, and the figures vary with the machine's load (see docs/ARCHITECTURE.md, \"Two clocks\")")
	fs.BoolVar(&f.virtual, "virtual", false, "virtual time, the default: accepted so that older scripts run")
	fs.IntVar(&f.repeat, "repeat", 1, fmt.Sprintf("grade each task N times (1 to %d) and combine them: a check whose repeats disagree is marked inconclusive, with every repeat's values, and the run exits 3", maxRepeat))
	fs.Uint64Var(&f.seed, "seed", 0, "replay a run's random unit-test inputs: the seed its output and results.json give (default: a new one each run)")
	fs.BoolVar(&f.verbose, "v", false, "print every check with its message, the notes and the grader's progress in full; without it, the checks that did not pass, those that failed alike on one line, then what to do next")
	fs.StringVar(&f.redis, "redis", os.Getenv("REDIS_URL"), "task 6: the Redis that judges, such as redis://127.0.0.1:6379, on the wall clock (a real Redis keeps real time), or off for an embedded miniredis (default $REDIS_URL, else a private redis-server the grader starts and stops, else miniredis when none is installed); without a URL the floods run in virtual time on a miniredis in the session, and the unit suite's Redis/ checks on the private redis-server")
	fs.BoolVar(&f.cluster, "cluster", true, "task 6: also run the script on a private Redis Cluster of 3 primaries and 3 replicas, on the wall clock, wherever redis-server is installed (the default); --cluster=false skips those checks, and they then carry no points")
	return &f
}

// maxRepeat is the most --repeat allows: ten gradings of everything
// already take the best part of an hour.
const maxRepeat = 10

// formats are the values --format takes.
var formats = map[string]bool{"text": true, "json": true, "github": true, "classroom": true, "gradescope": true}

// gradeUsage is the usage line of the grading commands after their name.
const gradeUsage = " [-v] [--solutions] [--real] [--seed N] [--repeat N] [--out DIR] [--force] [--format text|json|github|classroom|gradescope] [--junit FILE] [--summary FILE] [--no-report]"

// taskCommands returns one command per task of grader.Tasks, in order:
// task1, task2, ...
func taskCommands() []*command {
	var cmds []*command
	for _, t := range grader.Tasks() {
		cmds = append(cmds, &command{
			Name:      t.ID,
			UsageLine: t.ID + gradeUsage,
			Short:     fmt.Sprintf("grade task %d: %s", t.Number, t.Title),
			Long: fmt.Sprintf(`%s runs task %d's stages, checks the lesson's invariants and prints a
score. The handout is %s; 'grade hint %s' prints the hints.

The results document (schema %s, see docs/RESULTS.md) is written to
DIR/results.json; an existing one is kept unless --force is given.

--repeat N grades the task N times and writes one document: a check whose
repeats disagree (some pass, some fail) is marked inconclusive, scores 0
and lists every repeat's verdict and values; the run then exits 3, since
that is the machine's noise and not the code.

The traffic runs in virtual time (a testing/synctest bubble over an
in-memory network, in a test binary built with the graded code): the same
figures on every machine, in seconds. What a bubble cannot judge (idle CPU,
memory, and task 6 for now) runs on the wall clock in the same grading.
--real runs all of it on the wall clock, as the lesson's hands-on part
does; the document records each run's clock.`, t.ID, t.Number, t.Handout, t.ID, results.Schema),
			Run: withFlags(gradeFlags, func(ctx context.Context, f *taskFlags, args []string) error {
				return runTask(ctx, t, f, args)
			}),
		})
	}
	return cmds
}

// runTask grades one task.
func runTask(ctx context.Context, t grader.Task, f *taskFlags, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", t.ID, args)
	}
	return gradeTasks(ctx, t.ID, []grader.Task{t}, *f)
}

// gradeTasks grades tasks, merges their documents into one named id, writes
// it and prints it.
func gradeTasks(ctx context.Context, id string, tasks []grader.Task, f taskFlags) error {
	if f.json {
		f.format = "json"
	}
	if !formats[f.format] {
		return usagef("--format %q: want text, json, github, classroom or gradescope", f.format)
	}
	if f.real && f.virtual {
		return usagef("--real and --virtual: pick one clock (virtual time is the default)")
	}
	if f.repeat < 1 || f.repeat > maxRepeat {
		return usagef("--repeat %d: want 1 to %d", f.repeat, maxRepeat)
	}
	impl := grader.Exercises
	if f.solutions {
		impl = grader.Solutions
	}
	dir, err := outDir(f, id, impl)
	if err != nil {
		return err
	}
	human := stdout
	if f.format != "text" && f.format != "github" {
		human = stderr // stdout carries the machine-readable document
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	if impl == grader.Solutions && !grader.HasSolutions(root) {
		return usagef("--solutions: this tree has no solutions/ (a learner template); grade your exercises without it")
	}
	seed := f.seed
	if seed == 0 {
		seed = grader.NewSeed()
	}
	var log io.Writer = human
	quiet := newQuietLog(human)
	if !f.verbose {
		log = quiet
	}
	opts := grader.Options{Impl: impl, Log: log, Root: root, Progress: progressPrinter(human), RedisURL: f.redis, NoCluster: !f.cluster, Quick: f.quick, Virtual: !f.real, Seed: seed}
	if f.quick {
		fmt.Fprintf(human, "PRACTICE RUN (--quick): floods send for %s, not the lesson's 10 s; grade without --quick for the score that counts\n", grader.QuickDuration)
	}
	// Only wall-clock floods need a machine that keeps the lesson's rates.
	if slices.ContainsFunc(tasks, func(t grader.Task) bool { return grader.NeedsCalibration(t, opts) }) {
		cal, err := grader.Calibrate(ctx)
		if err != nil {
			return fmt.Errorf("calibrate the load generator: %w", err)
		}
		opts.Calibration = cal
		fmt.Fprintf(human, "calibration: %d of %d requests at %g/s sent, send lag p99 %.1f ms, a 100 ms sleep overshoots by %.2f ms: %s\n",
			cal.Issued, cal.Expected, cal.CalibrateRate, cal.SendLagP99MS, cal.SleepOverMS, map[bool]string{true: "ok", false: "NOT OK, " + cal.Reason}[cal.OK])
	} else if f.verbose {
		fmt.Fprintln(human, "no calibration: the floods the model predicts run in virtual time, the same on any machine however busy; the few on the wall clock beside them are judged from the server's own records")
	}
	if f.verbose {
		fmt.Fprintf(human, "random unit-test inputs from seed %d (replay them with --seed %d)\n", seed, seed)
	}
	var doc *results.Document
	var gradeErr error
	if f.repeat > 1 {
		for _, t := range tasks {
			d, err := gradeRepeated(ctx, t, opts, f.repeat, human)
			doc = merge(doc, d, id)
			if err != nil {
				gradeErr = err
				break
			}
		}
	} else {
		// One after another, each task's unit stage beside the end of the
		// task before it (grader.Series).
		grader.Series(ctx, tasks, opts, func(_ grader.Task, d *results.Document, err error) bool {
			doc = merge(doc, d, id)
			gradeErr = err
			return false
		})
	}
	if doc == nil {
		return fmt.Errorf("grading stopped: %w", gradeErr)
	}
	if key := os.Getenv(results.SigningKeyEnv); key != "" {
		if err := results.Sign(doc, []byte(key)); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, "results.json")
	if werr := results.WriteFile(path, doc, f.force); werr != nil {
		return werr
	}
	if err := quiet.Clear(); err != nil {
		return err
	}
	if f.verbose {
		err = reports.Text(human, doc)
	} else {
		err = reports.Brief(human, doc)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(human, "results: %s\n", path)
	if !f.noReport {
		index, err := writeReport(dir, doc)
		if err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
		fmt.Fprintf(human, "report: %s\n", index)
	}
	if err := writeFormats(doc, f, root); err != nil {
		return err
	}
	if doc.Status == results.StatusFail {
		again := ""
		if !f.verbose {
			again = fmt.Sprintf("grade %s -v", id)
		}
		printNextStep(human, root, doc, again)
	}
	switch {
	case gradeErr != nil && ctx.Err() != nil:
		return gradeErr
	case gradeErr != nil:
		return fmt.Errorf("grading stopped: %w", gradeErr)
	}
	return verdictError(id, doc)
}

// verdictError is what a finished document's status makes of the run: nil
// for a pass, a failError (exit 1) for a fail, and a plain error (exit 3)
// when checks could not be judged or disagreed across repeats, which is
// the machine and not the learner.
func verdictError(id string, doc *results.Document) error {
	switch doc.Status {
	case results.StatusPass:
		return nil
	case results.StatusError:
		return errors.New("some checks could not be judged (status error); see their messages")
	case results.StatusInconclusive:
		return errors.New("some checks disagreed across repeats; they are marked inconclusive with their values (grade again on a quieter machine)")
	case results.StatusInterrupted:
		return errInterrupted
	}
	return failError{fmt.Sprintf("%s scored %g of %g", id, doc.Score, doc.MaxScore)}
}

// writeFormats prints or writes the other forms of doc that f asks for.
func writeFormats(doc *results.Document, f taskFlags, root string) error {
	loc := locator(root)
	summary := f.summary
	if summary == "" && f.format == "github" {
		summary = os.Getenv("GITHUB_STEP_SUMMARY")
	}
	if summary != "" {
		// GitHub's step summary is appended to, never replaced.
		out, err := os.OpenFile(summary, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("write --summary: %w", err)
		}
		if err := reports.Markdown(out, doc); err != nil {
			out.Close()
			return fmt.Errorf("write --summary: %w", err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("write --summary: %w", err)
		}
	}
	if f.junit != "" {
		var b strings.Builder
		if err := results.WriteJUnit(&b, doc, loc); err != nil {
			return err
		}
		if err := os.WriteFile(f.junit, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("write --junit: %w", err)
		}
	}
	switch f.format {
	case "json":
		return doc.Encode(stdout)
	case "classroom":
		s, err := results.ClassroomBase64(doc, loc)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, s)
		return appendEnvFile("GITHUB_OUTPUT", "result="+s+"\n")
	case "gradescope":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results.Gradescope(doc))
	case "github":
		for _, a := range results.Annotations(doc, loc) {
			fmt.Fprintln(stdout, a.String())
		}
	}
	return nil
}

// appendEnvFile appends text to the file named by the environment variable
// name (GitHub's GITHUB_OUTPUT, GITHUB_STEP_SUMMARY), if it is set.
func appendEnvFile(name, text string) error {
	path := os.Getenv(name)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write $%s: %w", name, err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("write $%s: %w", name, err)
	}
	return f.Close()
}

// locator points each task's checks at the file its learner edits, at the
// first TODO left in it (or line 1).
func locator(root string) results.Locator {
	return func(id string) results.Location {
		t, ok := grader.Lookup(id)
		if !ok || len(t.Files) == 0 {
			return results.Location{}
		}
		l := results.Location{File: t.Files[0], Line: 1}
		b, err := os.ReadFile(filepath.Join(root, t.Files[0]))
		if err != nil {
			return l
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "TODO(task") {
				l.Line = i + 1
				break
			}
		}
		return l
	}
}

// gradeRepeated grades t n times in a row and combines the documents with
// results.Combine. It stops at the first repeat that returns an error (such
// as Ctrl-C) and combines what it has. It returns nil only if no repeat
// wrote a document.
func gradeRepeated(ctx context.Context, t grader.Task, opts grader.Options, n int, log io.Writer) (*results.Document, error) {
	var docs []*results.Document
	var err error
	for k := 1; k <= n; k++ {
		if n > 1 {
			fmt.Fprintf(log, "%s: repeat %d of %d\n", t.ID, k, n)
		}
		var d *results.Document
		d, err = grader.Grade(ctx, t, opts)
		if d != nil {
			docs = append(docs, d)
		}
		if err != nil {
			break
		}
	}
	if len(docs) == 0 {
		return nil, err
	}
	doc, cerr := results.Combine(docs)
	if cerr != nil {
		return docs[0], errors.Join(err, cerr)
	}
	return doc, err
}

// merge folds one task's document into the running one.
func merge(into, d *results.Document, id string) *results.Document {
	if d == nil {
		return into
	}
	if into == nil {
		d.Task = id
		return d
	}
	into.Checks = append(into.Checks, d.Checks...)
	into.Runs = append(into.Runs, d.Runs...)
	into.Notes = append(into.Notes, d.Notes...)
	into.Interrupted = into.Interrupted || d.Interrupted
	into.Repeat = max(into.Repeat, d.Repeat)
	into.Storms = append(into.Storms, d.Storms...)
	into.Scenarios = append(into.Scenarios, d.Scenarios...)
	into.Counting = append(into.Counting, d.Counting...)
	into.BucketPlays = append(into.BucketPlays, d.BucketPlays...)
	if d.Judge != nil {
		into.Judge = d.Judge
	}
	if d.Redis != nil {
		into.Redis = d.Redis
	}
	if d.Cluster != nil {
		into.Cluster = d.Cluster
	}
	into.Finished = d.Finished
	for task, secs := range d.TaskSeconds {
		if into.TaskSeconds == nil {
			into.TaskSeconds = map[string]float64{}
		}
		into.TaskSeconds[task] += secs
	}
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
	kind := string(impl)
	if f.quick {
		kind += "-practice"
	}
	base := filepath.Join("ratelab-runs", fmt.Sprintf("%s-%s-%s", id, kind, time.Now().UTC().Format("20060102-150405")))
	dir := base
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dir, nil
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// progressPrinter shows a flood's progress: a line redrawn in place on a
// terminal, or a plain line every few seconds in a CI log. NO_COLOR and
// TERM=dumb get the plain form.
func progressPrinter(w io.Writer) func(run string, elapsed, total time.Duration, sent int64) {
	tty := isTerminal(w)
	var lastPlain time.Duration
	return func(run string, elapsed, total time.Duration, sent int64) {
		done := min(elapsed.Seconds()/total.Seconds(), 1)
		if tty {
			bar := strings.Repeat("█", int(done*20)) + strings.Repeat("░", 20-int(done*20))
			fmt.Fprintf(w, "\r    %s %s %4.1fs / %.0fs  sent %d", run, bar, elapsed.Seconds(), total.Seconds(), sent)
			if done >= 1 || elapsed+time.Second > total {
				fmt.Fprint(w, "\r\033[K")
			}
			return
		}
		if elapsed-lastPlain >= 3*time.Second {
			lastPlain = elapsed
			fmt.Fprintf(w, "    ... %s: %.0fs of %.0fs, %d sent\n", run, elapsed.Seconds(), total.Seconds(), sent)
		}
	}
}
