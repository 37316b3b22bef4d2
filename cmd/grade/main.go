// Command grade is ratelab's one command-line tool: it grades the lab's
// tasks, floods the fake GPU server and serves it for following the lesson
// by hand. Run `grade help` for the list of commands.
//
// Exit codes: 0 pass, 1 fail, 2 usage or bad input, 3 the grader itself
// failed, or could not judge (the machine was too busy, or --repeat's
// repeats disagreed).
//
// Each command lives in its own file: a *command value cmdX with its
// usage and help, and a function runX that runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"ratelab/grader"
)

// Exit codes.
const (
	exitPass   = 0
	exitFail   = 1
	exitUsage  = 2
	exitGrader = 3
)

// commands are grade's commands in the order 'grade help' lists them: the
// tasks first, then grading everything, the lesson's tools, the
// instructors' tools, and help.
var commands = slices.Concat(taskCommands(), []*command{
	cmdAll,
	cmdWatch,
	cmdStatus,
	cmdList,
	cmdHint,
	cmdReport,
	cmdCohort,
	cmdCompare,
	cmdClocks,
	cmdServe,
	cmdFlood,
	cmdStorm,
	cmdAmplify,
	cmdBreaker,
	cmdCounting,
	cmdProvider,
	cmdJudge,
	cmdExport,
	cmdManifest,
	cmdHelp,
})

// command is one subcommand, in the manner of cmd/go.
type command struct {
	Name      string
	UsageLine string // after "grade "
	Short     string
	Long      string
	// Run declares the command's flags on a FlagSet, into values of their
	// own, and returns the function that runs the command with them once
	// they are parsed. Every command line gets a fresh FlagSet and fresh
	// values, so nothing parsed outlives it. Make it with withFlags or
	// noFlags from the command's runX.
	Run func(fs *flag.FlagSet) runFunc
}

// runFunc runs a command with the arguments left after its flags.
type runFunc func(ctx context.Context, args []string) error

// withFlags makes a command's Run from a function that declares its flags
// on fs into a new *F, and its runX, which gets that *F.
func withFlags[F any](declare func(fs *flag.FlagSet) *F, run func(ctx context.Context, f *F, args []string) error) func(*flag.FlagSet) runFunc {
	return func(fs *flag.FlagSet) runFunc {
		f := declare(fs)
		return func(ctx context.Context, args []string) error { return run(ctx, f, args) }
	}
}

// noFlags makes the Run of a command without flags from its runX.
func noFlags(run runFunc) func(*flag.FlagSet) runFunc {
	return func(*flag.FlagSet) runFunc { return run }
}

// flagSet returns c's flags, declared on a fresh FlagSet that prints
// nothing, and the function that runs c with them.
func (c *command) flagSet() (*flag.FlagSet, runFunc) {
	fs := flag.NewFlagSet("grade "+c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, c.Run(fs)
}

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
	ctx, stop := interruptible(context.Background())
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// errInterrupted is the verdict of a document that was interrupted.
var errInterrupted = errors.New("interrupted")

// signalled is the cause of a context ended by a signal.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "interrupted by " + s.sig.String() }

// interruptible returns a context that ends, with a signalled cause, at
// the first SIGINT or SIGTERM, whether sent to grade alone or to its
// process group; stop undoes it.
func interruptible(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(signalled{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// interruptedCode is the exit status of a run that ctx's signal stopped,
// as shells give it: 128 plus the signal's number, 130 for SIGINT and 143
// for SIGTERM; exitFail if ctx ended otherwise.
func interruptedCode(ctx context.Context) int {
	var s signalled
	if errors.As(context.Cause(ctx), &s) {
		if n, ok := s.sig.(syscall.Signal); ok {
			return 128 + int(n)
		}
		return 128 + int(syscall.SIGINT)
	}
	return exitFail
}

// run executes one command line and returns the exit code. No arguments
// at all, inside a checkout, is 'grade status'; elsewhere, the help.
func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		if _, err := grader.FindRoot("."); err == nil {
			args = []string{cmdStatus.Name}
		}
	}
	line, err := parseLine(args)
	switch {
	case errors.Is(err, errNoCommand):
		printHelp(stderr)
		return exitUsage
	case errors.Is(err, flag.ErrHelp) && line == nil: // grade -h
		printHelp(stdout)
		return exitPass
	case errors.Is(err, flag.ErrHelp): // grade CMD -h
		helpFor(stdout, line.cmd)
		return exitPass
	case err != nil:
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	name := line.cmd.Name
	err = line.run(ctx, line.args)
	var ue usageError
	var fe failError
	switch {
	case err == nil:
		return exitPass
	case ctx.Err() != nil || errors.Is(err, errInterrupted):
		// SIGINT or SIGTERM: whatever was measured has been written,
		// marked interrupted, with no score.
		fmt.Fprintf(stderr, "grade %s: interrupted\n", name)
		return interruptedCode(ctx)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "grade %s: %v\n", name, err)
		return exitUsage
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "grade %s: %v\n", name, err)
		return exitFail
	default:
		fmt.Fprintf(stderr, "grade %s: %v\n", name, err)
		return exitGrader
	}
}

// line is a command line with its flags parsed.
type line struct {
	cmd  *command
	fs   *flag.FlagSet // the flags' values
	run  runFunc
	args []string // the arguments left after the flags
}

// errNoCommand is parseLine's error for a command line of flags alone, or
// none at all.
var errNoCommand = errors.New("no command")

// parseLine finds the command in args and parses its flags, which may come
// before its name (grade --out DIR all), after it, or among its arguments
// (grade flood 120 --seconds 5).
//
// The command is the first argument that names one and whose FlagSet
// accepts every argument before it as its flags and their values. Which of
// those arguments are values depends on the command (--out takes one in
// grade all), so each candidate is tried with its own FlagSet. The error
// wraps flag.ErrHelp for -h (with a nil *line before any command), is
// errNoCommand for flags alone, and is otherwise a usageError of one line
// (two for a flag error: the message and the command's usage).
func parseLine(args []string) (*line, error) {
	if len(args) == 0 {
		return nil, errNoCommand
	}
	var cmd *command
	var lead []string
	var leadErr error
	if !strings.HasPrefix(args[0], "-") {
		if cmd = lookup(args[0]); cmd == nil {
			return nil, usagef("grade: unknown command %q; run 'grade help' for the list", args[0])
		}
		args = args[1:]
	} else {
		for i := 1; i < len(args) && cmd == nil; i++ {
			c := lookup(args[i])
			if c == nil {
				continue
			}
			fs, _ := c.flagSet()
			err := leadingFlags(fs, args[:i])
			switch {
			case err == nil:
				cmd, lead, args = c, args[:i], args[i+1:]
			case leadErr == nil:
				leadErr = flagError(c, err)
			}
		}
	}
	if cmd == nil {
		switch {
		case leadErr != nil:
			return nil, leadErr
		case slices.ContainsFunc(args, isHelpFlag):
			return nil, flag.ErrHelp
		case slices.ContainsFunc(args, func(a string) bool { return !strings.HasPrefix(a, "-") }):
			return nil, usagef("grade: no command among %q; run 'grade help' for the list", args)
		}
		return nil, errNoCommand
	}
	fs, runCmd := cmd.flagSet()
	pos, err := parseInterleaved(fs, append(slices.Clip(lead), args...))
	l := &line{cmd: cmd, fs: fs, run: runCmd, args: pos}
	if errors.Is(err, flag.ErrHelp) {
		return l, err
	}
	if err != nil {
		return nil, flagError(cmd, err)
	}
	return l, nil
}

// flagError is a flag parsing error for cmd, with its usage line.
func flagError(cmd *command, err error) error {
	return usagef("grade %s: %v\nusage: grade %s", cmd.Name, err, cmd.UsageLine)
}

// leadingFlags checks that lead, the arguments before a command's name,
// are all flags of fs, each with its value when it takes one. -h and
// --help are accepted: parsing them asks for the command's help.
func leadingFlags(fs *flag.FlagSet, lead []string) error {
	for i := 0; i < len(lead); i++ {
		a := lead[i]
		name, ok := strings.CutPrefix(a, "-")
		name = strings.TrimPrefix(name, "-")
		if !ok || name == "" || strings.HasPrefix(name, "-") {
			return fmt.Errorf("%q before the command is not a flag", a)
		}
		name, _, inline := strings.Cut(name, "=")
		if isHelpFlag(a) {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("flag provided but not defined: -%s", name)
		}
		if !inline && takesValue(f) {
			if i+1 == len(lead) {
				return fmt.Errorf("flag needs an argument: -%s", name)
			}
			i++
		}
	}
	return nil
}

// takesValue reports whether f takes a value of its own (--out DIR), as
// the flag package decides it: unless its Value has an IsBoolFlag method
// that returns true (--solutions).
func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// isHelpFlag reports whether a is a flag that asks for help.
func isHelpFlag(a string) bool {
	switch a {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
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
