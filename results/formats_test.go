package results

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
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
	s, err := ClassroomBase64(sampleDoc(), loc)
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
	require.Len(t, tests, 4)
	first := tests[1].(map[string]any)
	for _, k := range []string{"name", "status", "score", "message", "test_code", "filename", "line_no", "duration"} {
		assert.Contains(t, first, k)
	}
	assert.Equal(t, "fail", first["status"])
	assert.Equal(t, "exercises/shedding/shedding.go", first["filename"])
	assert.EqualValues(t, 70, first["line_no"])
	assert.Equal(t, "fail", tests[2].(map[string]any)["status"], "a skip counts as a fail for Classroom")
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
	assert.Equal(t, "error", cl.Tests[1].Status)
	assert.Zero(t, cl.Tests[1].Score)
	assert.True(t, strings.HasPrefix(cl.Tests[1].Message, "inconclusive: runs disagree"), cl.Tests[1].Message)

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
