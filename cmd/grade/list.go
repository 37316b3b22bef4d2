package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"ratelab/grader"
)

func init() {
	commands = append(commands, &command{
		Name:      "list",
		UsageLine: "list",
		Short:     "list the lab's tasks",
		Long:      "List shows every task with its title, the files to edit and its handout.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(_ context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("list takes no arguments")
				}
				for _, t := range grader.Tasks() {
					files := "nothing to edit: watch and measure"
					if len(t.Files) > 0 {
						files = "edit " + strings.Join(t.Files, ", ")
					}
					fmt.Fprintf(stdout, "%-7s %s\n        %s; handout %s\n", t.ID, t.Title, files, t.Handout)
				}
				return nil
			}
		},
	})
	commands = append(commands, &command{
		Name:      "hint",
		UsageLine: "hint TASK",
		Short:     "print a task's hints",
		Long:      "Hint prints the hints of one task, such as 'grade hint task1'. Hints name the idea and where to read more; they give no code.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(_ context.Context, args []string) error {
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
		},
	})
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
