package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ratelab/grader"
	"ratelab/reports"
	"ratelab/results"
)

var cmdReport = &command{
	Name:      "report",
	UsageLine: "report DIR [--format F] [--junit FILE] [--summary FILE] [--no-report]",
	Short:     "write the HTML report, or another format, of a results.json",
	Long: `Report reads DIR/results.json (DIR may also be the file itself) and writes
an HTML report into DIR/report/: index.html with the score per task and per
check, the floods and the machine, and one page per task with its charts,
the lesson's model beside the measurements. The report works offline: the
charting library is written beside the pages. It prints the path of
index.html. See docs/REPORTS.md.

--format, --junit and --summary turn a document graded earlier into the
same forms grade itself prints, without grading again: a CI job grades
once and reports to GitHub Classroom (--format classroom, which also
writes result= to $GITHUB_OUTPUT), Gradescope or JUnit from its
results.json. The exit code is the document's own verdict, as grade's.`,
	Run: withFlags(reportFlags, runReport),
}

// reportFlags declares report's flags: those of the grading commands that
// shape their output.
func reportFlags(fs *flag.FlagSet) *taskFlags {
	var f taskFlags
	fs.StringVar(&f.format, "format", "", "also print the document as text, json, github, classroom or gradescope (as grade --format)")
	fs.StringVar(&f.junit, "junit", "", "also write the checks as JUnit XML to this file")
	fs.StringVar(&f.summary, "summary", "", "also write a Markdown score table to this file")
	fs.BoolVar(&f.noReport, "no-report", false, "do not write the HTML report")
	return &f
}

func runReport(_ context.Context, f *taskFlags, args []string) error {
	if len(args) != 1 {
		return usagef("want one folder holding a results.json, such as 'grade report ratelab-runs/task1-exercises-...'")
	}
	if f.format != "" && !formats[f.format] {
		return usagef("--format %q: want text, json, github, classroom or gradescope", f.format)
	}
	dir, doc, err := readResults(args[0])
	if err != nil {
		return err
	}
	human := stdout
	if f.format != "" && f.format != "text" && f.format != "github" {
		human = stderr // stdout carries the machine-readable form
	}
	if !f.noReport {
		index, err := writeReport(dir, doc)
		if err != nil {
			return err
		}
		fmt.Fprintf(human, "report: %s\n", index)
	}
	if f.format == "" && f.junit == "" && f.summary == "" {
		return nil
	}
	if f.format == "text" {
		if err := reports.Text(stdout, doc); err != nil {
			return err
		}
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		root = "" // annotations then point at no file
	}
	if err := writeFormats(doc, *f, root); err != nil {
		return err
	}
	return verdictError(doc.Task, doc)
}

// writeReport writes doc's HTML report into dir/report/ and returns the path
// of its index.html. The task commands call it after writing
// dir/results.json.
func writeReport(dir string, doc *results.Document) (string, error) {
	out := filepath.Join(dir, "report")
	if err := reports.WriteHTML(out, doc); err != nil {
		return "", err
	}
	return filepath.Join(out, "index.html"), nil
}

// readResults finds and decodes the results document named by arg: a folder
// holding results.json, or the file itself. It returns the folder the
// report belongs in. Anything wrong with the input is a usage error (exit 2)
// with one line saying what.
func readResults(arg string) (string, *results.Document, error) {
	info, err := os.Stat(arg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, usagef("%s: no such file or folder", arg)
	case err != nil:
		return "", nil, usagef("%s: %v", arg, err)
	}
	dir, path := arg, filepath.Join(arg, "results.json")
	if !info.IsDir() {
		dir, path = filepath.Dir(arg), arg
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, usagef("%s holds no results.json; give the folder a grade run wrote (--out DIR)", arg)
	}
	if err != nil {
		return "", nil, usagef("%s: %v", path, err)
	}
	defer f.Close()
	doc, err := results.Decode(f)
	if err != nil {
		return "", nil, usagef("%s: %v", path, err)
	}
	return dir, doc, nil
}
