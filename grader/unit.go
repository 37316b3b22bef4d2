package grader

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultUnitTimeout bounds one task's unit tests. The suites run in synctest
// bubbles and take a few seconds even under -race; a test still running
// after this is stuck (a deadlock, an endless loop, or code that sleeps
// while holding a lock, which hangs a bubble instead of failing it).
const DefaultUnitTimeout = 60 * time.Second

// testEvent is one line of `go test -json` (see `go doc test2json`),
// including the build events Go 1.24 added.
type testEvent struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// unitResult is what one task's `go test -json` runs said.
type unitResult struct {
	buildFailed bool
	buildOutput []string            // compiler and vet messages
	status      map[string]string   // test name → pass, fail or skip
	output      map[string][]string // test name → its output lines
	pkgOutput   []string            // output outside any test (panics, timeouts)
	noRace      bool                // the race detector was not available
	err         error               // go itself could not run

	mu sync.Mutex // guards running while the run is under way
	// running holds the tests that started and had not ended when the
	// test binary stopped: the ones a timeout or a crash interrupted.
	running map[string]bool
	// stuck maps each subtest that hung or crashed the test binary to why;
	// the suite then ran again without it.
	stuck map[string]string
	// reruns counts the runs after the first.
	reruns int
}

// unitRun is one task's frozen suite to run with `go test -json`.
type unitRun struct {
	root    string   // the repository
	pkgDir  string   // such as "exercises/bucket"
	tags    []string // build tags
	overlay string   // a `go build -overlay` file, or ""
	timeout time.Duration
	env     []string // added to the environment
	// testArgs are flags for the test binary, such as -rapid.seed.
	testArgs []string
	// scratch is a folder the grader removes at the end; the go command
	// keeps its work files (the test binary among them) under it, so that
	// nothing stays behind even when a run is killed.
	scratch string
	// logf receives progress for people, such as which subtest the run is
	// still waiting on; nil discards it.
	logf func(format string, args ...any)
	// only, if set, are the only tests to run (full names).
	only []string
	// noRace runs the suite without the race detector (Options.noRace).
	noRace bool
}

// prefixed returns the subtests of test as full test names.
func prefixed(test string, subtests []string) []string {
	var out []string
	for _, st := range subtests {
		out = append(out, test+"/"+st)
	}
	return out
}

// maxReruns bounds how often a suite runs again after a subtest hung or
// crashed the test binary, each time without the subtests that did.
const maxReruns = 3

// quietNotice is how long a unit run may stay silent before the grader says
// which subtest it is waiting on (and again every quietNotice after).
const quietNotice = 10 * time.Second

// runUnit runs the frozen test suite of u.pkgDir as `go test -json -race`
// with a timeout, and parses what it reports. When a subtest hangs until
// the timeout, or crashes the test binary, the suite runs again without it
// (up to maxReruns times), so that every other check still gets a verdict.
// A suite may run subtests side by side (task 6 runs its two backends at
// once); when several were running as the binary stopped, it cannot tell
// which one stopped it, so the suite first runs again one test at a time
// (-parallel=1), and that run names the culprit.
func runUnit(ctx context.Context, u unitRun) *unitResult {
	race := !u.noRace
	res := runGoTest(ctx, u, race, false, nil)
	if res.noRace {
		race = false
		res = runGoTest(ctx, u, race, false, nil)
		res.noRace = true
	}
	serial := false
	for res.reruns < maxReruns && res.err == nil && !res.buildFailed && ctx.Err() == nil {
		culprits := res.interrupted()
		if len(culprits) == 0 {
			break
		}
		why := res.crash()
		if hung := res.hungLongest(); len(hung) > 0 {
			// A timeout names how long each test had run: the ones
			// that hung ran the longest, whatever ran beside them.
			culprits = hung
		} else if len(culprits) > 1 && !serial {
			serial = true
			if u.logf != nil {
				u.logf("    the test binary stopped (%s) while %s ran side by side; running the tests again one at a time to tell which", why, strings.Join(culprits, ", "))
			}
			res.merge(runGoTest(ctx, u, race, true, res.skipped()))
			res.reruns-- // telling the culprits apart is not one of the reruns without them
			continue
		}
		for _, c := range culprits {
			res.stuck[c] = why
		}
		if u.logf != nil {
			u.logf("    %s stopped the test binary (%s); running the other tests again without it", strings.Join(culprits, ", "), why)
		}
		res.merge(runGoTest(ctx, u, race, serial, res.skipped()))
	}
	return res
}

// skipped lists the subtests found to hang or crash, which reruns skip.
func (r *unitResult) skipped() []string {
	var skip []string
	for c := range r.stuck {
		skip = append(skip, c)
	}
	sort.Strings(skip)
	return skip
}

// hungLongest returns, when the test binary stopped at its timeout, the
// innermost tests of the timeout's list of running tests that had run at
// least half as long as the longest of them: the ones that hung, not a
// parallel neighbour that had just begun. It returns nil for any other
// stop, or when the list is missing.
func (r *unitResult) hungLongest() []string {
	var lines []string
	lines = append(lines, r.pkgOutput...)
	for _, out := range r.output {
		lines = append(lines, out...)
	}
	listed := map[string]time.Duration{}
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic: test timed out after") {
			continue
		}
		for _, m := range lines[i+1:] {
			m = strings.TrimSpace(m)
			if m == "running tests:" {
				continue
			}
			name, d, ok := strings.Cut(m, " (")
			took, err := time.ParseDuration(strings.TrimSuffix(d, ")"))
			if !ok || err != nil || !strings.HasPrefix(name, "Test") {
				break
			}
			listed[name] = took
		}
		break
	}
	var longest time.Duration
	for _, d := range listed {
		longest = max(longest, d)
	}
	var hung []string
	for name, d := range listed {
		if d*2 < longest || !strings.Contains(name, "/") || r.stuck[name] != "" {
			continue
		}
		leaf := true
		for other := range listed {
			if strings.HasPrefix(other, name+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			hung = append(hung, name)
		}
	}
	sort.Strings(hung)
	return hung
}

// interrupted returns the innermost tests that were running when the test
// binary stopped early, or nil if it finished.
func (r *unitResult) interrupted() []string {
	if r.crash() == "" {
		return nil
	}
	var leaves []string
	for name := range r.running {
		if _, done := r.stuck[name]; done {
			continue
		}
		leaf := true
		for other := range r.running {
			if strings.HasPrefix(other, name+"/") {
				leaf = false
				break
			}
		}
		if leaf && strings.Contains(name, "/") {
			leaves = append(leaves, name)
		}
	}
	sort.Strings(leaves)
	return leaves
}

// merge takes from a rerun the verdicts of tests that had none, and its
// crash, if it crashed too, for the next round.
func (r *unitResult) merge(again *unitResult) {
	r.reruns++
	for name, st := range again.status {
		if _, ok := r.status[name]; !ok {
			r.status[name] = st
			r.output[name] = again.output[name]
		}
	}
	for name, lines := range again.output {
		if _, ok := r.output[name]; !ok {
			r.output[name] = lines
		}
	}
	for name := range again.running {
		r.output[name] = again.output[name] // what it printed as the rerun stopped
	}
	r.pkgOutput = again.pkgOutput
	r.running = again.running
	if again.err != nil {
		r.err = again.err
	}
}

// skipPattern turns test names into one -skip (or -run) pattern: go test splits it at
// slashes and matches each level separately, so names are merged level by
// level. A subtest of the same name under a sibling may be skipped along;
// the suites' names are distinct enough for that not to matter.
func skipPattern(names []string) string {
	var levels [][]string
	for _, n := range names {
		for i, part := range strings.Split(n, "/") {
			if i == len(levels) {
				levels = append(levels, nil)
			}
			q := regexp.QuoteMeta(part)
			if !slices.Contains(levels[i], q) {
				levels[i] = append(levels[i], q)
			}
		}
	}
	parts := make([]string, len(levels))
	for i, alts := range levels {
		parts[i] = "^(" + strings.Join(alts, "|") + ")$"
	}
	return strings.Join(parts, "/")
}

// runGoTest runs the suite once: with the race detector if race, one test
// at a time if serial, without the subtests in skip.
func runGoTest(ctx context.Context, u unitRun, race, serial bool, skip []string) *unitResult {
	args := []string{"test", "-json", "-count=1", fmt.Sprintf("-timeout=%s", u.timeout)}
	if race {
		args = append(args, "-race")
	}
	if serial {
		args = append(args, "-parallel=1")
	}
	if len(u.tags) > 0 {
		args = append(args, "-tags="+strings.Join(u.tags, ","))
	}
	if u.overlay != "" {
		args = append(args, "-overlay="+u.overlay)
	}
	if len(skip) > 0 {
		args = append(args, "-skip="+skipPattern(skip))
	}
	if len(u.only) > 0 {
		// Two levels only, the test and its first subtest: a deeper
		// level of the pattern would also filter the subtests of a
		// shallower name, which must all run.
		var top []string
		for _, n := range u.only {
			parts := strings.SplitN(n, "/", 3)
			top = append(top, strings.Join(parts[:min(len(parts), 2)], "/"))
		}
		args = append(args, "-run="+skipPattern(top))
	}
	args = append(args, "./"+filepath.ToSlash(u.pkgDir))
	args = append(args, u.testArgs...)
	// Compiling takes time too; the test binary's own -timeout catches hangs.
	cctx, cancel := context.WithTimeout(ctx, u.timeout+3*time.Minute)
	defer cancel()
	cmd, err := goCommand(cctx, u.root, u.scratch, args...)
	if err != nil {
		return &unitResult{err: err, status: map[string]string{}, output: map[string][]string{}}
	}
	cmd.Env = append(append(cmd.Env, "GOFLAGS=-mod=mod"), u.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return &unitResult{err: err, status: map[string]string{}, output: map[string][]string{}}
	}
	res := newUnitResult()
	if err := cmd.Start(); err != nil {
		res.err = fmt.Errorf("go test: %w", err)
		return res
	}
	events := make(chan struct{}, 1)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchQuiet(u, res, events, stopWatch)
	}()
	parseTestJSON(stdout, res, events)
	err = cmd.Wait()
	_ = killProcessGroup(cmd) // anything the go command left running
	close(stopWatch)
	<-watched
	if strings.Contains(stderr.String(), "-race requires cgo") || strings.Contains(stderr.String(), "race detector") && strings.Contains(stderr.String(), "not supported") {
		res.noRace = true
		return res
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" {
			res.buildOutput = append(res.buildOutput, line)
		}
	}
	if err != nil && len(res.status) == 0 && !res.buildFailed {
		if ctx.Err() != nil {
			res.err = ctx.Err()
		} else if len(res.buildOutput) > 0 || len(res.pkgOutput) > 0 {
			res.buildFailed = len(res.pkgOutput) == 0
		} else {
			res.err = fmt.Errorf("go test: %w", err)
		}
	}
	if ctx.Err() != nil && res.err == nil {
		res.err = ctx.Err()
	}
	return res
}

// watchQuiet tells u.logf which subtest a run is waiting on whenever no
// test event arrived for quietNotice, until stop is closed.
func watchQuiet(u unitRun, res *unitResult, events <-chan struct{}, stop <-chan struct{}) {
	if u.logf == nil {
		return
	}
	start := time.Now()
	t := time.NewTimer(quietNotice)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-events:
			t.Reset(quietNotice)
		case <-t.C:
			res.mu.Lock()
			var names []string
			for name := range res.running {
				names = append(names, name)
			}
			res.mu.Unlock()
			sort.Strings(names)
			waiting := "the build"
			if len(names) > 0 {
				waiting = names[len(names)-1]
			}
			u.logf("    still waiting on %s (%s so far; a test still running after %s is stopped)",
				waiting, time.Since(start).Round(time.Second), u.timeout)
			t.Reset(quietNotice)
		}
	}
}

func newUnitResult() *unitResult {
	return &unitResult{
		status:  map[string]string{},
		output:  map[string][]string{},
		running: map[string]bool{},
		stuck:   map[string]string{},
	}
}

// parseTestJSON reads a `go test -json` stream into res as it arrives,
// with a tick on events (if not full) for each event. Lines that are not
// JSON (old toolchains print build errors that way) count as build output.
func parseTestJSON(out io.Reader, res *unitResult, events chan<- struct{}) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var ev testEvent
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			if s := strings.TrimSpace(string(line)); s != "" {
				res.buildOutput = append(res.buildOutput, s)
			}
			continue
		}
		select {
		case events <- struct{}{}:
		default:
		}
		res.mu.Lock()
		switch ev.Action {
		case "build-output":
			if s := strings.TrimRight(ev.Output, "\n"); s != "" {
				res.buildOutput = append(res.buildOutput, s)
			}
		case "build-fail":
			res.buildFailed = true
		case "run", "cont":
			if ev.Test != "" {
				res.running[ev.Test] = true
			}
		case "pause":
			// A parallel test waiting for its turn is not running.
			delete(res.running, ev.Test)
		case "output":
			if ev.Test == "" {
				res.pkgOutput = append(res.pkgOutput, strings.TrimRight(ev.Output, "\n"))
			} else {
				res.output[ev.Test] = append(res.output[ev.Test], strings.TrimRight(ev.Output, "\n"))
			}
		case "pass", "fail", "skip":
			if ev.Test != "" {
				res.status[ev.Test] = ev.Action
				delete(res.running, ev.Test)
			}
		}
		res.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, out)
}

// crash describes why the test binary stopped early, or "" if it did not.
// It reads what was printed outside any test, by the tests that were
// still running when the binary stopped, and after the result line of a
// test that had ended (go test gives a line it cannot place to the test
// that printed last, which with parallel tests may be one that ended): a
// panic in a test that went on to fail normally is that test's failure,
// not a crash.
func (r *unitResult) crash() string {
	all := append([]string(nil), r.pkgOutput...)
	names := make([]string, 0, len(r.output))
	for name := range r.output {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		lines := r.output[name]
		if !r.running[name] {
			end := -1
			for i, l := range lines {
				switch t := strings.TrimLeft(l, " "); {
				case strings.HasPrefix(t, "--- PASS"), strings.HasPrefix(t, "--- FAIL"), strings.HasPrefix(t, "--- SKIP"):
					end = i // its result line: what follows is not its own
				}
			}
			if end < 0 {
				continue
			}
			lines = lines[end+1:]
		}
		all = append(all, lines...)
	}
	for i, l := range all {
		switch {
		case strings.HasPrefix(l, "panic: test timed out after"):
			return fmt.Sprintf("still running after %s, when the test binary was stopped: a test never finished (a deadlock, an endless loop, or a sleep while holding a lock, which hangs a synctest bubble)",
				strings.TrimPrefix(l, "panic: test timed out after "))
		case strings.Contains(l, "blocked goroutines remain"):
			return "the test binary crashed: " + leftoverGoroutines
		case strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:"):
			msg := l
			if i+1 < len(all) && strings.HasPrefix(strings.TrimSpace(all[i+1]), "[recovered") {
				msg += " " + strings.TrimSpace(all[i+1])
			}
			return "the test binary crashed: " + msg
		}
	}
	return ""
}

// leftoverGoroutines explains synctest's "blocked goroutines remain" in the
// learner's terms.
const leftoverGoroutines = "a goroutine or ticker your code started was still running when the check ended " +
	"(in the test's fake-time bubble every goroutine must end with the test); " +
	"work out what changed since the last call when a call arrives (lazy refill) instead of updating state in the background"

// race reports whether the race detector fired in test name or anywhere.
func (r *unitResult) race(name string) bool {
	for _, l := range r.output[name] {
		if strings.Contains(l, "WARNING: DATA RACE") || strings.Contains(l, "race detected during execution of test") {
			return true
		}
	}
	return false
}

// locationRE matches the "file.go:12: " prefix testing puts before messages.
var locationRE = regexp.MustCompile(`^\s*[\w./-]+\.go:\d+: `)

// failure condenses a failed test's output to its first few messages.
func (r *unitResult) failure(name string, maxLines int) string {
	var msgs []string
	if strings.Contains(strings.Join(r.output[name], "\n"), "blocked goroutines remain") {
		msgs = append(msgs, leftoverGoroutines)
	}
	for _, l := range r.output[name] {
		t := locationRE.ReplaceAllString(strings.TrimSpace(l), "")
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") ||
			strings.HasPrefix(t, "Error Trace:") || strings.HasPrefix(t, "Test:") ||
			strings.HasPrefix(t, "To reproduce, specify") || t == "Failed test output:" ||
			strings.Contains(t, "random inputs from seed") { // the grader says how to replay, once
			continue
		}
		t = strings.TrimPrefix(t, "[rapid] ") // rapid's verdict and the shrunk case's draws
		msgs = append(msgs, t)
		if len(msgs) == maxLines {
			break
		}
	}
	if r.race(name) {
		msgs = append([]string{"data race: the code is not safe for concurrent use"}, msgs...)
	}
	return strings.Join(msgs, " / ")
}

// notImplemented returns the first "not implemented yet" message, if any,
// in test name order.
func (r *unitResult) notImplemented() string {
	names := make([]string, 0, len(r.output))
	for name := range r.output {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, l := range r.output[name] {
			if i := strings.Index(l, "task "); i >= 0 && strings.Contains(l, "not implemented yet") {
				return strings.TrimSpace(l[i:])
			}
		}
	}
	return ""
}
