package reports

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// testdata/cohort holds a small class: alice (the reference, all pass), bob
// (shedding off), carol (task 3's unit tests failed, its floods skipped),
// dave (a slow machine: high p99s, one run not judged), ken, lena and mo
// (small variations of alice, mo's jittered storm slow), and seven files
// that must be skipped: erin (alice's bytes again), frank (truncated),
// grace (malformed), heidi (an older schema), ivan (a JSON array), judy
// (empty) and nina (lena's run marked as a practice run, grade --quick).
const cohortDir = "testdata/cohort"

// loadTestCohort loads testdata/cohort with no signing key, whatever the
// environment holds (a CI job may set one as a secret).
func loadTestCohort(t *testing.T) *Cohort {
	t.Helper()
	t.Setenv(results.SigningKeyEnv, "")
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
		"nina":  "practice run (grade --quick)",
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
		checks += len(d.checks)
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
	kind := slices.Index(runsColumns, "kind")
	storms := 0
	for _, r := range rows[1:] {
		if r[kind] == "storm" {
			storms++
		}
		assert.Equal(t, SigNotChecked, r[slices.Index(runsColumns, "signature")], "no key, no verdict")
	}
	assert.Equal(t, 8, storms, "two storms in each of four documents")
}

// writeTestCohort writes c's report into a new folder and returns its
// files by name.
func writeTestCohort(t *testing.T, c *Cohort) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, WriteCohort(dir, c))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = b
	}
	return files
}

// writeDoc writes doc as dir/name/results.json.
func writeDoc(t *testing.T, dir, name string, doc *results.Document) {
	t.Helper()
	require.NoError(t, results.WriteFile(filepath.Join(dir, name, "results.json"), doc, false))
}

func readTestDoc(t *testing.T, name string) *results.Document {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cohortDir, name, "results.json"))
	require.NoError(t, err)
	doc, err := results.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}

// With $RATELAB_SIGNING_KEY set, each file is signed, unsigned or forged;
// forged files are skipped with the reason and counted nowhere, unsigned
// ones are counted and marked. Without the key nothing is checked.
func TestCohortSignatures(t *testing.T) {
	const key = "instructor-secret"
	dir := t.TempDir()
	alice := readTestDoc(t, "alice")
	require.NoError(t, results.Sign(alice, []byte(key)))
	writeDoc(t, dir, "alice", alice)               // signed
	writeDoc(t, dir, "bob", readTestDoc(t, "bob")) // unsigned
	mallory := readTestDoc(t, "carol")
	require.NoError(t, results.Sign(mallory, []byte(key)))
	mallory.Score = mallory.MaxScore // edited after signing
	writeDoc(t, dir, "mallory", mallory)
	trent := readTestDoc(t, "dave")
	require.NoError(t, results.Sign(trent, []byte("another key")))
	writeDoc(t, dir, "trent", trent)

	t.Setenv(results.SigningKeyEnv, key)
	c, err := LoadCohort([]string{dir})
	require.NoError(t, err)
	assert.True(t, c.Verified)
	sigs := map[string]string{}
	for _, d := range c.Docs {
		sigs[filepath.Base(filepath.Dir(d.Path))] = d.Signature
	}
	assert.Equal(t, map[string]string{"alice": SigSigned, "bob": SigUnsigned}, sigs, "forged documents are not counted")
	require.Len(t, c.Skipped, 2)
	for i, name := range []string{"mallory", "trent"} {
		s := c.Skipped[i]
		assert.Equal(t, name, filepath.Base(filepath.Dir(s.Path)))
		assert.Equal(t, SigForged, s.Signature)
		assert.Equal(t, "forged: "+results.ErrForged.Error(), s.Reason)
	}

	// The CSV files: a signature column, forged files only in skipped.csv.
	files := writeTestCohort(t, c)
	checks, err := csv.NewReader(bytes.NewReader(files["checks.csv"])).ReadAll()
	require.NoError(t, err)
	col := slices.Index(checks[0], "signature")
	require.Positive(t, col)
	seen := map[string]bool{}
	for _, r := range checks[1:] {
		assert.NotContains(t, r[0], "mallory")
		assert.NotContains(t, r[0], "trent")
		seen[filepath.Base(filepath.Dir(r[0]))+" "+r[col]] = true
	}
	assert.Equal(t, map[string]bool{"alice signed": true, "bob unsigned": true}, seen)
	runs, err := csv.NewReader(bytes.NewReader(files["runs.csv"])).ReadAll()
	require.NoError(t, err)
	for _, r := range runs[1:] {
		assert.Contains(t, []string{SigSigned, SigUnsigned}, r[slices.Index(runs[0], "signature")])
	}
	skipped, err := csv.NewReader(bytes.NewReader(files["skipped.csv"])).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, []string{"file", "reason", "signature"}, skipped[0])
	require.Len(t, skipped, 3)
	assert.Equal(t, SigForged, skipped[1][2])

	// The page: the verdict on each file, the forged ones named in a
	// warning, the statistics over the two counted documents only.
	page := cohortPage(c)
	assert.Contains(t, page.Facts, fact{"signatures", "checked with RATELAB_SIGNING_KEY: 1 signed, 1 unsigned, 2 forged"})
	require.Len(t, page.Warnings, 2)
	assert.Contains(t, page.Warnings[0], "2 forged documents not counted")
	assert.Contains(t, page.Warnings[0], filepath.Join(dir, "mallory", "results.json"))
	assert.Contains(t, page.Warnings[1], "1 document has no signature")
	for _, b := range page.Blocks {
		switch b.ID {
		case "scores":
			assert.Contains(t, b.Plot.Caption, "over 2 documents")
		case "docs":
			require.Len(t, b.Table.Rows, 2)
			last := len(b.Table.Rows[0]) - 1
			assert.Equal(t, cell{Text: SigSigned, Badge: "pass"}, b.Table.Rows[0][last])
			assert.Equal(t, cell{Text: SigUnsigned, Badge: "error"}, b.Table.Rows[1][last])
		case "skipped":
			require.Len(t, b.Table.Rows, 2)
			assert.Equal(t, cell{Text: SigForged, Badge: "fail"}, b.Table.Rows[0][2])
		}
	}
	html := string(files["index.html"])
	for _, want := range []string{`<span class="badge fail">forged</span>`, `<span class="badge pass">signed</span>`, `<span class="badge error">unsigned</span>`, "forged: results signature does not match"} {
		assert.Contains(t, html, want)
	}

	// Without the key no signature is checked: every document counts but
	// mallory's, whose edited score no longer matches its own checks.
	t.Setenv(results.SigningKeyEnv, "")
	c, err = LoadCohort([]string{dir})
	require.NoError(t, err)
	assert.False(t, c.Verified)
	require.Len(t, c.Docs, 3)
	require.Len(t, c.Skipped, 1)
	assert.Equal(t, "mallory", filepath.Base(filepath.Dir(c.Skipped[0].Path)))
	assert.Contains(t, c.Skipped[0].Reason, "inconsistent: it says fail")
	for _, d := range c.Docs {
		assert.Equal(t, SigNotChecked, d.Signature)
	}
	page = cohortPage(c)
	assert.Contains(t, page.Facts, fact{"signatures", "not checked (RATELAB_SIGNING_KEY is not set)"})
	assert.Empty(t, page.Warnings)
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
	for _, want := range []string{"testdata/cohort/frank/results.json", "truncated JSON", "Skipped files (7)", "7 results documents", `href="checks.csv"`} {
		assert.Contains(t, page, want)
	}
	assert.NotContains(t, page, "go-echarts.github.io")

	// No documents: the page says so and lists what was skipped.
	c := &Cohort{Skipped: []Skipped{{Path: "x/results.json", Reason: "empty file"}}}
	files := writeTestCohort(t, c)
	assert.Contains(t, string(files["index.html"]), "No document could be read")
	assert.True(t, strings.Contains(string(files["skipped.csv"]), "x/results.json,empty file"))
}

// A document whose own status or score disagrees with its checks is listed
// as inconsistent and counted nowhere: not as a pass, not in any statistic.
func TestCohortInconsistentDocuments(t *testing.T) {
	dir := t.TempDir()
	writeDoc(t, dir, "alice", readTestDoc(t, "alice"))
	liar := readTestDoc(t, "bob")
	liar.Status, liar.Score = results.StatusPass, liar.MaxScore // the checks still fail
	writeDoc(t, dir, "liar", liar)
	greedy := readTestDoc(t, "carol")
	for i := range greedy.Checks {
		greedy.Checks[i].Score = greedy.Checks[i].MaxScore // failed checks with full points
	}
	greedy.Total()
	writeDoc(t, dir, "greedy", greedy)

	c, err := LoadCohort([]string{dir})
	require.NoError(t, err)
	require.Len(t, c.Docs, 1)
	assert.Equal(t, "alice", filepath.Base(filepath.Dir(c.Docs[0].Path)))
	reasons := map[string]string{}
	for _, s := range c.Skipped {
		reasons[filepath.Base(filepath.Dir(s.Path))] = s.Reason
	}
	assert.Contains(t, reasons["liar"], "inconsistent: it says pass")
	assert.Contains(t, reasons["greedy"], "inconsistent: check")
	assert.Contains(t, reasons["greedy"], "but scored")
}

// Documents graded with other frozen files than the rest of the cohort, or
// that say theirs were edited, are named in a warning.
func TestCohortFrozenFilesDiffer(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"alice", "bob", "carol"} {
		d := readTestDoc(t, name)
		d.Integrity = &results.Integrity{FrozenSHA256: "aaaa", Files: 10, Manifest: "none"}
		if name == "carol" {
			d.Integrity.FrozenSHA256 = "bbbb"
			d.Integrity.Edited = []string{"internal/suites/bucketsuite/suite.go"}
		}
		writeDoc(t, dir, name, d)
	}
	c, err := LoadCohort([]string{dir})
	require.NoError(t, err)
	w := frozenWarnings(c)
	require.Len(t, w, 2)
	assert.Contains(t, w[0], "1 of 3 documents were graded with frozen files")
	assert.Contains(t, w[0], filepath.Join(dir, "carol", "results.json"))
	assert.Contains(t, w[1], "not valid")
}

// An interrupted document (SIGINT or SIGTERM) counts as interrupted: not in
// the scores, not as a fail, its finished checks kept as they are.
func TestCohortInterrupted(t *testing.T) {
	dir := t.TempDir()
	writeDoc(t, dir, "alice", readTestDoc(t, "alice"))
	stopped := readTestDoc(t, "bob")
	stopped.Checks = stopped.Checks[:3]
	stopped.Interrupted = true
	stopped.Total()
	writeDoc(t, dir, "stopped", stopped)
	t.Setenv(results.SigningKeyEnv, "")
	c, err := LoadCohort([]string{dir})
	require.NoError(t, err)
	require.Len(t, c.Docs, 2, "skipped: %v", c.Skipped)
	d := c.Docs[1]
	assert.Equal(t, results.StatusInterrupted, d.Status)
	assert.Empty(t, d.tasks, "no task score for a stopped run")
	assert.Len(t, d.checks, 3, "its finished checks are kept")
	for _, b := range cohortPage(c).Blocks {
		switch b.ID {
		case "scores":
			assert.Contains(t, b.Plot.Caption, "over 1 documents", "the interrupted run has no score to place")
		case "docs":
			require.Len(t, b.Table.Rows, 2)
			assert.Equal(t, "INTERRUPTED", b.Table.Rows[1][3].Text)
			assert.Contains(t, b.Table.Rows[1][4].Text, "–/")
		case "tasks":
			for _, row := range b.Table.Rows {
				assert.Equal(t, "1", row[1].Text, "only alice counts in %v", row)
			}
		}
	}
	files := writeTestCohort(t, c)
	rows, err := csv.NewReader(bytes.NewReader(files["checks.csv"])).ReadAll()
	require.NoError(t, err)
	status, score := slices.Index(rows[0], "doc_status"), slices.Index(rows[0], "doc_score")
	for _, r := range rows[1:] {
		if strings.Contains(r[0], "stopped") {
			assert.Equal(t, "interrupted", r[status])
			assert.Empty(t, r[score], "no score, not 0")
		} else {
			assert.NotEqual(t, "interrupted", r[status])
		}
	}
}
