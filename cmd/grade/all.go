package main

import (
	"context"

	"ratelab/grader"
)

var cmdAll = &command{
	Name:      "all",
	UsageLine: "all" + gradeUsage,
	Short:     "grade every task",
	Long: `All grades every task in order and writes one results document for the
lot. Use --solutions to grade the reference (it must score full marks).

--repeat N grades each task N times in a row and reports the spread: a
check whose repeats disagree is marked inconclusive with every repeat's
values, never passed or failed silently, and the run exits 3.

The traffic runs in virtual time, the same figures on every machine; what
a bubble cannot judge (idle CPU, memory, time per call) runs on the wall
clock in the same grading. --real runs all of it on the wall clock, and so
does task 6 given --redis URL.

Each task's unit tests start while the task before it finishes work that
other load cannot change (its virtual-time floods), never beside another
task's unit tests or a wall-clock flood judged against the lesson's
model; beside task 3's flood of many keys they run at the lowest CPU
priority (nice 19). The log still reads one task after another. --repeat grades strictly one
task at a time.`,
	Run: withFlags(gradeFlags, runAll),
}

func runAll(ctx context.Context, f *taskFlags, args []string) error {
	if len(args) > 0 {
		return usagef("all takes no arguments, got %q", args)
	}
	return gradeTasks(ctx, "all", grader.Tasks(), *f)
}
