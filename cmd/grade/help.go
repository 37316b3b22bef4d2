package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

var cmdHelp = &command{
	Name:      "help",
	UsageLine: "help [command]",
	Short:     "show help for grade or one of its commands",
	Long:      "Help shows the list of commands, or the usage, description and flags of one.",
	// Run is set in init below.
}

// cmdHelp's Run is set here rather than in its declaration: runHelp reads
// the commands table, which holds cmdHelp, and Go refuses a package
// variable whose initializer depends on itself (an initialization cycle).
// cmd/go breaks the same cycle the same way.
func init() {
	cmdHelp.Run = noFlags(runHelp)
}

func runHelp(_ context.Context, args []string) error {
	switch len(args) {
	case 0:
		printHelp(stdout)
		return nil
	case 1:
		c := lookup(args[0])
		if c == nil {
			return usagef("unknown command %q; run 'grade help' for the list", args[0])
		}
		helpFor(stdout, c)
		return nil
	}
	return usagef("help takes at most one command")
}

// printHelp writes the list of commands, in the order of the table.
func printHelp(w io.Writer) {
	fmt.Fprintf(w, `grade is ratelab's grader, load generator and fake GPU server.

Usage:

	grade <command> [flags] [arguments]

The commands are:

`)
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-10s %s\n", c.Name, c.Short)
	}
	fmt.Fprintf(w, `
Use "grade help <command>" for more about a command.

Exit codes: 0 pass, 1 fail, 2 usage or bad input, 3 the grader itself failed
or could not judge (the machine too busy, or --repeat's repeats disagreed).
`)
}

// helpFor writes one command's usage, description and flags.
func helpFor(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: grade %s\n\n%s\n", c.UsageLine, strings.TrimSpace(c.Long))
	fs, _ := c.flagSet()
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}
