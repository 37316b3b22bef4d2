package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/grader"
	"ratelab/harness"
	"ratelab/reports"
	"ratelab/results"
)

// maxSweepRates bounds a --rates sweep: each rate is a fresh server and a
// whole flood.
const maxSweepRates = 20

// sweepTask is the task whose report page draws a sweep in mode: its
// goodput-against-offered chart and model curve.
var sweepTask = map[fakegpu.Mode]string{fakegpu.ModeNone: "task1", fakegpu.ModeShed: "task2", fakegpu.ModeBucket: "task3"}

// runSweep floods a fresh server at each rate of --rates, prints a line per
// rate and writes results.json with its HTML report.
func runSweep(ctx context.Context, o *floodOptions, args []string) error {
	if len(args) > 0 {
		return usagef("--rates replaces RATE: give one or the other")
	}
	if o.url != "" {
		return usagef("--rates floods a fresh server for each rate, as the lesson says; --url names one already running (flood it one rate at a time)")
	}
	if err := checkFloodFlags(o); err != nil {
		return err
	}
	mode, err := fakegpu.ParseMode(o.mode)
	if err != nil {
		return usageError{err.Error()}
	}
	task, ok := sweepTask[mode]
	if !ok {
		return usagef("--rates sweeps modes none, shed and bucket")
	}
	var rates []float64
	for _, f := range strings.Split(o.rates, ",") {
		r, err := parseRate(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		rates = append(rates, r)
	}
	if len(rates) > maxSweepRates {
		return usagef("--rates: %d rates; want at most %d", len(rates), maxSweepRates)
	}
	dir := o.out
	if dir == "" {
		dir = newRunDir("sweep-" + string(mode))
	} else if _, err := os.Stat(filepath.Join(dir, "results.json")); err == nil {
		return usagef("%s already holds a results.json; choose another --out", dir)
	}
	impl := grader.Exercises
	if o.solutions {
		impl = grader.Solutions
	}
	doc := &results.Document{Schema: results.Schema, Task: task, Impl: string(impl), Started: time.Now(),
		Checks: []results.Check{}, Runs: []*results.Run{}, Env: results.CurrentEnv("")}
	var floodErr error
	for _, rate := range rates {
		opts := harness.Options{
			Name: fmt.Sprintf("%s %g/s", mode, rate), Rate: rate,
			Duration: time.Duration(o.seconds * float64(time.Second)), Timeout: o.timeout,
		}
		if o.clientID != "" {
			opts.Header = http.Header{"X-Client-Id": []string{o.clientID}}
		}
		run, err := floodFresh(ctx, o.mode, o.solutions, opts)
		if run != nil {
			run.Task = task
			doc.Runs = append(doc.Runs, run)
			if !o.json {
				if perr := reports.FloodLine(stdout, run); perr != nil {
					return perr
				}
			}
		}
		if err != nil {
			floodErr = err // an interrupted sweep still writes what it measured
			doc.Interrupted = ctx.Err() != nil
			break
		}
	}
	doc.Finished = time.Now()
	if len(doc.Runs) == 0 {
		return floodErr
	}
	path := filepath.Join(dir, "results.json")
	if err := results.WriteFile(path, doc, false); err != nil {
		return err
	}
	index, err := writeReport(dir, doc)
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if o.json {
		if err := doc.Encode(stdout); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "results: %s\nreport: %s\n", path, filepath.Join(filepath.Dir(index), task+".html"))
	}
	return floodErr
}
