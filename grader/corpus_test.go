package grader

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/grader/corpus"
	"ratelab/internal/redisenv"
	"ratelab/internal/suites/suitekit"
	"ratelab/results"
)

// The grader must never pass broken work nor fail correct work. These tests
// run the unit stage on known-wrong and broken code (swapped in with an
// overlay, nothing on disk changes), on the stubs and on the reference.

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := FindRoot(".")
	require.NoError(t, err)
	return root
}

// gradeUnit grades task's unit stage of impl, with the files of replace
// (repository path → file to read instead) swapped in.
func gradeUnit(t *testing.T, task Task, impl Impl, replace map[string]string) *results.Document {
	t.Helper()
	return gradeUnitWithin(t, task, impl, replace, 20*time.Second)
}

// gradeUnitOnly grades the unit stage of the exercises with replace
// swapped in, running only subtests of the suite and shrinking for 1 s,
// with the race detector only if race.
func gradeUnitOnly(t *testing.T, task Task, replace map[string]string, subtests []string, race bool) *results.Document {
	t.Helper()
	opts := Options{Impl: Exercises, Root: repoRoot(t), UnitOnly: true, UnitTimeout: 20 * time.Second, Replace: replace,
		allowEdited: true, onlySubtests: subtests, shrinkTime: time.Second, noRace: !race}
	doc, err := Grade(context.Background(), task, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("graded with seed %d (replay: grade %s --seed %d)", doc.Seed, task.ID, doc.Seed)
		}
	})
	return doc
}

// gradeUnitWithin is gradeUnit with the unit tests bounded by timeout.
func gradeUnitWithin(t *testing.T, task Task, impl Impl, replace map[string]string, timeout time.Duration) *results.Document {
	t.Helper()
	opts := Options{Impl: impl, Root: repoRoot(t), UnitOnly: true, UnitTimeout: timeout, Replace: replace, allowEdited: true}
	doc, err := Grade(context.Background(), task, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("graded with seed %d (replay: grade %s --seed %d)", doc.Seed, task.ID, doc.Seed)
		}
	})
	return doc
}

// loadCorpus returns the variants of kind under testdata, each applied to
// the current reference: its overlay for gradeUnit.
func loadCorpus(t *testing.T, kind corpus.Kind) ([]corpus.Variant, map[string]map[string]string) {
	t.Helper()
	root := repoRoot(t)
	all, err := corpus.Load(root)
	require.NoError(t, err)
	var vs []corpus.Variant
	replace := map[string]map[string]string{}
	for _, v := range all {
		if v.Kind != kind {
			continue
		}
		r, err := v.Apply(root, t.TempDir())
		require.NoError(t, err)
		vs = append(vs, v)
		replace[v.ID()] = r
	}
	require.NotEmpty(t, vs, "no %s variants in %s", kind, corpus.Dir)
	return vs, replace
}

// How many variants the slow corpus tests grade without RATELAB_CORPUS=all,
// of each task and in all: a unit-stage grading takes about 5 s, a grading
// with quick floods 15 s to 3 minutes (task 4's storms run at full size).
// With twice as many unit variants, broken variants and tasks, the grader
// package took 8 of go test's 10 minutes beside the other packages on 2
// cores; the rest of its tests take about 4.
const (
	sampleUnitPerTask, sampleUnitTotal   = 1, 7
	sampleFloodPerTask, sampleFloodTotal = 1, 1
	sampleRightPerTask, sampleRightTotal = 1, 1
	sampleBrokenTotal                    = 1
	sampleTaskTotal                      = 2 // stubs and references graded
)

// slowToFlood are the tasks whose quick grading still takes minutes (task
// 4's storms run at full size: 1.5 to 3 minutes a variant). The seeded draw
// of the flood-judged and right variants leaves them to RATELAB_CORPUS=all,
// so that one unlucky draw cannot push the package past go test's limit.
var slowToFlood = map[string]bool{"task4": true}

// corpusEnv names the environment variable that makes the slow corpus
// tests take every variant: RATELAB_CORPUS=all, as the project's CI sets.
// Without it they take a sample of each task's variants, drawn from the
// run's seed (RATELAB_SEED replays it), so that `go test ./...` stays well
// inside go test's default limit of 10 minutes a package on a 2-core
// machine while every run tries different ones; -short skips them.
const corpusEnv = "RATELAB_CORPUS"

// sample returns the variants of vs to grade: all of them under
// RATELAB_CORPUS=all, else the seeded draw (see draw).
func sample(t *testing.T, vs []corpus.Variant, perTask, total int) []corpus.Variant {
	t.Helper()
	if os.Getenv(corpusEnv) == "all" {
		return vs
	}
	return draw(t, vs, perTask, total)
}

// sampleOnClocks returns the flood-judged or right variants of vs to grade,
// and the IDs of those to grade on both clocks: the seeded draw (see draw)
// of the variants outside slowToFlood. Without RATELAB_CORPUS=all the draw
// is all it grades; with it, every variant is graded, in virtual time where
// its task has it (see clocks), and the draw on the wall clock as well, so
// that one run of the whole corpus checks everything the sample would.
func sampleOnClocks(t *testing.T, vs []corpus.Variant, perTask, total int) ([]corpus.Variant, map[string]bool) {
	t.Helper()
	quick := slices.DeleteFunc(slices.Clone(vs), func(v corpus.Variant) bool { return slowToFlood[v.Task] })
	drawn := draw(t, quick, perTask, total)
	both := map[string]bool{}
	for _, v := range drawn {
		both[v.ID()] = true
	}
	if os.Getenv(corpusEnv) == "all" {
		return vs, both
	}
	return drawn, both
}

// draw returns at most perTask of each task's variants in vs and at most
// total in all, chosen from the run's seed, and logs them.
func draw(t *testing.T, vs []corpus.Variant, perTask, total int) []corpus.Variant {
	t.Helper()
	rng := suitekit.Rand(t)
	byTask := map[string][]corpus.Variant{}
	var order []string
	for _, v := range vs {
		if byTask[v.Task] == nil {
			order = append(order, v.Task)
		}
		byTask[v.Task] = append(byTask[v.Task], v)
	}
	var out []corpus.Variant
	var names []string
	for _, task := range order {
		group := slices.Clone(byTask[task])
		rng.Shuffle(len(group), func(i, j int) { group[i], group[j] = group[j], group[i] })
		out = append(out, group[:min(perTask, len(group))]...)
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	out = out[:min(total, len(out))]
	slices.SortStableFunc(out, func(a, b corpus.Variant) int { return strings.Compare(a.ID(), b.ID()) })
	for _, v := range out {
		names = append(names, v.ID())
	}
	what := "a sample"
	if os.Getenv(corpusEnv) == "all" {
		what = "on both clocks, a draw"
	}
	t.Logf("%s of %d of the %d variants (seed %d; %s=all grades every one): %s",
		what, len(out), len(vs), suitekit.Seed(), corpusEnv, strings.Join(names, ", "))
	return out
}

// failedMessages joins the messages of every check that did not pass.
func failedMessages(doc *results.Document) string {
	var b strings.Builder
	for _, c := range doc.Checks {
		if c.Status != results.StatusPass {
			b.WriteString(c.Name + ": " + c.Message + "\n")
		}
	}
	return b.String()
}

// TestWrongImplementationsFail grades every wrong variant of the corpus
// (grader/testdata/wrong, see its README): each must lose points, and each
// subtest its patch names in a Caught-By line must fail, named in the
// message of its check. Like every slow test here, it takes a sample unless
// RATELAB_CORPUS=all (see corpusEnv).
func TestWrongImplementationsFail(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and tests every known-wrong variant")
	}
	all, replace := loadCorpus(t, corpus.Wrong)
	var unit []corpus.Variant
	for _, v := range all {
		if len(v.CaughtBy) > 0 { // the others are judged only in the floods: TestWrongImplementationsFailTheirFloods
			unit = append(unit, v)
		}
	}
	for _, v := range sample(t, unit, sampleUnitPerTask, sampleUnitTotal) {
		t.Run(v.ID(), func(t *testing.T) {
			// Two at a time: a build and a suite that waits out a hung
			// subtest overlap. Load can only make a wrong variant fail
			// more, never pass.
			t.Parallel()
			task, ok := Lookup(v.Task)
			require.True(t, ok, "unknown task %s", v.Task)
			if needsRealRedis(v.CaughtBy) && !redisenv.ServerAvailable() {
				t.Skip("caught only by task 6's Redis/ checks, and no redis-server is installed to run them")
			}
			// Only the subtests that catch it, shrinking briefly: each
			// failing proves the lost points, and the rest of the suite
			// (rapid's 10 s of shrinking above all) would only take time.
			// Without the race detector unless the variant's race is what
			// catches it (Needs-Race): a -race build and run cost several
			// times as much, and a failed assertion catches the others
			// with or without it.
			doc := gradeUnitOnly(t, task, replace[v.ID()], v.CaughtBy, v.NeedsRace)
			assert.Equal(t, results.StatusFail, doc.Status, "status")
			assert.Less(t, doc.Score, doc.MaxScore, "a wrong implementation must lose points")
			for _, sub := range v.CaughtBy {
				c, ok := unitCheckOf(task, sub)
				require.True(t, ok, "%s: Caught-By %s is no subtest of %s's unit checks", v.Path, sub, task.ID)
				got := findCheck(doc, "unit: "+c.Name)
				require.NotNil(t, got, "no check %q in the results", c.Name)
				assert.NotEqual(t, results.StatusPass, got.Status, "check %q (which holds %s) passed", c.Name, sub)
				assert.Regexp(t, namesFailedSubtest(sub), got.Message, "the message of %q should name %s as failed", c.Name, sub)
			}
			assert.NotContains(t, failedMessages(doc), "not implemented", "a wrong variant is implemented")
		})
	}
}

// needsRealRedis reports whether every subtest of caughtBy is one of task
// 6's Redis/ checks, which run only on a real Redis.
func needsRealRedis(caughtBy []string) bool {
	for _, sub := range caughtBy {
		if !strings.HasPrefix(sub, "Redis/") {
			return false
		}
	}
	return len(caughtBy) > 0
}

// unitCheckOf returns the unit check of task that holds subtest sub.
func unitCheckOf(task Task, sub string) (UnitCheck, bool) {
	if task.Unit == nil {
		return UnitCheck{}, false
	}
	for _, c := range task.Unit.Checks {
		if slices.Contains(c.Subtests, sub) {
			return c, true
		}
	}
	return UnitCheck{}, false
}

// findCheck returns doc's check called name, or nil.
func findCheck(doc *results.Document, name string) *results.Check {
	for i := range doc.Checks {
		if doc.Checks[i].Name == name {
			return &doc.Checks[i]
		}
	}
	return nil
}

// namesFailedSubtest matches how a unit check's message reports subtest sub
// as failed, skipped or unfinished ("...: Sub: why", "; Sub did not finish").
func namesFailedSubtest(sub string) *regexp.Regexp {
	return regexp.MustCompile(`(: |; )` + regexp.QuoteMeta(sub) + `(: | did not | was skipped| never finished| crashed the test binary)`)
}

// brokenWant says, per broken variant, what the failed checks must say.
var brokenWant = map[string][]string{
	"task2/compile-error": {"does not compile", "shedding.go", "undefinedName"},
	"task2/panics":        {"boom in RetryAfterSeconds", "nil map"},
	"task2/deadlock":      {"never finished"},
	"task2/data-race":     {"data race"},
}

// brokenHangTimeout is the unit timeout of the broken variant that hangs:
// long enough for the suite's subtests that do finish (a few seconds each
// under -race on a busy machine), short beside DefaultUnitTimeout.
const brokenHangTimeout = 8 * time.Second

// TestBrokenCodeIsReported checks that compile errors, panics, deadlocks
// and data races each fail every check with a message saying so, without
// crashing or hanging the grader (a sample of them unless
// RATELAB_CORPUS=all).
func TestBrokenCodeIsReported(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a deadlock's test timeout")
	}
	// Beside TestStubsScoreZero, after the package's other tests: the
	// deadlock's wait leaves a core idle, and load can only turn a broken
	// variant's subtest that would finish into one that does not, which
	// is reported alike (every check must fail, and the deadlock's say
	// "never finished").
	t.Parallel()
	variants, replace := loadCorpus(t, corpus.Broken)
	missing := maps.Clone(brokenWant)
	for _, v := range variants {
		require.Contains(t, brokenWant, v.ID(), "%s: say in brokenWant what the grader must report", v.Path)
		delete(missing, v.ID())
	}
	assert.Empty(t, missing, "broken variants missing from %s/broken", corpus.Dir)
	for _, v := range sample(t, variants, sampleBrokenTotal, sampleBrokenTotal) {
		t.Run(v.ID(), func(t *testing.T) {
			if v.Name == "data-race" && !raceAvailable() {
				t.Skip("the race detector needs cgo and a C compiler")
			}
			task, ok := Lookup(v.Task)
			require.True(t, ok, "unknown task %s", v.Task)
			timeout := 20 * time.Second
			if v.Name == "deadlock" {
				// Every subtest that admits a request hangs, and the suite
				// runs again without each in turn (maxReruns, and once one
				// test at a time): five timeouts in all. A short one proves
				// the same report in a fifth of the time.
				timeout = brokenHangTimeout
			}
			doc := gradeUnitWithin(t, task, Exercises, replace[v.ID()], timeout)
			assert.Equal(t, results.StatusFail, doc.Status)
			assert.Less(t, doc.Score, doc.MaxScore)
			msgs := failedMessages(doc)
			for _, w := range brokenWant[v.ID()] {
				assert.Contains(t, msgs, w)
			}
			assert.Contains(t, msgs, fmt.Sprintf("task %d (exercises/%s/%s)", task.Number, task.Unit.Package, task.Unit.File), "messages name the task and file")
		})
	}
}

func raceAvailable() bool {
	return exec.Command("go", "env", "CGO_ENABLED").Run() == nil && os.Getenv("CGO_ENABLED") != "0" && hasCC()
}

func hasCC() bool {
	out, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		return false
	}
	_, err = exec.LookPath(string(bytes.TrimSpace(out)))
	return err == nil
}

// exercisesPristine reports whether exercises/ matches the last commit, so
// that the stub check runs in the project's CI but not on a learner's tree.
func exercisesPristine(t *testing.T) bool {
	out, err := exec.Command("git", "-C", repoRoot(t), "status", "--porcelain", "--", "exercises").Output()
	return err == nil && len(bytes.TrimSpace(out)) == 0
}

// sampleTasks returns the tasks with a unit stage: all of them under
// RATELAB_CORPUS=all, else sampleTaskTotal chosen at random.
func sampleTasks(t *testing.T) []Task {
	t.Helper()
	var all []Task
	for _, task := range Tasks() {
		if task.Unit != nil {
			all = append(all, task)
		}
	}
	if os.Getenv(corpusEnv) == "all" {
		return all
	}
	rng := suitekit.Rand(t)
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	all = all[:min(sampleTaskTotal, len(all))]
	slices.SortFunc(all, func(a, b Task) int { return a.Number - b.Number })
	var ids []string
	for _, task := range all {
		ids = append(ids, task.ID)
	}
	t.Logf("a sample of the tasks (seed %d; %s=all takes every one): %s", suitekit.Seed(), corpusEnv, strings.Join(ids, ", "))
	return all
}

// TestStubsScoreZero checks that every untouched stub fails its task's unit
// stage cleanly: score 0, "not implemented" messages, nothing crashing (a
// sample of the tasks unless RATELAB_CORPUS=all).
func TestStubsScoreZero(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every stub")
	}
	if !exercisesPristine(t) {
		t.Skip("exercises/ has local changes (or git is missing): this check is for the pristine stubs")
	}
	// Beside TestBrokenCodeIsReported (see there): a stub answers "not
	// implemented" at once, well inside the unit timeout under any load.
	t.Parallel()
	for _, task := range sampleTasks(t) {
		t.Run(task.ID, func(t *testing.T) {
			doc := gradeUnit(t, task, Exercises, nil)
			assert.Zero(t, doc.Score, "a stub must score 0")
			for _, c := range doc.Checks {
				assert.Contains(t, c.Message, "not implemented yet", "%s", c.Name)
				assert.NotContains(t, c.Message, "crashed", "%s", c.Name)
			}
		})
	}
}

// TestSolutionsPassUnits checks that the reference passes every unit check
// (of a sample of the tasks unless RATELAB_CORPUS=all). Given
// RATELAB_SOLUTIONS_DOC, the main job's document of every task
// (solutionsDocEnv), it judges that document's unit checks instead of
// running every suite again.
func TestSolutionsPassUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every solution")
	}
	if path := os.Getenv(solutionsDocEnv); path != "" {
		doc := readSolutionsDoc(t, path)
		for _, task := range Tasks() {
			if task.Unit == nil {
				continue
			}
			t.Run(task.ID, func(t *testing.T) {
				n := 0
				for _, c := range doc.Checks {
					if c.Task == task.ID && strings.HasPrefix(c.Name, "unit: ") {
						n++
						assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
						assert.Equal(t, c.MaxScore, c.Score, c.Name)
					}
				}
				assert.Equal(t, len(task.Unit.Checks), n, "unit checks of %s in %s", task.ID, path)
			})
		}
		return
	}
	for _, task := range sampleTasks(t) {
		t.Run(task.ID, func(t *testing.T) {
			doc := gradeUnit(t, task, Solutions, nil)
			assert.Equal(t, results.StatusPass, doc.Status, failedMessages(doc))
			assert.Equal(t, doc.MaxScore, doc.Score)
		})
	}
}

// TestCorpusAppliesToTheReference checks, quickly, that every variant of
// the corpus still applies to the current reference and changes it, and that
// its task and Caught-By subtests exist: a change to the reference that
// breaks a patch fails here, naming the hunk, rather than in the slow tests.
func TestCorpusAppliesToTheReference(t *testing.T) {
	root := repoRoot(t)
	variants, err := corpus.Load(root)
	require.NoError(t, err)
	require.NotEmpty(t, variants)
	for _, v := range variants {
		t.Run(string(v.Kind)+"/"+v.ID(), func(t *testing.T) {
			task, ok := Lookup(v.Task)
			require.True(t, ok, "%s: unknown task %s", v.Path, v.Task)
			require.NotNil(t, task.Unit, "%s: task %s has no unit stage to grade it", v.Path, v.Task)
			assert.Equal(t, task.Unit.Package, v.Package, "%s patches another task's package", v.Path)
			_, err := v.Apply(root, t.TempDir())
			require.NoError(t, err, "remake the variant from the current reference: see %s/README.md", corpus.Dir)
			for _, sub := range v.CaughtBy {
				_, ok := unitCheckOf(task, sub)
				assert.True(t, ok, "%s: Caught-By %s is no subtest of %s's unit checks (grader/tasks.go)", v.Path, sub, task.ID)
			}
			planned := map[string]bool{}
			for _, c := range expectedChecks(task, false) {
				planned[c.name] = true
			}
			for _, name := range v.CaughtByChecks {
				assert.True(t, planned[name], "%s: Caught-By-Check %q is not a check %s plans", v.Path, name, task.ID)
			}
		})
	}
}

// TestWrongImplementationsFailTheirFloods grades, floods included, every
// wrong variant whose patch names flood checks (Caught-By-Check lines):
// each named check must fail. These are the mistakes a unit suite cannot
// see, and the code that behaves only while it is tested; the floods judge
// them from the server's, the fake API's or Redis's own records.
func TestWrongImplementationsFailTheirFloods(t *testing.T) {
	if testing.Short() {
		t.Skip("floods every flood-judged variant")
	}
	all, replace := loadCorpus(t, corpus.Wrong)
	var flooded []corpus.Variant
	for _, v := range all {
		if len(v.CaughtByChecks) > 0 {
			flooded = append(flooded, v)
		}
	}
	graded, both := sampleOnClocks(t, flooded, sampleFloodPerTask, sampleFloodTotal)
	for _, v := range graded {
		t.Run(v.ID(), func(t *testing.T) {
			task, ok := Lookup(v.Task)
			require.True(t, ok, "unknown task %s", v.Task)
			if virtualOnly(task, both[v.ID()]) && !slices.ContainsFunc(v.CaughtByChecks, wallJudged) {
				// Beside the others like it (go test -parallel, GOMAXPROCS:
				// two on the lab's machine): every check that must fail is
				// judged in virtual time, whose figures no load changes; a
				// neighbour can only spoil the wall-clock checks this test
				// ignores. The net below sees checks that name their run;
				// a wall-clock check without one must be named in
				// wallJudged by hand.
				t.Parallel()
			}
			planned := map[string]bool{}
			for _, c := range expectedChecks(task, false) {
				planned[c.name] = true
			}
			for _, name := range v.CaughtByChecks {
				require.True(t, planned[name], "%s: Caught-By-Check %q is not a check %s plans", v.Path, name, task.ID)
			}
			for _, virtual := range clocks(task, both[v.ID()]) {
				// No unit stage: these variants are caught by floods alone
				// (the named checks below), a slow variant would wait out
				// the suite's timeouts first, and building the suite under
				// -race costs seconds a variant for verdicts nobody reads.
				doc, err := Grade(context.Background(), task, Options{
					Impl: Exercises, Root: repoRoot(t), Replace: replace[v.ID()], allowEdited: true,
					Quick: true, Virtual: virtual, virtualBudget: testVirtualBudget, Log: testLog{t},
					floodsOnly: true,
				})
				require.NoError(t, err)
				for _, name := range v.CaughtByChecks {
					c := findCheck(doc, name)
					require.NotNil(t, c, "no check %q in the results", name)
					assert.Equal(t, results.StatusFail, c.Status, "check %q (%s): %s", name, clockName(virtual), c.Message)
					if virtual && !wallJudged(name) {
						for _, r := range doc.Runs {
							assert.False(t, r.Name == c.Run && !r.IsVirtual(), "check %q reads the wall-clock run %q: name it in wallJudged", name, r.Name)
						}
					}
					t.Logf("%s %q (%s): %s", c.Status, name, clockName(virtual), c.Message)
				}
				assert.Less(t, doc.Score, doc.MaxScore, "a wrong implementation must lose points (%s)", clockName(virtual))
			}
		})
	}
}

// virtualOnly reports whether the corpus tests grade a variant of task in
// virtual time alone (see clocks).
func virtualOnly(task Task, both bool) bool {
	cs := clocks(task, both)
	return len(cs) == 1 && cs[0]
}

// wallJudged reports whether a check of that name is judged from traffic
// on the wall clock even in a virtual-time grading, where another grading
// beside it could push the load generator's send lag past what a run may
// have and leave the check not judged: the server's idle CPU (read after a
// wall-clock flood), task 3's many clients (40,000 keys against a real
// server's heap, outside any bubble) and task 6's Redis Cluster. Checked
// against the document after each grading
// (TestWrongImplementationsFailTheirFloods), so that a new wall-clock check
// missing here is found.
//
// The other measurements on the wall clock are not here, since load moves
// them only one way: a cost per call is the fastest of three rounds, which
// a neighbour can only make slower (a costly variant fails more surely,
// and the reference's few microseconds stay tens of times under the
// budget), and bytes of heap per client or per waiting request do not
// depend on the machine's load at all.
func wallJudged(check string) bool {
	for _, mark := range []string{"idle", "many clients:", "Cluster:"} {
		if strings.Contains(check, mark) {
			return true
		}
	}
	return false
}

// floodsWallBeside reports whether a virtual-time grading of task still
// judges a check from traffic on the wall clock (wallJudged): task 2's and
// 3's idle checks (a flood, then an idle spell), task 3's many clients and
// task 6's Redis Cluster. Read from the checks each task plans, so that a
// new task with such a check is caught.
func floodsWallBeside(task Task) bool {
	return slices.ContainsFunc(expectedChecks(task, false), func(c planned) bool { return wallJudged(c.name) })
}

// clocks lists the clocks a corpus test grades a variant of task on (Virtual
// false is the wall clock): virtual time where the task has it, as grade
// does by default, and the wall clock as well if both (the variant is one
// of the seeded draw, see sampleOnClocks). A task without virtual time is
// graded on the wall clock alone. RATELAB_CLOCK=wall, =virtual or =both
// makes every variant's clocks that.
func clocks(task Task, both bool) []bool {
	all := []bool{false}
	if virtualTasks[task.ID] != "" {
		all = append(all, true)
	}
	switch os.Getenv("RATELAB_CLOCK") {
	case "wall":
		return all[:1]
	case "virtual":
		return all[len(all)-1:]
	case "both":
		return all
	}
	if both {
		return all
	}
	return all[len(all)-1:]
}

// clockName names a grading's clock in test messages.
func clockName(virtual bool) string {
	if virtual {
		return "virtual time"
	}
	return "wall clock"
}

// testVirtualBudget is the real time a session request may take in the
// grader's tests, as a backstop: a flood takes well under a second, and the
// session reports a stalled clock itself after vsession.StallLimit.
const testVirtualBudget = 2 * time.Minute

// testLog sends the grader's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRightImplementationsPass grades every right variant of the corpus
// (correct code written otherwise than the reference), floods included: each
// must score full marks. A check that fails one judges the reference's way
// of doing things, not the task's promise.
func TestRightImplementationsPass(t *testing.T) {
	if testing.Short() {
		t.Skip("grades every right variant with its floods")
	}
	root := repoRoot(t)
	all, err := corpus.Load(root)
	require.NoError(t, err)
	var right []corpus.Variant
	for _, v := range all {
		if v.Kind == corpus.Right {
			right = append(right, v)
		}
	}
	graded, both := sampleOnClocks(t, right, sampleRightPerTask, sampleRightTotal)
	for _, v := range graded {
		t.Run(v.ID(), func(t *testing.T) {
			task, ok := Lookup(v.Task)
			require.True(t, ok, "unknown task %s", v.Task)
			if virtualOnly(task, both[v.ID()]) && !floodsWallBeside(task) {
				// Beside the others like it: a right variant must pass every
				// check, so only a grading that nothing beside it can
				// spoil. In virtual time the floods' figures are the same
				// under any load; what such a task still measures on the
				// wall clock (CPU per call, the fastest of three rounds,
				// against a budget tens of times the reference's; heap
				// bytes) a neighbour can slow or leave alone, not fail.
				t.Parallel()
			}
			replace, err := v.Apply(root, t.TempDir())
			require.NoError(t, err)
			for _, virtual := range clocks(task, both[v.ID()]) {
				doc, err := Grade(context.Background(), task, Options{
					Impl: Exercises, Root: root, Replace: replace, allowEdited: true, Quick: true,
					Virtual: virtual, virtualBudget: testVirtualBudget, Log: testLog{t},
				})
				require.NoError(t, err)
				assert.Equal(t, results.StatusPass, doc.Status, "%s: %s", clockName(virtual), failedMessages(doc))
				assert.Equal(t, doc.MaxScore, doc.Score, clockName(virtual))
				t.Logf("%g of %g (%s)", doc.Score, doc.MaxScore, clockName(virtual))
			}
		})
	}
}
