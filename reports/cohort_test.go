package reports

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// testdata/cohort holds a small class: alice (the reference, all pass), bob
// (shedding off), carol (task 3's unit tests failed, its floods skipped),
// dave (a slow machine: high p99s, one run not judged), ken, lena and mo
// (small variations of alice, mo's jittered storm slow), and six files
// that must be skipped: erin (alice's bytes again), frank (truncated),
// grace (malformed), heidi (an older schema), ivan (a JSON array) and judy
// (empty).
const cohortDir = "testdata/cohort"

func loadTestCohort(t *testing.T) *Cohort {
	t.Helper()
	c, err := LoadCohort([]string{cohortDir})
	require.NoError(t, err)
	return c
}

func TestLoadCohort(t *testing.T) {
	c := loadTestCohort(t)
	var read []string
	for _, d := range c.Docs {
		read = append(read, filepath.Base(filepath.Dir(d.Path)))
	}
	assert.Equal(t, []string{"alice", "bob", "carol", "dave", "ken", "lena", "mo"}, read)
	reasons := map[string]string{}
	for _, s := range c.Skipped {
		reasons[filepath.Base(filepath.Dir(s.Path))] = s.Reason
	}
	want := map[string]string{
		"erin":  "duplicate: the same bytes as testdata/cohort/alice/results.json",
		"frank": "truncated JSON",
		"grace": "malformed JSON at byte",
		"heidi": `schema "ratelab.results/v0", want "ratelab.results/v1"`,
		"ivan":  "not a JSON object",
		"judy":  "empty file",
	}
	require.Len(t, reasons, len(want), "skipped: %v", reasons)
	for name, w := range want {
		assert.Contains(t, reasons[name], w, "why %s was skipped", name)
	}
}

// A file named twice, a missing path and a folder without results are
// skipped, not fatal; only no arguments at all is an error.
func TestLoadCohortArguments(t *testing.T) {
	alice := filepath.Join(cohortDir, "alice", "results.json")
	empty := t.TempDir()
	c, err := LoadCohort([]string{alice, alice, filepath.Join(cohortDir, "no-such"), empty})
	require.NoError(t, err)
	require.Len(t, c.Docs, 1, "alice once")
	require.Len(t, c.Skipped, 3)
	assert.Contains(t, c.Skipped[0].Reason, "duplicate")
	assert.Equal(t, "no such file or folder", c.Skipped[1].Reason)
	assert.Equal(t, "holds no file named results.json", c.Skipped[2].Reason)

	_, err = LoadCohort(nil)
	assert.Error(t, err)
}

func TestCohortCSVGolden(t *testing.T) {
	c := loadTestCohort(t)
	for name, write := range map[string]func(*bytes.Buffer) error{
		"cohort-checks.golden.csv":  func(b *bytes.Buffer) error { return c.WriteChecksCSV(b) },
		"cohort-runs.golden.csv":    func(b *bytes.Buffer) error { return c.WriteRunsCSV(b) },
		"cohort-skipped.golden.csv": func(b *bytes.Buffer) error { return c.WriteSkippedCSV(b) },
	} {
		var b bytes.Buffer
		require.NoError(t, write(&b))
		// Every row has every column: encoding/csv refuses ragged rows.
		rows, err := csv.NewReader(bytes.NewReader(b.Bytes())).ReadAll()
		require.NoError(t, err, name)
		require.NotEmpty(t, rows, name)
		golden(t, name, b.Bytes())
	}
}

func TestCohortCSVRows(t *testing.T) {
	c := loadTestCohort(t)
	var b bytes.Buffer
	require.NoError(t, c.WriteChecksCSV(&b))
	rows, err := csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, checksColumns, rows[0])
	checks := 0
	for _, d := range c.Docs {
		checks += len(d.Doc.Checks)
	}
	assert.Len(t, rows, 1+checks, "one row per document and check, skipped files in none")
	for _, r := range rows[1:] {
		assert.NotContains(t, r[0], "erin", "a duplicate is never counted")
	}

	b.Reset()
	require.NoError(t, c.WriteRunsCSV(&b))
	rows, err = csv.NewReader(&b).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, runsColumns, rows[0])
	storms := 0
	for _, r := range rows[1:] {
		if r[5] == "storm" {
			storms++
		}
	}
	assert.Equal(t, 8, storms, "two storms in each of four documents")
}

func TestCohortOutliers(t *testing.T) {
	c := loadTestCohort(t)
	page := cohortPage(c)
	var outliers *table
	for _, b := range page.Blocks {
		if b.ID == "outliers" {
			outliers = b.Table
		}
	}
	require.NotNil(t, outliers)
	found := map[string]bool{}
	for _, row := range outliers.Rows {
		found[filepath.Base(filepath.Dir(row[0].Text))+" "+row[1].Text+" "+row[2].Text] = true
	}
	assert.True(t, found["bob shed 240/s Goodput"], "bob's broken shedding: %v", found)
	assert.True(t, found["dave 80/s p99 latency of successes"], "dave's slow machine: %v", found)
	assert.True(t, found["mo storm 400, full jitter Storm time"], "mo's slow storm: %v", found)
	assert.False(t, found["alice 80/s Goodput"])
}

func TestSummarize(t *testing.T) {
	s := summarize([]float64{1, 2, 3, 4, 100})
	assert.Equal(t, 3.0, s.Med)
	assert.Equal(t, 2.0, s.Q1)
	assert.Equal(t, 4.0, s.Q3)
	assert.True(t, s.outlier(100))
	assert.False(t, s.outlier(1))
	assert.Equal(t, 4.0, s.WhiskHigh)
	// All alike: a 1% difference is not an outlier.
	assert.False(t, summarize([]float64{800, 800, 800, 800, 808}).outlier(808))
	// Too few to judge.
	assert.False(t, summarize([]float64{1, 1000}).outlier(1000))
}

func TestWriteCohort(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteCohort(dir, loadTestCohort(t)))
	for _, name := range []string{"index.html", "checks.csv", "runs.csv", "skipped.csv", "echarts.min.js", "echarts-LICENSE.txt"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	page := string(b)
	for _, want := range []string{"testdata/cohort/frank/results.json", "truncated JSON", "Skipped files (6)", "7 results documents", `href="checks.csv"`} {
		assert.Contains(t, page, want)
	}
	assert.NotContains(t, page, "go-echarts.github.io")

	// No documents: the page says so and lists what was skipped.
	c := &Cohort{Skipped: []Skipped{{"x/results.json", "empty file"}}}
	files, err := renderCohort(c)
	require.NoError(t, err)
	assert.Contains(t, string(files["index.html"]), "No document could be read")
	assert.True(t, strings.Contains(string(files["skipped.csv"]), "x/results.json,empty file"))
}

func TestReadDocument(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{``, "empty file"},
		{`{"schema": "ratelab.results/v1", "runs": [`, "truncated JSON"},
		{`{"schema": "ratelab.results/v1"} trailing`, "malformed JSON"},
		{`{"task": "task1"}`, `no "schema" field`},
		{`{"schema": "ratelab.results/v2"}`, `schema "ratelab.results/v2", want "ratelab.results/v1"`},
		{`{"schema": "ratelab.results/v1", "score": "ten"}`, `field "score" holds a JSON string`},
		{`"hello"`, "not a JSON object but a JSON string"},
	} {
		_, err := ReadDocument(strings.NewReader(tt.in))
		assert.ErrorContains(t, err, tt.want, "ReadDocument(%q)", tt.in)
	}
	doc, err := ReadDocument(strings.NewReader(`{"schema": "ratelab.results/v1", "task": "task1"}`))
	require.NoError(t, err)
	assert.Equal(t, results.Schema, doc.Schema)
}
