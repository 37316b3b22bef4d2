package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"ratelab/reports"
)

var cmdCohort = &command{
	Name:      "cohort",
	UsageLine: "cohort DIR... [--out DIR]",
	Short:     "compare many results.json files in one report",
	Long: `Cohort reads many results documents and writes a comparison report: the
score distribution, the pass rate of every check, the spread of the floods'
key measurements (goodput, p99, and storm time and attempts when there are
storms) with their outliers, as HTML, and the data as CSV: checks.csv (one
row per file and check), runs.csv (one row per file and flood or storm) and
skipped.csv. See docs/REPORTS.md for the columns.

With RATELAB_SIGNING_KEY set (the key the class's CI signed with), every
file's signature is checked: unsigned files are marked, and forged ones
(edited after grading, or signed with another key) are skipped and never
counted.

Each DIR is a results.json file, or a folder searched recursively for files
named results.json. Files that are malformed, truncated, of another schema
or byte-for-byte copies of one already read are skipped with the reason:
they are listed, never counted. The report goes to --out (default: a new
folder under ratelab-runs/); it prints the path of its index.html.`,
	Run: withFlags(cohortFlags, runCohort),
}

// cohortOptions are cohort's flags.
type cohortOptions struct {
	out string
}

func cohortFlags(fs *flag.FlagSet) *cohortOptions {
	var o cohortOptions
	fs.StringVar(&o.out, "out", "", "write the report into this folder (default: a new folder under ratelab-runs/)")
	return &o
}

func runCohort(_ context.Context, o *cohortOptions, args []string) error {
	if len(args) == 0 {
		return usagef("want at least one folder or results.json, such as 'grade cohort submissions/'")
	}
	c, err := reports.LoadCohort(args)
	if err != nil {
		return usageError{err.Error()}
	}
	for _, s := range c.Skipped {
		fmt.Fprintf(stderr, "skipped %s: %s\n", s.Path, s.Reason)
	}
	if len(c.Docs) == 0 {
		return usagef("no readable results document among %q (%d skipped)", args, len(c.Skipped))
	}
	dir := o.out
	if dir == "" {
		dir = cohortDir()
	}
	if err := reports.WriteCohort(dir, c); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cohort: %d documents, %d skipped\nreport: %s\ncsv: %s, %s, %s\n", len(c.Docs), len(c.Skipped),
		filepath.Join(dir, "index.html"), filepath.Join(dir, "checks.csv"), filepath.Join(dir, "runs.csv"), filepath.Join(dir, "skipped.csv"))
	return nil
}

// cohortDir is a new folder under ratelab-runs/ for a cohort report.
func cohortDir() string { return newRunDir("cohort") }

// newRunDir is a folder under ratelab-runs/ named after kind and the time,
// that no earlier run has used.
func newRunDir(kind string) string {
	base := filepath.Join("ratelab-runs", kind+"-"+time.Now().UTC().Format("20060102-150405"))
	dir := base
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return dir
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}
