package grader

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/suites/suitekit"
	"ratelab/results"
)

// variantOf writes the reference file solutions/<pkg>/<file> with old
// replaced by new (once) into a temporary folder and returns its path.
func variantOf(t *testing.T, pkg, file, old, new string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "solutions", pkg, file))
	require.NoError(t, err)
	require.Contains(t, string(src), old, "the reference changed: update this test's edit")
	out := filepath.Join(t.TempDir(), file)
	require.NoError(t, os.WriteFile(out, []byte(strings.Replace(string(src), old, new, 1)), 0o644))
	return out
}

// spinningBucket is task 3's reference with a TryTake that spins for ever on
// 1.5 tokens from a bucket of rate 2/s and burst 2, which FractionalTokens
// asks for and no random draw of the suite does (its sizes are round
// numbers, the burst and its neighbours, or uniform reals): one hung
// subtest, so that a test waits out one timeout, not one for each subtest
// that would hang.
func spinningBucket(t *testing.T) string {
	return variantOf(t, "bucket", "bucket.go",
		"func (b *TokenBucket) TryTake(n float64) (ok bool, wait time.Duration) {",
		"func (b *TokenBucket) TryTake(n float64) (ok bool, wait time.Duration) {\n\tfor n == 1.5 && b.cfg.rate == 2 && b.cfg.burst == 2 {\n\t}")
}

// syncBuffer is a bytes.Buffer safe for the grader's log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHungSubtestIsNamed checks that a subtest that never ends is named in
// its check, that the grader says what it is waiting on before the timeout,
// and that every other check still gets its verdict.
func TestHungSubtestIsNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a hung test's timeout")
	}
	task, _ := Lookup("task3")
	var log syncBuffer
	doc, err := Grade(context.Background(), task, Options{
		Impl: Exercises, Root: repoRoot(t), UnitOnly: true, UnitTimeout: quietNotice + 25*time.Second, Log: &log, allowEdited: true,
		Replace: map[string]string{"exercises/bucket/bucket.go": spinningBucket(t)},
	})
	require.NoError(t, err)
	assert.Contains(t, log.String(), "still waiting on TestBucket/TokenBucket/FractionalTokens", "the grader says which subtest it waits on")
	byName := map[string]results.Check{}
	for _, c := range doc.Checks {
		byName[strings.TrimPrefix(c.Name, "unit: ")] = c
	}
	hung := byName["more than burst never succeeds; fractions and zero"]
	assert.Equal(t, results.StatusFail, hung.Status)
	assert.Contains(t, hung.Message, "FractionalTokens never finished")
	assert.Contains(t, hung.Message, "task 3 (exercises/bucket/bucket.go)")
	for _, name := range []string{"one independent bucket per key", "memory stays bounded under a flood of keys", "keyed limiter safe for concurrent use"} {
		assert.Equal(t, results.StatusPass, byName[name].Status, "%s ran after the hang: %s", name, byName[name].Message)
	}
}

// TestLeftoverGoroutineIsExplained checks that code leaving a goroutine in
// a synctest bubble fails the subtests it ran in, with the reason in the
// learner's terms, instead of crashing the test binary.
func TestLeftoverGoroutineIsExplained(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a variant")
	}
	task, _ := Lookup("task3")
	v := variantOf(t, "bucket", "bucket.go", "func NewKeyedLimiter(rate, burst float64) *KeyedLimiter {",
		"func NewKeyedLimiter(rate, burst float64) *KeyedLimiter {\n\tgo func() {\n\t\tfor range time.Tick(time.Hour) {\n\t\t}\n\t}()")
	// A ticker per limiter keeps every bubble's clock busy: the keyed
	// suite takes about 16 s alone, so give it room on a loaded machine.
	doc := gradeUnitWithin(t, task, Exercises, map[string]string{"exercises/bucket/bucket.go": v}, 2*time.Minute)
	for _, c := range doc.Checks {
		if strings.Contains(c.Message, "KeyedLimiter/") {
			assert.Equal(t, results.StatusFail, c.Status, c.Name)
			assert.Contains(t, c.Message, "a goroutine or ticker the code started was still running", c.Name)
		} else {
			assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
		}
	}
}

// TestCancelLeavesNothingBehind cancels a grading while a unit test spins:
// no test binary may survive and no build folder stay behind.
func TestCancelLeavesNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a variant")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch)
	task, _ := Lookup("task3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Grade(ctx, task, Options{
			Impl: Exercises, Root: repoRoot(t), UnitOnly: true, UnitTimeout: time.Minute, allowEdited: true,
			Replace: map[string]string{"exercises/bucket/bucket.go": spinningBucket(t)},
		})
		done <- err
	}()
	require.Eventually(t, func() bool { return len(processesUnder(scratch, ".test")) > 0 },
		2*time.Minute, 100*time.Millisecond, "the test binary never started")
	time.Sleep(500 * time.Millisecond) // it spins now
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("Grade did not return within 30 s of being cancelled")
	}
	assert.Empty(t, processesUnder(scratch, ""), "processes left running")
	left, err := os.ReadDir(scratch)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "files left in the temporary folder")
}

// processesUnder lists the command lines of running processes that mention
// dir and contain want.
func processesUnder(dir, want string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, dir) && strings.Contains(cmd, want) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

// The grader and the suites must agree on where the seed travels.
func TestSeedEnvMatchesTheSuites(t *testing.T) {
	assert.Equal(t, suitekit.SeedEnv, SeedEnv)
}

// TestServerThatExitsBlamesTheLearner grades code that passes its unit
// tests but makes the server exit as it starts: the flood checks fail,
// named for the learner's file, and the maximum stays the full one.
func TestServerThatExitsBlamesTheLearner(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a variant and its server")
	}
	task, _ := Lookup("task2")
	v := variantOf(t, "shedding", "shedding.go", "import (\n", "import (\n\t\"os\"\n\t\"path/filepath\"\n")
	src, err := os.ReadFile(v)
	require.NoError(t, err)
	src = append(src, "\nfunc init() {\n\tif filepath.Ext(os.Args[0]) != \".test\" {\n\t\tos.Exit(0)\n\t}\n}\n"...)
	require.NoError(t, os.WriteFile(v, src, 0o644))
	var doc *results.Document
	doc, err = Grade(context.Background(), task, Options{
		Impl: Exercises, Root: repoRoot(t), UnitTimeout: time.Minute, allowEdited: true,
		Replace: map[string]string{"exercises/shedding/shedding.go": v},
	})
	require.NoError(t, err, "the learner's failure, not the grader's")
	assert.Equal(t, results.StatusFail, doc.Status)
	full := 0.0
	for _, c := range expectedChecks(task, false) {
		full += c.points
	}
	assert.Equal(t, full, doc.MaxScore, "every planned check counts")
	floods := 0
	for _, c := range doc.Checks {
		if strings.HasPrefix(c.Name, "unit: ") {
			assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
			continue
		}
		floods++
		assert.Equal(t, results.StatusFail, c.Status, c.Name)
		assert.Contains(t, c.Message, "task 2 (exercises/shedding/shedding.go)")
		assert.Contains(t, c.Message, "exited as it started")
	}
	assert.Equal(t, len(task2Planned()), floods)
}

// TestPlannedChecksAreDistinct: a planned name recorded twice would hide a
// check that never ran.
func TestPlannedChecksAreDistinct(t *testing.T) {
	for _, task := range Tasks() {
		seen := map[string]bool{}
		for _, c := range expectedChecks(task, false) {
			assert.False(t, seen[c.name], "%s plans %q twice", task.ID, c.name)
			seen[c.name] = true
			assert.Positive(t, c.points, "%s: %q", task.ID, c.name)
		}
	}
}

// TestCrashBesideAParallelTestBlamesOne runs a suite whose two subtests run
// side by side, one of which crashes the test binary from a goroutine of
// its own while the other is still running: the crash is blamed on the one
// that crashed, and the other gets its own verdict.
func TestCrashBesideAParallelTestBlamesOne(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test binary three times")
	}
	root := testModule(t, `package p

import (
	"testing"
	"time"
)

func TestSuite(t *testing.T) {
	for _, group := range []string{"Slow", "Crashing"} {
		t.Run(group, func(t *testing.T) {
			t.Parallel()
			t.Run("Check", func(t *testing.T) {
				if group == "Slow" {
					time.Sleep(1500 * time.Millisecond)
					return
				}
				done := make(chan struct{})
				go func() {
					time.Sleep(300 * time.Millisecond)
					panic("a goroutine of the code under test panicked")
				}()
				<-done
			})
		})
	}
}
`)
	res := runUnit(context.Background(), unitRun{root: root, pkgDir: "p", timeout: time.Minute, scratch: t.TempDir(), logf: t.Logf})
	require.NoError(t, res.err)
	assert.Equal(t, "pass", res.status["TestSuite/Slow/Check"], "the subtest beside the crash gets its own verdict")
	assert.Contains(t, res.stuck, "TestSuite/Crashing/Check")
	assert.NotContains(t, res.stuck, "TestSuite/Slow/Check", "only the subtest that crashed is blamed")
	assert.Contains(t, res.stuck["TestSuite/Crashing/Check"], "a goroutine of the code under test panicked")
}

// TestHangBesideAParallelTestBlamesIt runs a suite whose two subtests run
// side by side, one of which never ends: the timeout is blamed on it alone,
// from how long each test had run, and its neighbour, which had begun a
// subtest seconds before the timeout, runs again and passes.
func TestHangBesideAParallelTestBlamesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a test timeout")
	}
	root := testModule(t, `package p

import (
	"os"
	"testing"
	"time"
)

func TestSuite(t *testing.T) {
	for _, group := range []string{"Slow", "Hanging"} {
		t.Run(group, func(t *testing.T) {
			t.Parallel()
			t.Run("Check", func(t *testing.T) {
				if group == "Slow" {
					// Still running at the first run's timeout; quick after.
					if _, err := os.Stat("ran-once"); err != nil {
						os.WriteFile("ran-once", nil, 0o644)
						time.Sleep(5 * time.Second)
						t.Run("Deeper", func(t *testing.T) { time.Sleep(4 * time.Second) })
						return
					}
					t.Run("Deeper", func(t *testing.T) {})
					return
				}
				select {}
			})
		})
	}
}
`)
	var log syncBuffer
	res := runUnit(context.Background(), unitRun{root: root, pkgDir: "p", timeout: 8 * time.Second, scratch: t.TempDir(),
		logf: func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }})
	require.NoError(t, res.err)
	assert.Equal(t, []string{"TestSuite/Hanging/Check"}, res.skipped(), "only the subtest that hung is blamed")
	assert.Equal(t, "pass", res.status["TestSuite/Slow/Check/Deeper"], "its neighbour runs again and passes")
	assert.NotContains(t, log.String(), "one at a time", "a timeout says which test hung: no run one test at a time")
}

// TestASkippedTestSaysWhy runs a suite with a test that skips: its reason
// is kept with its output, so that a check the skip fails can say why (a
// check failed in CI as "Redis/ExactWait was skipped", and nothing more).
func TestASkippedTestSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test binary")
	}
	root := testModule(t, `package p

import "testing"

func TestSuite(t *testing.T) {
	t.Run("Timing", func(t *testing.T) { t.Skipf("this machine was too slow %d times", 3) })
}
`)
	res := runUnit(context.Background(), unitRun{root: root, pkgDir: "p", timeout: time.Minute, scratch: t.TempDir(), logf: t.Logf})
	require.NoError(t, res.err)
	assert.Equal(t, "skip", res.status["TestSuite/Timing"])
	assert.Equal(t, "this machine was too slow 3 times", res.failure("TestSuite/Timing", 2))
}

// testModule writes a module with one package, p, whose test file is src,
// and returns its folder.
func testModule(t *testing.T, src string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module testmod\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "p"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "p", "p_test.go"), []byte(src), 0o644))
	return root
}
