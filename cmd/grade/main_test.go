package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/grader"
	"ratelab/results"
)

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// runCapture runs a command line and returns its exit code and output.
func runCapture(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	stdout, stderr = &out, &errOut
	defer func() { stdout, stderr = os.Stdout, os.Stderr }()
	code := run(ctx, args)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := fmt.Sprint(busy.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"flood"}, "want exactly one RATE"},
		{[]string{"flood", "0"}, "rate 0"},
		{[]string{"flood", "-5"}, "flag provided but not defined"}, // read as a flag
		{[]string{"flood", "--", "-5"}, "rate -5"},
		{[]string{"flood", "NaN"}, `rate "NaN"`},
		{[]string{"flood", "abc"}, `rate "abc"`},
		{[]string{"flood", "1e12"}, "at most"},
		{[]string{"flood", "100", "--seconds", "0"}, "--seconds 0"},
		{[]string{"flood", "100", "--timeout", "-1s"}, "--timeout"},
		{[]string{"flood", "100", "--mode", "turbo"}, `unknown mode "turbo"`},
		{[]string{"flood", "100", "--url", "http://192.168.1.10:8000"}, "only target loopback"},
		{[]string{"flood", "100", "--url", "http://127.0.0.1:1"}, "cannot reach"},
		{[]string{"flood", "--rates", "80,abc"}, `rate "abc"`},
		{[]string{"flood", "120", "--rates", "80,120"}, "--rates replaces RATE"},
		{[]string{"flood", "--rates", "80", "--url", "http://127.0.0.1:8000"}, "fresh server for each rate"},
		{[]string{"flood", "--rates", "80", "--mode", "redis"}, "sweeps modes none, shed and bucket"},
		{[]string{"flood", "--rates", strings.Repeat("80,", 20) + "80"}, "at most 20"},
		{[]string{"flood", "120", "--out", "x"}, "--out goes with --rates"},
		{[]string{"flood", "120", "--pattern", "square"}, `--pattern: unknown pattern "square"`},
		{[]string{"flood", "120", "--spike", "30"}, "--spike goes with --pattern spikes"},
		{[]string{"flood", "120", "--pattern", "poisson", "--from", "3"}, "--from goes with --pattern ramp"},
		{[]string{"flood", "--pattern", "ramp", "--seed", "3"}, "--seed goes with --pattern poisson"},
		{[]string{"flood", "--pattern", "spikes", "--spike", "30"}, "wants --spike N and --every"},
		{[]string{"flood", "120", "--pattern", "spikes", "--spike", "30", "--every", "5s"}, "give no RATE"},
		{[]string{"flood", "--pattern", "spikes", "--spike", "30", "--every", "20s"}, "sends no request at all"},
		{[]string{"flood", "--pattern", "spikes", "--spike", "30", "--every", "100us"}, "every 100µs"},
		{[]string{"flood", "--pattern", "ramp"}, "wants --from and --to"},
		{[]string{"flood", "--pattern", "ramp", "--from", "10", "--to", "1e6"}, "ramp rate 1e+06"},
		{[]string{"flood", "--pattern", "poisson"}, "want exactly one RATE"},
		{[]string{"flood", "60", "--pattern", "poisson", "--seed", "-1"}, "invalid value"},
		{[]string{"flood", "--rates", "40,80", "--pattern", "ramp", "--from", "1", "--to", "2"}, "--rates sweeps constant rates"},
		{[]string{"storm", "--url", "http://192.168.1.10:8000"}, "only target loopback"},
		{[]string{"storm", "--url", "http://127.0.0.1:1"}, "no ratelab server at http://127.0.0.1:1"},
		{[]string{"amplify", "--url", "http://127.0.0.1:1/"}, "no ratelab server at http://127.0.0.1:1"},
		{[]string{"flood", "100", "--bogus"}, "flag provided but not defined"},
		{[]string{"serve", "--port", busyPort}, "already in use"},
		{[]string{"serve", "--port", "70000"}, "--port 70000"},
		{[]string{"serve", "--slots", "0"}, "slots 0"},
		{[]string{"hint"}, "want one task"},
		{[]string{"hint", "task99"}, `unknown task "task99"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"task1", "extra"}, "takes no arguments"},
		{[]string{"task1", "--repeat", "0"}, "--repeat 0: want 1 to 10"},
		{[]string{"all", "--repeat", "11"}, "--repeat 11: want 1 to 10"},
		{[]string{"--repeat", "-1", "all"}, "--repeat -1: want 1 to 10"}, // before the command
		{[]string{"--bogus", "all"}, "flag provided but not defined: -bogus"},
		{[]string{"--solutions", "--bogus", "all"}, "flag provided but not defined: -bogus"},
		{[]string{"--out", "all"}, "flag needs an argument: -out"},
		{[]string{"--solutions", "--quick", "list"}, "flag provided but not defined: -solutions"},
		{[]string{"--seconds", "5", "serve"}, "flag provided but not defined: -seconds"},
		{[]string{"--solutions", "nope"}, "no command among"},
		{[]string{"task2", "--repeat=3x"}, "invalid value"},
		{[]string{"task1", "--real", "--virtual"}, "--real and --virtual: pick one clock"},
		{[]string{"clocks", "only-one"}, "want two results documents"},
		{[]string{"clocks", "/no/such", "/no/such/either"}, "no such file or folder"},
		{[]string{"counting", "extra"}, "counting takes no arguments"},
		{[]string{"counting", "--limit", "5"}, "flag provided but not defined: -limit"},
	}
	for _, tt := range tests {
		code, _, errOut := runCapture(t, context.Background(), tt.args...)
		assert.Equal(t, exitUsage, code, "grade %s: exit code; stderr %q", strings.Join(tt.args, " "), errOut)
		assert.Contains(t, errOut, tt.want, "grade %s: stderr", strings.Join(tt.args, " "))
		assert.NotContains(t, errOut, "goroutine", "grade %s: a stack trace", strings.Join(tt.args, " "))
		if len(tt.args) > 0 {
			assert.LessOrEqual(t, strings.Count(strings.TrimSpace(errOut), "\n"), 1, "grade %s: one line (plus usage)", strings.Join(tt.args, " "))
		}
	}
}

// Every command in the table has a usage line that starts with its name,
// short and long help, and a run function; names are unique.
func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands {
		assert.NotEmpty(t, c.Name)
		assert.False(t, seen[c.Name], "command %s twice in the table", c.Name)
		seen[c.Name] = true
		assert.True(t, c.UsageLine == c.Name || strings.HasPrefix(c.UsageLine, c.Name+" "), "%s: usage line %q", c.Name, c.UsageLine)
		assert.NotEmpty(t, c.Short, "%s: short help", c.Name)
		assert.NotEmpty(t, c.Long, "%s: long help", c.Name)
		require.NotNil(t, c.Run, "%s: Run", c.Name)
		_, run := c.flagSet()
		assert.NotNil(t, run, "%s: its runX", c.Name)
	}
	for _, name := range []string{"task1", "task7", "all", "storm", "amplify", "breaker", "provider", "judge", "export", "manifest", "help"} {
		assert.True(t, seen[name], "no command %s", name)
	}
}

// grade help lists the commands in the order of the table: the tasks, then
// the others in the order below, help last.
func TestHelpOrder(t *testing.T) {
	var b strings.Builder
	printHelp(&b)
	_, list, ok := strings.Cut(b.String(), "The commands are:\n\n")
	require.True(t, ok, "grade help has a list of commands")
	list, _, _ = strings.Cut(list, "\n\n")
	var listed []string
	for _, l := range strings.Split(list, "\n") {
		listed = append(listed, strings.Fields(l)[0])
	}
	var table []string
	for _, c := range commands {
		table = append(table, c.Name)
	}
	assert.Equal(t, table, listed, "grade help lists the table in order")

	var tasks []string
	for _, tk := range grader.Tasks() {
		tasks = append(tasks, tk.ID)
	}
	want := append(tasks, "all", "watch", "status", "list", "hint", "report", "cohort", "compare", "clocks", "serve", "flood",
		"storm", "amplify", "breaker", "counting", "provider", "judge", "export", "manifest", "help")
	assert.Equal(t, want, table)
}

// flagValues returns every flag of fs with its value.
func flagValues(fs *flag.FlagSet) map[string]string {
	m := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { m[f.Name] = f.Value.String() })
	return m
}

// sampleValue returns a value that flag name of c accepts and that differs
// from its default, and the flag's value once set to it.
func sampleValue(t *testing.T, c *command, name string) (arg, value string) {
	t.Helper()
	for _, v := range []string{"7", "3s", "x"} {
		fs, _ := c.flagSet()
		f := fs.Lookup(name)
		if v != f.DefValue && f.Value.Set(v) == nil {
			return v, f.Value.String()
		}
	}
	t.Fatalf("grade %s --%s: no sample value accepted", c.Name, name)
	return "", ""
}

// Every flag of every command parses the same before the command's name as
// after it: grade --out DIR all is grade all --out DIR. The flags come from
// each command's FlagSet, so a new flag is covered without a list to keep.
func TestLeadingFlags(t *testing.T) {
	checked := 0
	for _, c := range commands {
		fs, _ := c.flagSet()
		fs.VisitAll(func(f *flag.Flag) {
			var lines [][]string // the same flag and value in different places
			want := "true"
			if takesValue(f) {
				var arg string
				arg, want = sampleValue(t, c, f.Name)
				lines = [][]string{
					{c.Name, "--" + f.Name, arg, "p"},
					{"--" + f.Name, arg, c.Name, "p"},
					{"-" + f.Name, arg, c.Name, "p"},
					{"--" + f.Name + "=" + arg, c.Name, "p"},
					{c.Name, "p", "--" + f.Name, arg},
				}
			} else {
				lines = [][]string{
					{c.Name, "--" + f.Name, "p"},
					{"--" + f.Name, c.Name, "p"},
					{"--" + f.Name + "=true", c.Name, "p"},
				}
			}
			var first *line
			for _, args := range lines {
				l, err := parseLine(args)
				require.NoError(t, err, "parseLine(%q)", args)
				assert.Same(t, c, l.cmd, "parseLine(%q): command %s; want %s", args, l.cmd.Name, c.Name)
				assert.Equal(t, []string{"p"}, l.args, "parseLine(%q): arguments", args)
				assert.Equal(t, want, l.fs.Lookup(f.Name).Value.String(), "parseLine(%q): --%s", args, f.Name)
				if first == nil {
					first = l
					continue
				}
				assert.Equal(t, flagValues(first.fs), flagValues(l.fs), "parseLine(%q) parses as parseLine(%q)", args, lines[0])
			}
			checked++
		})
	}
	assert.Greater(t, checked, 50, "flags checked")
}

// Flags before the command take a value or not as that command's FlagSet
// says, so a value that names a command is still a value.
func TestLeadingFlagsExamples(t *testing.T) {
	tests := []struct {
		args []string
		cmd  string
		set  map[string]string
		pos  []string
	}{
		{[]string{"--solutions", "all"}, "all", map[string]string{"solutions": "true"}, nil},
		{[]string{"--out", "DIR", "all"}, "all", map[string]string{"out": "DIR"}, nil},
		{[]string{"--out", "all", "all"}, "all", map[string]string{"out": "all"}, nil},
		{[]string{"--repeat", "3", "--solutions", "all"}, "all", map[string]string{"repeat": "3", "solutions": "true"}, nil},
		{[]string{"--solutions", "--quick", "task2"}, "task2", map[string]string{"solutions": "true", "quick": "true"}, nil},
		{[]string{"--seconds", "5", "flood", "120"}, "flood", map[string]string{"seconds": "5"}, []string{"120"}},
		{[]string{"--out", "list", "cohort", "a", "b"}, "cohort", map[string]string{"out": "list"}, []string{"a", "b"}},
		{[]string{"--solutions", "storm", "400", "--no-jitter"}, "storm", map[string]string{"solutions": "true", "no-jitter": "true"}, []string{"400"}},
	}
	for _, tt := range tests {
		l, err := parseLine(tt.args)
		require.NoError(t, err, "parseLine(%q)", tt.args)
		assert.Equal(t, tt.cmd, l.cmd.Name, "parseLine(%q): command", tt.args)
		for name, want := range tt.set {
			assert.Equal(t, want, l.fs.Lookup(name).Value.String(), "parseLine(%q): --%s", tt.args, name)
		}
		assert.Equal(t, tt.pos, l.args, "parseLine(%q): arguments", tt.args)
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runCapture(t, context.Background(), "help")
	assert.Equal(t, exitPass, code)
	for _, c := range commands {
		assert.Contains(t, out, c.Name, "help lists %s", c.Name)
		code, out, _ := runCapture(t, context.Background(), "help", c.Name)
		assert.Equal(t, exitPass, code, "help %s", c.Name)
		assert.Contains(t, out, "usage: grade "+c.Name, "help %s", c.Name)
	}
	code, out, _ = runCapture(t, context.Background(), "flood", "--help")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "-seconds")
	code, out, _ = runCapture(t, context.Background(), "--help")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "Exit codes")
	code, out, _ = runCapture(t, context.Background(), "--solutions", "-h")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "Exit codes")
	code, out, _ = runCapture(t, context.Background(), "--solutions", "--help", "all")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "usage: grade all")
	code, out, _ = runCapture(t, context.Background(), "help", "storm")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "-honor-retry-after")
	code, out, _ = runCapture(t, context.Background(), "help", "all")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "[--repeat N]")
	assert.Contains(t, out, "-repeat int")
}

// A document's status decides the exit code: inconclusive checks are the
// machine's noise (exit 3, like errors), never the learner's fail.
func TestVerdictError(t *testing.T) {
	tests := []struct {
		status results.Status
		want   int
	}{
		{results.StatusPass, exitPass},
		{results.StatusFail, exitFail},
		{results.StatusError, exitGrader},
		{results.StatusInconclusive, exitGrader},
	}
	for _, tt := range tests {
		err := verdictError("all", &results.Document{Status: tt.status, Score: 3, MaxScore: 5})
		var fe failError
		var ue usageError
		got := exitGrader
		switch {
		case err == nil:
			got = exitPass
		case errors.As(err, &ue):
			got = exitUsage
		case errors.As(err, &fe):
			got = exitFail
		}
		assert.Equal(t, tt.want, got, "verdictError(%s) = %v: exit %d; want %d", tt.status, err, got, tt.want)
		if tt.status == results.StatusInconclusive {
			assert.ErrorContains(t, err, "disagreed across repeats")
		}
	}
}

// merge keeps the repeat count of the tasks it folds together.
func TestMergeRepeat(t *testing.T) {
	a := &results.Document{Task: "task1", Repeat: 3, Checks: []results.Check{{Task: "task1", Status: results.StatusPass}}}
	b := &results.Document{Task: "task2", Repeat: 3, Checks: []results.Check{{Task: "task2", Status: results.StatusInconclusive}}}
	doc := merge(merge(nil, a, "all"), b, "all")
	assert.Equal(t, 3, doc.Repeat)
	assert.Equal(t, results.StatusInconclusive, doc.Status)
	assert.Same(t, doc, merge(doc, nil, "all"), "a task that wrote no document adds nothing")
}

// merge loses none of a later task's records: every slice, map or pointer
// field of its document reaches the merged one (task 8's measurements
// once did not, under grade all).
func TestMergeKeepsEveryRecord(t *testing.T) {
	first := &results.Document{Task: "task1"}
	later := &results.Document{Task: "task8"}
	v := reflect.ValueOf(later).Elem()
	var fields []string
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.Zero(f.Type().Key()), reflect.Zero(f.Type().Elem()))
		default:
			continue
		}
		fields = append(fields, v.Type().Field(i).Name)
	}
	require.NotEmpty(t, fields)
	doc := reflect.ValueOf(merge(merge(nil, first, "all"), later, "all")).Elem()
	for _, name := range fields {
		if name == "Signature" || name == "Integrity" || name == "Calibration" {
			continue // the merged document's own, set after merging
		}
		assert.False(t, doc.FieldByName(name).IsZero(), "merge drops the later document's %s", name)
	}
}

func TestListAndHint(t *testing.T) {
	code, out, _ := runCapture(t, context.Background(), "list")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "task1")
	code, out, _ = runCapture(t, context.Background(), "hint", "task1")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "hint 1")
}

func TestFloodInProcess(t *testing.T) {
	code, out, errOut := runCapture(t, context.Background(), "flood", "40", "--seconds", "0.5")
	require.Equal(t, exitPass, code, errOut)
	assert.Contains(t, out, "offered 40/s")
	assert.Contains(t, out, "200: 20")
}

// TestInterruptedTaskWritesPartialResults cancels a task part way, as
// Ctrl-C does, and checks the partial document and the exit code.
func TestInterruptedTaskWritesPartialResults(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for a second")
	}
	dir := t.TempDir()
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(signalled{os.Interrupt}) }
	defer cancel()
	// Cancel as Ctrl-C would, two seconds into the first flood: after the
	// calibration, however long a busy machine makes it.
	var mu sync.Mutex
	var out, errOut bytes.Buffer
	var cancelled time.Time
	stdout = writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if cancelled.IsZero() && bytes.Contains(p, []byte("calibration: ")) {
			cancelled = time.Now().Add(2 * time.Second)
			time.AfterFunc(2*time.Second, cancel)
		}
		return out.Write(p)
	})
	stderr = &errOut
	defer func() { stdout, stderr = os.Stdout, os.Stderr }()
	time.AfterFunc(time.Minute, cancel)                         // never hang
	code := run(ctx, []string{"task1", "--real", "--out", dir}) // a wall-clock flood lasts long enough to interrupt
	mu.Lock()
	stdoutText, at := out.String(), cancelled
	mu.Unlock()
	if strings.Contains(stdoutText, "calibration: ") && strings.Contains(stdoutText, "NOT OK") {
		t.Skip("the machine is too busy for floods (calibration failed), so there is no flood to interrupt")
	}
	require.False(t, at.IsZero(), "no calibration line; stdout %q, stderr %q", stdoutText, errOut.String())
	assert.Less(t, time.Since(at), 10*time.Second, "stops promptly")
	assert.Equal(t, 130, code, "SIGINT's exit status, as shells give it: %s", errOut.String())
	assert.Contains(t, errOut.String(), "interrupted")
	f, err := os.Open(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err)
	assert.True(t, doc.Interrupted)
	// No verdict and no score, however the checks that finished went.
	assert.Equal(t, results.StatusInterrupted, doc.Status)
	assert.Zero(t, doc.Score)
	require.NotEmpty(t, doc.Runs)
	assert.True(t, doc.Runs[0].Interrupted)
	// Every check is there, the ones that did not run scoring 0, and the
	// output says the run was interrupted.
	full := 0.0
	for _, c := range doc.Checks {
		full += c.MaxScore
	}
	task1, ok := grader.Lookup("task1")
	require.True(t, ok)
	assert.Equal(t, task1.MaxScore(false), doc.MaxScore, "task 1's full maximum")
	assert.Equal(t, full, doc.MaxScore)
	assert.Contains(t, stdoutText+errOut.String(), "INTERRUPTED")
	skipped := 0
	for _, c := range doc.Checks {
		if c.Status == results.StatusSkip {
			skipped++
			assert.Contains(t, c.Message, "interrupted")
		}
	}
	assert.Positive(t, skipped)

	// A second run into the same folder refuses to overwrite.
	code, _, second := runCapture(t, context.Background(), "task1", "--out", dir)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, second, "--force")
}

// --pattern floods in spikes (and the others) and the line and the
// document say so.
func TestFloodPattern(t *testing.T) {
	code, out, errOut := runCapture(t, context.Background(), "flood", "--pattern", "spikes", "--spike", "5", "--every", "250ms", "--seconds", "0.5")
	require.Equal(t, exitPass, code, errOut)
	assert.Contains(t, out, "offered 20/s (spikes of 5 every 0.25s)")
	assert.Contains(t, out, "200: 10")
	code, out, errOut = runCapture(t, context.Background(), "flood", "40", "--pattern", "poisson", "--seed", "7", "--seconds", "0.5", "--json")
	require.Equal(t, exitPass, code, errOut)
	var doc results.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Runs, 1)
	require.NotNil(t, doc.Runs[0].Pattern)
	require.NotNil(t, doc.Runs[0].Pattern.Seed)
	assert.Equal(t, uint64(7), *doc.Runs[0].Pattern.Seed, "the seed is recorded")
	assert.Equal(t, doc.Runs[0].Expected, doc.Runs[0].OK, "every arrival of the schedule succeeded")
	code, out, _ = runCapture(t, context.Background(), "flood", "--help")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "-pattern")
	assert.Contains(t, out, "one request every 10 µs")
}

func TestFloodJSON(t *testing.T) {
	before := time.Now()
	code, out, errOut := runCapture(t, context.Background(), "flood", "20", "--seconds", "0.5", "--json")
	require.Equal(t, exitPass, code, errOut)
	var doc results.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Runs, 1)
	assert.Equal(t, int64(10), doc.Runs[0].OK)
	assert.Equal(t, string(grader.Exercises), doc.Impl)
	assert.False(t, doc.Started.Before(before.Truncate(time.Second)), "started %v, before the command ran", doc.Started)
	assert.GreaterOrEqual(t, doc.Finished.Sub(doc.Started), 500*time.Millisecond, "finished after the half-second flood")
	assert.False(t, doc.Runs[0].NoServerStats, "the in-process fake GPU has /stats")
}

// --rates floods a fresh server at each rate and writes one document with
// its report: task 1's page, goodput against offered load.
func TestFloodSweep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	code, out, errOut := runCapture(t, context.Background(), "flood", "--rates", "40,20", "--seconds", "0.5", "--out", dir)
	require.Equal(t, exitPass, code, errOut)
	assert.Contains(t, out, "offered 40/s")
	assert.Contains(t, out, "offered 20/s")
	f, err := os.Open(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err)
	require.Len(t, doc.Runs, 2)
	for i, want := range []int64{20, 10} {
		r := doc.Runs[i]
		assert.Equal(t, "task1", r.Task)
		assert.Equal(t, want, r.OK)
		require.NotNil(t, r.Server, "the run records its fresh server")
		assert.Equal(t, "none", r.Server.Mode)
	}
	assert.FileExists(t, filepath.Join(dir, "report", "task1.html"), "the report beside results.json, as a task's")
	code, _, errOut = runCapture(t, context.Background(), "flood", "--rates", "40", "--seconds", "0.5", "--out", dir)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "already holds a results.json")
}

// A server on loopback that is not ratelab's (no /stats) is flooded at the
// URL as given, its counts marked not available instead of shown as zeros.
func TestFloodAnyServer(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hello" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		_, _ = io.WriteString(w, "hi\n")
	}))
	defer srv.Close()
	code, out, errOut := runCapture(t, context.Background(), "flood", "40", "--seconds", "0.5", "--url", srv.URL+"/hello")
	require.Equal(t, exitPass, code, errOut)
	assert.Contains(t, errOut, "has no ratelab /stats")
	assert.Contains(t, out, "200: 20")
	assert.Contains(t, out, "server: not available (no /stats)")
	assert.Equal(t, int64(20), hits.Load()-1, "20 flooded requests, after the one that checked the server answers")

	code, out, errOut = runCapture(t, context.Background(), "flood", "20", "--seconds", "0.5", "--url", srv.URL+"/hello", "--json")
	require.Equal(t, exitPass, code, errOut)
	var doc results.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Runs, 1)
	assert.True(t, doc.Runs[0].NoServerStats)
	var raw struct {
		Runs []map[string]json.RawMessage `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, field := range []string{"server_after_flood", "server_final", "drained_s", "sample_every_ms", "samples"} {
		assert.Equal(t, "null", string(raw.Runs[0][field]), "%s was not measured: null, not zeros", field)
	}
	assert.Empty(t, doc.Impl, "the command built no code for a server it did not start")
}

// grade report turns a results.json graded earlier into Classroom's result,
// JUnit and a summary without grading again, and exits with its verdict.
func TestReportFormats(t *testing.T) {
	tests := []struct {
		src  string
		code int
	}{
		{"../../reports/testdata/task4.json", exitPass},
		{"../../reports/testdata/cohort/bob/results.json", exitFail},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(filepath.Dir(tt.src)), func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(tt.src)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644))
			ghOut := filepath.Join(dir, "github_output")
			t.Setenv("GITHUB_OUTPUT", ghOut)
			junit, summary := filepath.Join(dir, "junit.xml"), filepath.Join(dir, "summary.md")
			code, out, errOut := runCapture(t, context.Background(), "report", "--format", "classroom", "--no-report", "--junit", junit, "--summary", summary, dir)
			assert.Equal(t, tt.code, code, "stderr: %s", errOut)
			assert.NoDirExists(t, filepath.Join(dir, "report"), "--no-report")

			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
			require.NoError(t, err, "stdout is Classroom's base64 result")
			var cls struct {
				MaxScore float64 `json:"max_score"`
				Tests    []struct {
					Name string `json:"name"`
				} `json:"tests"`
			}
			require.NoError(t, json.Unmarshal(raw, &cls))
			var doc results.Document
			require.NoError(t, json.Unmarshal(b, &doc))
			assert.Equal(t, doc.MaxScore, cls.MaxScore)
			assert.Len(t, cls.Tests, int(doc.MaxScore), "one Classroom test per point")

			gh, err := os.ReadFile(ghOut)
			require.NoError(t, err)
			assert.Equal(t, "result="+strings.TrimSpace(out)+"\n", string(gh))
			assert.FileExists(t, junit)
			assert.FileExists(t, summary)
		})
	}
	code, _, errOut := runCapture(t, context.Background(), "report", "--format", "xml", "../../reports/testdata/task4.json")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--format "xml"`)
}

// The measuring commands print, under --json, a results document with
// their measurement, when they ran and with which tree's code.
func TestMeasuringCommandsJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the storm and judge tools")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	decode := func(t *testing.T, args ...string) *results.Document {
		t.Helper()
		code, out, errOut := runCapture(t, ctx, args...)
		require.Equal(t, exitPass, code, errOut)
		doc, err := results.Decode(strings.NewReader(out))
		require.NoError(t, err, "stdout is one results document")
		assert.Equal(t, args[0], doc.Task)
		assert.Equal(t, string(grader.Solutions), doc.Impl)
		assert.True(t, doc.Finished.After(doc.Started), "started %v, finished %v", doc.Started, doc.Finished)
		return doc
	}
	doc := decode(t, "storm", "16", "--solutions", "--json")
	require.Len(t, doc.Storms, 1)
	assert.Equal(t, 16, doc.Storms[0].Clients)
	assert.Equal(t, int64(16), doc.Storms[0].Succeeded)

	// --url: a server already running, here an unprotected fake GPU in
	// this process, whose own records count the storm's attempts.
	srv, err := fakegpu.New(fakegpu.DefaultConfig())
	require.NoError(t, err)
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	doc = decode(t, "storm", "16", "--solutions", "--url", in.URL, "--json")
	require.Len(t, doc.Storms, 1)
	assert.Equal(t, int64(16), doc.Storms[0].Succeeded)
	assert.Equal(t, int64(16), srv.Stats().Received, "the running server got the storm")

	doc = decode(t, "judge", "20", "--strategy", "polite", "--solutions", "--json")
	require.NotNil(t, doc.Judge)
	require.Len(t, doc.Judge.Strategies, 1)
	assert.Equal(t, int64(20), doc.Judge.Strategies[0].Completed)
	polite := doc.Judge.Strategies[0]

	doc = decode(t, "judge", "20", "--strategy", "batch", "--solutions", "--json")
	require.NotNil(t, doc.Judge)
	require.Len(t, doc.Judge.Strategies, 1)
	batch := doc.Judge.Strategies[0]
	assert.Equal(t, "batch", batch.Name)
	assert.Equal(t, int64(20), batch.Completed)
	assert.InDelta(t, polite.CostUSD/2, batch.CostUSD, 1e-12, "the same 20 judgments at half price")
}

// grade counting --json prints one results document with the reference's
// boundary burst and synchronised return, one record per limiter.
func TestCountingJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/counting and measures for about ten seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, out, errOut := runCapture(t, ctx, "counting", "--solutions", "--json")
	require.Equal(t, exitPass, code, errOut)
	doc, err := results.Decode(strings.NewReader(out))
	require.NoError(t, err, "stdout is one results document")
	assert.Equal(t, "counting", doc.Task)
	assert.Equal(t, string(grader.Solutions), doc.Impl)
	require.Len(t, doc.Counting, 1)
	c := doc.Counting[0]
	assert.Equal(t, "solutions/counting", c.Tree)
	assert.Len(t, c.Boundary, 4)
	assert.Len(t, c.Return, 4)
	assert.Empty(t, c.Memory, "memory is grade task8's, not this command's")
}
