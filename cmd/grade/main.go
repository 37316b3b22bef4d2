// Command grade is ratelab's one command-line tool: it grades the lab's
// tasks, floods the fake GPU server and serves it for following the lesson
// by hand. Run `grade help` for the list of commands.
//
// Exit codes: 0 pass, 1 fail, 2 usage or bad input, 3 the grader itself
// failed, or could not judge (the machine was too busy, or --repeat's
// repeats disagreed).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitPass   = 0
	exitFail   = 1
	exitUsage  = 2
	exitGrader = 3
)

// command is one subcommand, in the manner of cmd/go.
type command struct {
	Name      string
	UsageLine string // after "grade "
	Short     string
	Long      string
	// Flags declares the command's flags on fs and returns the function
	// that runs it with the remaining arguments.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

// commands is filled in init so that help can list them.
var commands []*command

// usageError is bad input: exit 2 with one line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// failError is a verdict: the graded work failed (exit 1).
type failError struct{ msg string }

func (e failError) Error() string { return e.msg }

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string) int {
	// Flags may come before the command (grade --solutions all); they are
	// handed to the command along with those after it.
	var lead []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			args = []string{"help"}
			break
		}
		lead = append(lead, args[0])
		args = args[1:]
		if len(lead) > 0 && !strings.Contains(lead[len(lead)-1], "=") && takesValue(lead[len(lead)-1]) && len(args) > 0 {
			lead = append(lead, args[0])
			args = args[1:]
		}
	}
	if len(args) == 0 {
		printHelp(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "grade: unknown command %q; run 'grade help' for the list\n", name)
		return exitUsage
	}
	fs := flag.NewFlagSet("grade "+cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runFn := cmd.Flags(fs)
	pos, err := parseInterleaved(fs, append(lead, rest...))
	if errors.Is(err, flag.ErrHelp) {
		helpFor(stdout, cmd)
		return exitPass
	}
	if err != nil {
		fmt.Fprintf(stderr, "grade %s: %v\nusage: grade %s\n", cmd.Name, err, cmd.UsageLine)
		return exitUsage
	}
	err = runFn(ctx, pos)
	var ue usageError
	var fe failError
	switch {
	case err == nil:
		return exitPass
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "grade %s: %v\n", cmd.Name, err)
		return exitUsage
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "grade %s: %v\n", cmd.Name, err)
		return exitFail
	case ctx.Err() != nil:
		// Ctrl-C: whatever was measured has been written, marked interrupted.
		fmt.Fprintf(stderr, "grade %s: interrupted\n", cmd.Name)
		return exitFail
	default:
		fmt.Fprintf(stderr, "grade %s: %v\n", cmd.Name, err)
		return exitGrader
	}
}

// valueFlags are the flags that take a separate value, for the flags given
// before the command name.
var valueFlags = map[string]bool{"out": true, "seconds": true, "timeout": true, "mode": true, "url": true, "port": true,
	"summary": true, "junit": true, "format": true, "workers": true, "redis": true, "repeat": true}

func takesValue(arg string) bool {
	return valueFlags[strings.TrimLeft(arg, "-")]
}

// parseInterleaved parses flags wherever they appear among the positional
// arguments (grade flood 120 --seconds 5), and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, `grade is ratelab's grader, load generator and fake GPU server.

Usage:

	grade <command> [flags] [arguments]

The commands are:

`)
	for _, c := range sortedCommands() {
		fmt.Fprintf(w, "\t%-10s %s\n", c.Name, c.Short)
	}
	fmt.Fprintf(w, `
Use "grade help <command>" for more about a command.

Exit codes: 0 pass, 1 fail, 2 usage or bad input, 3 the grader itself failed
or could not judge (the machine too busy, or --repeat's repeats disagreed).
`)
}

// commandOrder ranks commands for the help list: the tasks first, in order,
// then grading everything, then the tools, then help.
var commandOrder = []string{"all", "watch", "list", "hint", "report", "cohort", "serve", "flood", "help"}

// sortedCommands returns the commands in help order.
func sortedCommands() []*command {
	rank := func(c *command) string {
		if strings.HasPrefix(c.Name, "task") {
			return fmt.Sprintf("0%8s", c.Name)
		}
		for i, n := range commandOrder {
			if n == c.Name {
				return fmt.Sprintf("1%03d", i)
			}
		}
		return "2" + c.Name
	}
	out := append([]*command(nil), commands...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

func helpFor(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: grade %s\n\n%s\n", c.UsageLine, strings.TrimSpace(c.Long))
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	c.Flags(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func init() {
	commands = append(commands, &command{
		Name:      "help",
		UsageLine: "help [command]",
		Short:     "show help for grade or one of its commands",
		Long:      "Help shows the list of commands, or the usage, description and flags of one.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(_ context.Context, args []string) error {
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
		},
	})
}
