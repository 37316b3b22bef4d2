package results

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleDoc() *Document {
	start := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	d := &Document{
		Schema: Schema, Task: "all", Impl: "exercises", Started: start, Finished: start.Add(95 * time.Second),
		Checks: []Check{
			{Task: "task2", Name: "unit: drain time", Status: StatusPass, Score: 1, MaxScore: 1, Message: "ok"},
			{Task: "task2", Name: "shed 240/s: successes", Status: StatusFail, Score: 0, MaxScore: 2, Message: "640 succeeded; want 800–840"},
			{Task: "task3", Name: "unit: exact wait", Status: StatusSkip, MaxScore: 2, Message: "not run because x"},
			{Task: "task3", Name: "bucket 100/s", Status: StatusError, MaxScore: 1, Message: "not judged: unreliable, 50%, a:b"},
		},
	}
	d.Total()
	return d
}

func loc(task string) Location {
	return map[string]Location{"task2": {"exercises/shedding/shedding.go", 70}, "task3": {"exercises/bucket/bucket.go", 64}}[task]
}

func TestJUnit(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, sampleDoc(), loc))
	var got junitSuites
	require.NoError(t, xml.Unmarshal(b.Bytes(), &got))
	assert.Equal(t, 4, got.Tests)
	assert.Equal(t, 1, got.Fails)
	assert.Equal(t, 1, got.Errors)
	assert.Equal(t, 1, got.Skipped)
	require.Len(t, got.Suites, 2)
	assert.Equal(t, "ratelab.task2", got.Suites[0].Name)
	c := got.Suites[0].Cases[1]
	assert.Equal(t, "shed 240/s: successes", c.Name)
	require.NotNil(t, c.Failure)
	assert.Contains(t, c.Failure.Message, "want 800–840")
	assert.Equal(t, "exercises/shedding/shedding.go", c.File)
	assert.Nil(t, got.Suites[0].Cases[0].Failure, "a passing check has no failure")
}

func TestClassroom(t *testing.T) {
	d := sampleDoc()
	d.Seed = 42
	s, err := ClassroomBase64(d, loc)
	require.NoError(t, err)
	raw, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	// Decode into a plain map: these are the fields the reporter reads.
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	assert.EqualValues(t, 1, m["version"])
	assert.Equal(t, "error", m["status"], "an error check makes the run an error")
	assert.EqualValues(t, 6, m["max_score"])
	tests := m["tests"].([]any)
	require.Len(t, tests, 6, "one test per point: 1 + 2 + 2 + 1")
	first := tests[1].(map[string]any)
	for _, k := range []string{"name", "status", "score", "message", "test_code", "filename", "line_no", "duration"} {
		assert.Contains(t, first, k)
	}
	assert.Equal(t, "fail", first["status"])
	assert.Equal(t, "task2: shed 240/s: successes — 640 succeeded; want 800–840 (point 1 of 2)", first["name"], "a failed test's name carries its reason")
	assert.Equal(t, "go run ./cmd/grade task2 --seed 42", first["test_code"])
	assert.Equal(t, "task2: shed 240/s: successes (point 2 of 2)", tests[2].(map[string]any)["name"])
	assert.Equal(t, "exercises/shedding/shedding.go", first["filename"])
	assert.EqualValues(t, 70, first["line_no"])
	assert.Equal(t, "fail", tests[3].(map[string]any)["status"], "a skip counts as a fail for Classroom")
	last := tests[5].(map[string]any)
	assert.Equal(t, "error", last["status"])
	assert.Equal(t, "task3: bucket 100/s: not judged: unreliable, 50%, a:b", last["message"], "an error's message names its check")
	total := 0.0
	for _, x := range tests {
		total += x.(map[string]any)["score"].(float64)
	}
	assert.Equal(t, d.Score, total)
}

// TestClassroomReporter runs GitHub Classroom's own reporter
// (classroom-resources/autograding-grading-reporter v1, its bundled
// dist/main.js, vendored under testdata with its licence) on our output:
// the total it prints for the learner and the points it notifies must be
// the document's score, and every failed or erring check must show why.
func TestClassroomReporter(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Classroom reporter is a Node program")
	}
	for _, tt := range []struct {
		name  string
		doc   *Document
		exact bool
	}{
		{"all pass", classroomDoc(StatusPass, StatusPass, StatusPass), true},
		{"some fail", classroomDoc(StatusPass, StatusFail, StatusSkip), true},
		{"score 29 of 35", manyChecks(35, 29), true},
		{"with an error", sampleDoc(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b64, err := ClassroomBase64(tt.doc, loc)
			require.NoError(t, err)
			cmd := exec.Command(node, filepath.Join("testdata", "classroom-reporter", "main.js"))
			cmd.Env = append(os.Environ(), "INPUT_RUNNERS=ratelab", "RATELAB_RESULTS="+b64, "NO_COLOR=1", "GITHUB_ACTIONS=")
			out, _ := cmd.CombinedOutput() // it exits 1 when anything failed
			text := ansi.ReplaceAllString(string(out), "")
			assert.Contains(t, text, fmt.Sprintf("::notice title=Autograding complete::Points %g/%g", tt.doc.Score, tt.doc.MaxScore), text)
			if tt.exact {
				assert.Contains(t, text, fmt.Sprintf("Total points for ratelab: %.2f/%g", tt.doc.Score, tt.doc.MaxScore), text)
			}
			for _, c := range tt.doc.Checks {
				switch c.Status {
				case StatusFail, StatusSkip:
					assert.Contains(t, text, c.Name+" — "+c.Message, "a failed check shows its reason")
				case StatusError:
					assert.Contains(t, text, "Error: "+c.Task+": "+c.Name+": "+c.Message, "an error shows its check and message")
				}
			}
		})
	}
}

// ansi matches terminal colour codes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// classroomDoc has one check per status given, worth 1, 2, 3 ... points.
func classroomDoc(statuses ...Status) *Document {
	d := &Document{Schema: Schema, Task: "task2", Impl: "exercises", Seed: 7}
	for i, st := range statuses {
		c := Check{Task: "task2", Name: fmt.Sprintf("check %d", i+1), Status: st, MaxScore: float64(i + 1), Message: fmt.Sprintf("reason %d", i+1)}
		if st == StatusPass {
			c.Score = c.MaxScore
		}
		d.Checks = append(d.Checks, c)
	}
	d.Total()
	return d
}

// manyChecks is a document worth max points in checks of 1 to 3 points,
// of which score points passed.
func manyChecks(max, score int) *Document {
	d := &Document{Schema: Schema, Task: "all", Impl: "exercises"}
	for left, i := max, 0; left > 0; i++ {
		pts := min(1+i%3, left)
		left -= pts
		st := StatusFail
		if score >= pts {
			st, score = StatusPass, score-pts
		}
		c := Check{Task: "task3", Name: fmt.Sprintf("check %d", i), Status: st, MaxScore: float64(pts), Message: "why " + fmt.Sprint(i)}
		if st == StatusPass {
			c.Score = c.MaxScore
		}
		d.Checks = append(d.Checks, c)
	}
	d.Total()
	return d
}

func TestGradescope(t *testing.T) {
	g := Gradescope(sampleDoc())
	b, err := json.Marshal(g)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.EqualValues(t, 1, m["score"])
	assert.EqualValues(t, 95, m["execution_time"])
	assert.Contains(t, m["output"], "exercises")
	tests := m["tests"].([]any)
	require.Len(t, tests, 4)
	for i, want := range []string{"passed", "failed", "failed", "failed"} {
		tc := tests[i].(map[string]any)
		assert.Equal(t, want, tc["status"])
		for _, k := range []string{"name", "score", "max_score", "output", "visibility"} {
			assert.Contains(t, tc, k)
		}
	}
}

func TestAnnotations(t *testing.T) {
	d := sampleDoc()
	for i := 0; i < 20; i++ {
		d.Checks = append(d.Checks, Check{Task: "task3", Name: "x", Status: StatusFail, MaxScore: 1})
	}
	a := Annotations(d, loc)
	require.Len(t, a, 10, "GitHub keeps 10 errors per step")
	assert.Equal(t, 2.0, d.Checks[1].MaxScore)
	assert.Contains(t, a[0].Title, "shed 240/s", "the most valuable check comes first")
	line := Annotations(sampleDoc(), loc)[1].String()
	assert.True(t, strings.HasPrefix(line, "::error file=exercises/bucket/bucket.go,line=64,title="), line)
	assert.NotContains(t, strings.SplitN(line, "::", 3)[1], ",b", "commas inside properties are escaped")
}

func TestSignVerify(t *testing.T) {
	d := sampleDoc()
	key := []byte("instructor secret")
	assert.ErrorIs(t, Verify(d, key), ErrUnsigned)
	require.NoError(t, Sign(d, key))
	assert.NoError(t, Verify(d, key))
	assert.ErrorIs(t, Verify(d, []byte("another key")), ErrForged)
	d.Score = d.MaxScore // a learner raising their own score
	assert.ErrorIs(t, Verify(d, key), ErrForged)
}

func TestReceivedRate(t *testing.T) {
	st := &Storm{ServerSamples: []Sample{
		{TS: 0, Stats: ServerStats{Received: 0}},
		{TS: 1, Stats: ServerStats{Received: 100}},
		{TS: 2, Stats: ServerStats{Received: 400}},
	}}
	rate := func(from, to float64) []any { r, ok := st.ReceivedRate(from, to); return []any{r, ok} }
	assert.Equal(t, []any{200.0, true}, rate(0, 2))
	assert.Equal(t, []any{300.0, true}, rate(1, 2))
	assert.Equal(t, []any{0.0, false}, rate(1, 5), "samples that end too soon")
	assert.Equal(t, []any{0.0, false}, rate(2, 1))
}

// An inconclusive check is loud in CI, honest in the autograders and a
// warning among the annotations.
func TestFormatsInconclusive(t *testing.T) {
	d := sampleDoc()
	d.Checks = []Check{
		{Task: "task2", Name: "unit: drain time", Status: StatusPass, Score: 1, MaxScore: 1, Message: "ok"},
		{Task: "task2", Name: "shed 240/s: successes", Status: StatusInconclusive, MaxScore: 2,
			Message: "runs disagree: pass (ok 812), fail (ok 798), pass (ok 815). Repeat 2: 798 succeeded; want 800–840"},
	}
	d.Total()
	require.Equal(t, StatusInconclusive, d.Status)

	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, d, loc))
	var j junitSuites
	require.NoError(t, xml.Unmarshal(b.Bytes(), &j))
	assert.Equal(t, 1, j.Errors, "an inconclusive check is a JUnit error")
	assert.Zero(t, j.Fails)
	assert.Zero(t, j.Skipped, "not a skip, which CI hides")
	c := j.Suites[0].Cases[1]
	require.NotNil(t, c.Error)
	assert.Equal(t, "inconclusive", c.Error.Type)
	assert.Contains(t, c.Error.Message, "inconclusive: runs disagree: pass (ok 812), fail (ok 798)")
	assert.Nil(t, j.Suites[0].Cases[0].Error)
	assert.NotContains(t, b.String(), `type=""`, "other problems carry no type")

	cl := Classroom(d, loc)
	assert.Equal(t, "error", cl.Status, "Classroom knows no inconclusive; error does not blame the learner")
	var inc ClassroomTest
	for _, tc := range cl.Tests {
		if strings.HasPrefix(tc.Name, "task2: shed 240/s: successes") {
			inc = tc
			break
		}
	}
	assert.Equal(t, "error", inc.Status)
	assert.Zero(t, inc.Score)
	assert.True(t, strings.HasPrefix(inc.Message, "task2: shed 240/s: successes: inconclusive: runs disagree"), inc.Message)

	g := Gradescope(d)
	assert.Equal(t, "failed", g.Tests[1].Status)
	assert.Zero(t, g.Tests[1].Score)
	assert.Contains(t, g.Tests[1].Output, "INCONCLUSIVE")
	assert.Contains(t, g.Tests[1].Output, "fail (ok 798)")
	assert.Contains(t, g.Output, "inconclusive")

	a := Annotations(d, loc)
	require.Len(t, a, 1)
	line := a[0].String()
	assert.True(t, strings.HasPrefix(line, "::warning file=exercises/shedding/shedding.go,line=70,title="), line)
	assert.Contains(t, line, "(inconclusive%2C 0 of 2)")
}

// TestJUnitRealParser reads our JUnit XML with test-results-parser (npm), a
// parser CI dashboards use: its counts must be ours and no duration may come
// out as NaN. .ci/run installs it and names its node_modules folder in
// RATELAB_NODE_MODULES.
func TestJUnitRealParser(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	mods := os.Getenv("RATELAB_NODE_MODULES")
	if mods == "" {
		t.Skip("RATELAB_NODE_MODULES is not set: .ci/run installs test-results-parser there (npm install test-results-parser@0.4.6)")
	}
	if _, err := os.Stat(filepath.Join(mods, "test-results-parser")); err != nil {
		t.Skipf("no test-results-parser in %s: %v", mods, err)
	}
	d := sampleDoc()
	d.TaskSeconds = map[string]float64{"task2": 60.5, "task3": 34.5}
	var b bytes.Buffer
	require.NoError(t, WriteJUnit(&b, d, loc))
	file := filepath.Join(t.TempDir(), "junit.xml")
	require.NoError(t, os.WriteFile(file, b.Bytes(), 0o644))
	script := `const {parse} = require(require('path').join(process.env.RATELAB_NODE_MODULES, 'test-results-parser'));
const r = parse({type: 'junit', files: [process.argv[1]]});
console.log(JSON.stringify({total: r.total, passed: r.passed, failed: r.failed, errors: r.errors, skipped: r.skipped, duration: r.duration,
  suites: r.suites.map(s => ({name: s.name, total: s.total, duration: s.duration, cases: s.cases.map(c => ({name: c.name, status: c.status, duration: c.duration}))}))}));`
	out, err := exec.Command(node, "-e", script, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var got struct {
		Total, Passed, Failed, Errors, Skipped int
		Duration                               *float64
		Suites                                 []struct {
			Name     string
			Total    int
			Duration *float64
			Cases    []struct {
				Name     string
				Status   string
				Duration *float64
			}
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	// Its convention: total leaves skips out; errors are counted apart.
	assert.Equal(t, 3, got.Total, "%s", out)
	assert.Equal(t, 1, got.Passed)
	assert.Equal(t, 1, got.Failed)
	assert.Equal(t, 1, got.Errors)
	assert.Equal(t, 1, got.Skipped)
	require.NotNil(t, got.Duration, "the total duration is a number, not NaN")
	assert.InDelta(t, 95000, *got.Duration, 1, "milliseconds")
	require.Len(t, got.Suites, 2)
	for _, s := range got.Suites {
		require.NotNil(t, s.Duration, "suite %s duration", s.Name)
		for _, c := range s.Cases {
			require.NotNil(t, c.Duration, "case %s duration", c.Name)
		}
	}
	assert.InDelta(t, 60500, *got.Suites[0].Duration, 1)
}
