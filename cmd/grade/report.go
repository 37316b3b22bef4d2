package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"ratelab/reports"
	"ratelab/results"
)

func init() {
	commands = append(commands, &command{
		Name:      "report",
		UsageLine: "report DIR",
		Short:     "write the HTML report of a results.json",
		Long: `Report reads DIR/results.json (DIR may also be the file itself) and writes
an HTML report into DIR/report/: index.html with the score per task and per
check, the floods and the machine, and one page per task with its charts,
the lesson's model beside the measurements. The report works offline: the
charting library is written beside the pages. It prints the path of
index.html. See docs/REPORTS.md.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(_ context.Context, args []string) error {
				if len(args) != 1 {
					return usagef("want one folder holding a results.json, such as 'grade report ratelab-runs/task1-exercises-...'")
				}
				dir, doc, err := readResults(args[0])
				if err != nil {
					return err
				}
				index, err := writeReport(dir, doc)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "report: %s\n", index)
				return nil
			}
		},
	})
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
	doc, err := reports.ReadDocument(f)
	if err != nil {
		return "", nil, usagef("%s: %v", path, err)
	}
	return dir, doc, nil
}
