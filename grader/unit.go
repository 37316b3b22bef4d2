package grader

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
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

// unitResult is what one `go test -json` run said.
type unitResult struct {
	buildFailed bool
	buildOutput []string            // compiler and vet messages
	status      map[string]string   // test name → pass, fail or skip
	output      map[string][]string // test name → its output lines
	pkgOutput   []string            // output outside any test (panics, timeouts)
	noRace      bool                // the race detector was not available
	err         error               // go itself could not run
}

// runUnit runs the frozen test suite of pkgDir (such as "exercises/bucket")
// as `go test -json -race` with a timeout, and parses what it reports.
// overlay, if set, is a `go build -overlay` file that swaps learner files for
// others (the grader's corpus of wrong implementations uses it).
func runUnit(ctx context.Context, root, pkgDir string, tags []string, overlay string, timeout time.Duration, env []string) *unitResult {
	res := runGoTest(ctx, root, pkgDir, tags, overlay, true, timeout, env)
	if res.noRace {
		res = runGoTest(ctx, root, pkgDir, tags, overlay, false, timeout, env)
		res.noRace = true
	}
	return res
}

func runGoTest(ctx context.Context, root, pkgDir string, tags []string, overlay string, race bool, timeout time.Duration, env []string) *unitResult {
	args := []string{"test", "-json", "-count=1", fmt.Sprintf("-timeout=%s", timeout)}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags="+strings.Join(tags, ","))
	}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	args = append(args, "./"+filepath.ToSlash(pkgDir))
	// Compiling takes time too; the test binary's own -timeout catches hangs.
	cctx, cancel := context.WithTimeout(ctx, timeout+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	res := parseTestJSON(out)
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
	return res
}

// parseTestJSON reads a `go test -json` stream. Lines that are not JSON (old
// toolchains print build errors that way) count as build output.
func parseTestJSON(out []byte) *unitResult {
	res := &unitResult{status: map[string]string{}, output: map[string][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
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
		switch ev.Action {
		case "build-output":
			if s := strings.TrimRight(ev.Output, "\n"); s != "" {
				res.buildOutput = append(res.buildOutput, s)
			}
		case "build-fail":
			res.buildFailed = true
		case "output":
			if ev.Test == "" {
				res.pkgOutput = append(res.pkgOutput, strings.TrimRight(ev.Output, "\n"))
			} else {
				res.output[ev.Test] = append(res.output[ev.Test], strings.TrimRight(ev.Output, "\n"))
			}
		case "pass", "fail", "skip":
			if ev.Test != "" {
				res.status[ev.Test] = ev.Action
			}
		}
	}
	return res
}

// crash describes why the test binary stopped early, or "" if it did not.
func (r *unitResult) crash() string {
	all := append([]string(nil), r.pkgOutput...)
	for _, lines := range r.output {
		all = append(all, lines...)
	}
	for i, l := range all {
		switch {
		case strings.HasPrefix(l, "panic: test timed out after"):
			return fmt.Sprintf("%s: a test never finished (a deadlock, an endless loop, or a sleep while holding a lock, which hangs a synctest bubble)", l)
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
	for _, l := range r.output[name] {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") ||
			strings.HasPrefix(t, "Error Trace:") || strings.HasPrefix(t, "Test:") {
			continue
		}
		t = locationRE.ReplaceAllString(t, "")
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

// writeOverlay writes a `go build -overlay` file that replaces each
// repository-relative path in replace with the file it maps to.
func writeOverlay(dir, root string, replace map[string]string) (string, error) {
	if len(replace) == 0 {
		return "", nil
	}
	m := map[string]map[string]string{"Replace": {}}
	for target, src := range replace {
		abs, err := filepath.Abs(src)
		if err != nil {
			return "", err
		}
		m["Replace"][filepath.Join(root, target)] = abs
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o644)
}
