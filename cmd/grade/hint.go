package main

import (
	"context"
	"fmt"
	"strings"

	"ratelab/grader"
)

var cmdHint = &command{
	Name:      "hint",
	UsageLine: "hint TASK",
	Short:     "print a task's hints",
	Long:      "Hint prints the hints of one task, such as 'grade hint task1'. Hints name the idea and where to read more; they give no code.",
	Run:       noFlags(runHint),
}

func runHint(_ context.Context, args []string) error {
	if len(args) != 1 {
		return usagef("want one task, such as 'grade hint task1'")
	}
	t, ok := grader.Lookup(args[0])
	if !ok {
		return usagef("unknown task %q; 'grade list' shows them", args[0])
	}
	fmt.Fprintf(stdout, "%s: %s (handout: %s)\n", t.ID, t.Title, t.Handout)
	for i, h := range t.Hints {
		fmt.Fprintf(stdout, "\nhint %d:\n%s\n", i+1, indent(h))
	}
	return nil
}

// indent indents every line of s by two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
