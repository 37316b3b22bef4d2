package grader

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/suites/suitekit"
	"ratelab/internal/vnet"
	"ratelab/internal/vsession"
	"ratelab/model"
	"ratelab/results"
	"ratelab/solutions/bucket"
	"ratelab/solutions/shedding"
)

// virtualFlood floods a fresh in-memory server with cfg (and the
// reference's admission and limiter) inside a synctest bubble.
func virtualFlood(t *testing.T, cfg fakegpu.Config, rate float64, d, timeout time.Duration) *results.Run {
	t.Helper()
	return virtualFloodWith(t, cfg, harness.Options{Rate: rate, Duration: d, Timeout: timeout, Header: clientHeader("c")})
}

// virtualFloodWith is virtualFlood with the flood's options: its URL,
// Stats and Dial are set here.
func virtualFloodWith(t *testing.T, cfg fakegpu.Config, opts harness.Options) *results.Run {
	t.Helper()
	var run *results.Run
	synctest.Test(t, func(t *testing.T) {
		var n vnet.Network
		srv, err := fakegpu.New(cfg, fakegpu.WithSettle(vsession.Settle()),
			fakegpu.WithAdmission(fakegpu.AdmissionFunc(shedding.Admit)),
			fakegpu.WithLimiter(bucket.NewKeyedLimiter(cfg.BucketRate, cfg.BucketBurst)))
		require.NoError(t, err)
		l, err := n.Listen("127.0.0.1:8000")
		require.NoError(t, err)
		hs := &http.Server{Handler: srv}
		go hs.Serve(l)
		opts.URL, opts.Stats, opts.Dial = "http://127.0.0.1:8000/generate", harness.ServerStats(srv), n.DialContext
		run, err = harness.Flood(context.Background(), opts)
		require.NoError(t, err)
		srv.Close()
		hs.Close()
	})
	return run
}

// In virtual time the floods are the simulation, request for request: the
// same successes, dead work and line, with no noise band. (The timing ties
// are settled the same way on both sides: see package ties.)
func TestVirtualFloodsMatchTheSimulation(t *testing.T) {
	const d = 10 * time.Second
	shed, bucketCfg := fakegpu.DefaultConfig(), fakegpu.DefaultConfig()
	shed.Mode, bucketCfg.Mode = fakegpu.ModeShed, fakegpu.ModeBucket
	rows := []struct {
		name string
		cfg  fakegpu.Config
		rate float64
		want int // the lesson's figure
	}{
		{"unprotected 80/s", fakegpu.DefaultConfig(), 80, 800},
		{"unprotected 120/s", fakegpu.DefaultConfig(), 120, 216},
		{"unprotected 160/s", fakegpu.DefaultConfig(), 160, 144},
		{"unprotected 240/s", fakegpu.DefaultConfig(), 240, 112},
		{"shed 240/s", shed, 240, 816},
		{"shed 480/s", shed, 480, 816},
		{"bucket 100/s", bucketCfg, 100, 719},
		{"bucket 240/s", bucketCfg, 240, 718},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			sim := row.cfg.Sim()
			sim.Clients = []model.SimClient{{Name: "c", Rate: row.rate, Duration: d, Timeout: time.Second}}
			res, err := sim.Run()
			require.NoError(t, err)
			run := virtualFlood(t, row.cfg, row.rate, d, time.Second)
			assert.Equal(t, int64(row.want), run.OK, "the lesson's figure")
			assert.Equal(t, int64(res.Count(-1, model.SimOK)), run.OK, "successes")
			assert.Equal(t, int64(res.Count(-1, model.SimTimeout)), run.Counts[results.OutcomeTimeout], "timeouts")
			assert.Equal(t, int64(res.Stats.Dead), run.ServerFinal.Dead, "dead work")
			assert.Equal(t, int64(res.WaitingAtClientsDone), run.ServerAfterFlood.Waiting, "still waiting after the flood")
			assert.Equal(t, int64(res.Stats.MaxWaiting), run.ServerFinal.MaxWaiting, "longest line")
			again := virtualFlood(t, row.cfg, row.rate, d, time.Second)
			assert.Equal(t, run.Counts, again.Counts, "a second run is identical")
			assert.Equal(t, run.Histograms, again.Histograms, "to the microsecond")
		})
	}
}

// Graded in virtual time, the reference of every task that has it scores
// full marks, and every flood with a simulated count matches it exactly:
// the lesson's 216, 144 and 112, 816, 719 and 718, with no band; the storm
// without jitter ends when the simulated lockstep does; the polite client,
// paced below the API's buckets, is never refused; the sliding counter
// disagrees with the log exactly as the definitions do. Under
// RATELAB_CORPUS=all (the project's CI) every such task, else one drawn
// from the run's seed, so that the package's tests stay well inside go
// test's ten minutes (432 s on 2 cores with two). Given
// RATELAB_SOLUTIONS_DOC (solutionsDocEnv), it judges that document instead
// of grading again.
func TestVirtualGradingIsTheModel(t *testing.T) {
	if testing.Short() {
		t.Skip("grades tasks in virtual time")
	}
	var ids []string
	for _, task := range Tasks() {
		if virtualTasks[task.ID] != "" {
			ids = append(ids, task.ID)
		}
	}
	if path := os.Getenv(solutionsDocEnv); path != "" {
		doc := readSolutionsDoc(t, path)
		t.Logf("judging %s (%s), graded by grade --solutions all, instead of grading again", path, solutionsDocEnv)
		for _, id := range ids {
			t.Run(id, func(t *testing.T) { assertIsTheModel(t, taskPart(doc, id)) })
		}
		return
	}
	if os.Getenv(corpusEnv) != "all" {
		rng := suitekit.Rand(t)
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:1]
		slices.Sort(ids)
		t.Logf("a sample of the tasks (%s=all grades every one): %s", corpusEnv, strings.Join(ids, ", "))
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			task, ok := Lookup(id)
			require.True(t, ok)
			// A machine too busy to keep the lesson's rates stops
			// wall-clock floods; virtual ones run all the same.
			busy := &Calibration{Reason: "set by the test: a machine too busy for wall-clock floods"}
			doc, err := Grade(context.Background(), task, Options{
				Impl: Solutions, Root: repoRoot(t), Virtual: true, allowEdited: true, Log: testLog{t}, Calibration: busy,
			})
			require.NoError(t, err)
			assert.Nil(t, findCheck(doc, "calibration"), "a failed calibration does not stop virtual-time floods")
			assertIsTheModel(t, doc)
		})
	}
}

// solutionsDocEnv names the environment variable that hands
// TestVirtualGradingIsTheModel a results document of the README's main job,
// `grade --solutions all` in virtual time, to judge instead of grading every
// task again: .ci/run sets it to the document its main job has just
// written from the same tree, since grading the reference twice would
// check nothing more (grader/testdata/README.md).
const solutionsDocEnv = "RATELAB_SOLUTIONS_DOC"

// readSolutionsDoc reads the document solutionsDocEnv names and makes sure
// it is what that variable promises: every task of the reference, graded
// for a score in virtual time.
func readSolutionsDoc(t *testing.T, path string) *results.Document {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "%s names no readable results document", solutionsDocEnv)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err, "%s=%s", solutionsDocEnv, path)
	require.Equal(t, "all", doc.Task, "%s: want a document of grade --solutions all", path)
	require.Equal(t, string(Solutions), doc.Impl, "%s: want a document of grade --solutions all", path)
	require.False(t, doc.Practice, "%s: a practice run (--quick) is no grading", path)
	require.False(t, doc.Interrupted, "%s: an interrupted grading", path)
	return doc
}

// taskPart is the part of an all-task document that task id wrote: its
// checks and floods, and the storms, the judgment and the counting if the
// task is the one that makes them (each task's document is folded into the
// whole one as it is, see cmd/grade's merge).
func taskPart(doc *results.Document, id string) *results.Document {
	part := &results.Document{Task: id, Impl: doc.Impl, Notes: doc.Notes}
	for _, c := range doc.Checks {
		if c.Task == id {
			part.Checks = append(part.Checks, c)
		}
	}
	for _, r := range doc.Runs {
		if r != nil && r.Task == id {
			part.Runs = append(part.Runs, r)
		}
	}
	switch id {
	case "task4":
		part.Storms = doc.Storms
	case "task5":
		part.Judge = doc.Judge
	case "task8":
		part.Counting = doc.Counting
	}
	part.Total()
	return part
}

// assertIsTheModel asserts that doc, one task's grading of the reference,
// scores full marks and that what it measured in virtual time is the
// model's figure exactly (see TestVirtualGradingIsTheModel).
func assertIsTheModel(t *testing.T, doc *results.Document) {
	t.Helper()
	require.NotEmpty(t, doc.Checks, "%s: no checks", doc.Task)
	assert.Equal(t, doc.MaxScore, doc.Score, failedMessages(doc))
	virtual := 0
	for _, run := range doc.Runs {
		if !run.IsVirtual() {
			continue
		}
		virtual++
		if want, ok := run.Predicted["ok"]; ok {
			assert.Equal(t, int64(want), run.OK, "%s: successes, against the simulation", run.Name)
		}
		if run.Server != nil { // a fake GPU answers 200, 429 or 503 (task 7's service answers 502s too)
			assert.Zero(t, run.Counts[results.OutcomeOther], "%s: no transport errors on the in-memory network", run.Name)
		}
	}
	for _, st := range doc.Storms {
		if st.Clock != results.ClockVirtual {
			continue
		}
		virtual++
		if !st.Jitter && !st.HonorRetryAfter && st.Kind == "storm" {
			assert.InDelta(t, st.SimulatedS, st.LastDoneS, 0.001, "%s: done when the simulated lockstep is", st.Name)
		}
	}
	if j := doc.Judge; j != nil && j.Clock == results.ClockVirtual {
		virtual++
		for _, s := range j.Strategies {
			if s.Name == "polite" || s.Name == "polite-cached" {
				assert.Zero(t, s.Rejected429, "%s: refused", s.Name)
			}
		}
	}
	for _, c := range doc.Counting {
		if c.Clock != results.ClockVirtual {
			continue
		}
		virtual++
		if d := c.Disagreement; d != nil {
			assert.Equal(t, d.ModelShare(), d.Share(), "the counter against the log, as the definitions decide")
		}
	}
	assert.Positive(t, virtual, "%s: some floods, storms, judgments or measurements ran in virtual time", doc.Task)
	assert.Contains(t, strings.Join(doc.Notes, "\n"), "virtual time")
}

// TestNeedsCalibration: only wall-clock floods wait for a machine that
// keeps the lesson's rates.
func TestNeedsCalibration(t *testing.T) {
	for _, task := range Tasks() {
		virtual := Options{Virtual: true}
		assert.False(t, NeedsCalibration(task, virtual), "%s in virtual time", task.ID)
		assert.True(t, NeedsCalibration(task, Options{}), "%s on the wall clock (--real)", task.ID)
		assert.False(t, NeedsCalibration(task, Options{UnitOnly: true}), "%s: unit tests only", task.ID)
		virtual.RedisURL = "redis://127.0.0.1:6379"
		assert.Equal(t, task.ID == "task6", NeedsCalibration(task, virtual), "%s given --redis", task.ID)
		virtual.RedisURL = RedisOff
		assert.False(t, NeedsCalibration(task, virtual), "%s with --redis off", task.ID)
	}
}
