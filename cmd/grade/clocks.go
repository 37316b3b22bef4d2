package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"

	"ratelab/grader"
	"ratelab/results"
)

var cmdClocks = &command{
	Name:      "clocks",
	UsageLine: "clocks VIRTUAL WALL",
	Short:     "compare a grading in virtual time with one on the wall clock",
	Long: `Clocks compares two results documents of the same tasks: VIRTUAL graded in
virtual time (the default) and WALL graded with --real. Every flood and
storm that ran in virtual time in the first is matched by task and name
with its wall-clock twin in the second, and each figure is printed with
the band the wall-clock one must fall in: a flood's successes within ±5%
or ±6 of the virtual count (what the checks allow between a wall-clock
flood and the simulation), a storm's time and attempts within ±15%, or
±25% with jitter (its random draws differ between any two runs).

Virtual time is the lesson's model, exactly; this says whether this
machine's wall clock agrees with it. CI runs it on the reference.

Each argument is a results.json file or a folder holding one. Exit status
1 if a figure is outside its band or nothing could be matched. Documents
of tasks that flood nothing (task 5's client meets the fake API, not the
fake GPU) have nothing to disagree on: clocks says so and exits 0.`,
	Run: noFlags(runClocks),
}

func runClocks(_ context.Context, args []string) error {
	if len(args) != 2 {
		return usagef("want two results documents, VIRTUAL and WALL, such as 'grade clocks runs/virtual runs/real'")
	}
	var docs [2]*results.Document
	for i, a := range args {
		_, d, err := readResults(a)
		if err != nil {
			return err
		}
		docs[i] = d
	}
	figures, unmatched := grader.CompareClocks(docs[0], docs[1])
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ttask\tflood or storm\tfigure\tvirtual\twall\tband\t")
	outside := 0
	for _, f := range figures {
		mark := "ok"
		if !f.Within() {
			mark, outside = "OUTSIDE", outside+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4g\t%.4g\t%.4g–%.4g\t%s\n", mark, f.Task, f.Name, f.Figure, f.Virtual, f.Wall, f.Low, f.High, f.Why)
	}
	tw.Flush()
	for _, u := range unmatched {
		fmt.Fprintf(stdout, "no wall-clock twin: %s\n", u)
	}
	switch {
	case len(figures) == 0 && !floodsOrStorms(docs[0]) && !floodsOrStorms(docs[1]):
		fmt.Fprintln(stdout, "nothing to compare: neither document has a flood or storm, so the clocks cannot disagree")
		return nil
	case len(figures) == 0:
		return failError{"nothing to compare: the first document has no virtual-time flood or storm with a wall-clock twin in the second"}
	case outside > 0:
		return failError{fmt.Sprintf("%d of %d figures on the wall clock fall outside the band their virtual-time twin allows", outside, len(figures))}
	}
	fmt.Fprintf(stdout, "the clocks agree: %d figures, each within its band\n", len(figures))
	return nil
}

// floodsOrStorms reports whether d holds any flood or storm, on either
// clock: what clocks compares.
func floodsOrStorms(d *results.Document) bool {
	return slices.ContainsFunc(d.Runs, func(r *results.Run) bool { return r != nil }) ||
		slices.ContainsFunc(d.Storms, func(s *results.Storm) bool { return s != nil })
}
