package reports

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

func TestMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, testDoc(t)))
	golden(t, "summary.golden.md", b.Bytes())
}

// A failing task's checks are open, and a failing check's message shows.
func TestMarkdownFailing(t *testing.T) {
	doc := testDoc(t)
	for i := range doc.Checks {
		if doc.Checks[i].Name == "shed 240/s: no client times out" {
			doc.Checks[i].Status, doc.Checks[i].Score = results.StatusFail, 0
			doc.Checks[i].Message = "211 requests timed out | want 0\nsee <the lesson> & *retry*"
		}
	}
	doc.Total()
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, doc))
	out := b.String()
	assert.Contains(t, out, "❌ FAIL, 66/67")
	assert.Contains(t, out, "<details open><summary><b>task2: say no early: load shedding and deadlines</b>: ❌ fail, 26/27</summary>")
	assert.Contains(t, out, `| ❌ | shed 240/s: no client times out | 0/1 | 211 requests timed out \| want 0 see &lt;the lesson&gt; &amp; \*retry\* (run shed 240/s) |`)
	assert.Contains(t, out, "<details><summary><b>task1")
}

// However large the document, the summary stays under GitHub's limit,
// its tables intact, and says what it left out.
func TestMarkdownHuge(t *testing.T) {
	doc := &results.Document{Schema: results.Schema, Task: "all", Impl: "exercises", Status: results.StatusFail}
	long := strings.Repeat("a very long message | with pipes\nand newlines ", 40) // about 2 KB
	for i := range 30000 {
		doc.Checks = append(doc.Checks, results.Check{
			Task: fmt.Sprintf("task%d", 1+i%7), Name: fmt.Sprintf("check %d %s", i, strings.Repeat("x", 300)),
			Status: results.StatusFail, MaxScore: 1, Message: long,
		})
	}
	for i := range 3000 {
		doc.Runs = append(doc.Runs, &results.Run{Name: fmt.Sprintf("flood %d", i), Reliable: i%2 == 0})
	}
	for range 1000 {
		doc.Notes = append(doc.Notes, long)
	}
	doc.Total()
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, doc))
	assert.Less(t, b.Len(), 1<<20, "GitHub's step summary limit")
	assert.LessOrEqual(t, b.Len(), MarkdownLimit)
	out := b.String()
	assert.Contains(t, out, "checks left out to stay under GitHub's 1 MiB summary limit")
	assert.Contains(t, out, "Messages left out")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| ") {
			assert.True(t, strings.HasSuffix(line, " |") || strings.HasSuffix(line, "|"), "a table row is whole: %.80q", line)
		}
	}

	// A document just over the limit keeps every check and shortens the
	// messages instead.
	mid := &results.Document{Schema: results.Schema, Task: "task1", Status: results.StatusPass}
	for i := range 3000 {
		mid.Checks = append(mid.Checks, results.Check{Task: "task1", Name: fmt.Sprint("check ", i), Status: results.StatusPass, Score: 1, MaxScore: 1, Message: strings.Repeat("m", 1000)})
	}
	b.Reset()
	require.NoError(t, Markdown(&b, mid))
	assert.LessOrEqual(t, b.Len(), MarkdownLimit)
	assert.Contains(t, b.String(), "| ✅ | check 2999 | 1/1 | mmm")
	assert.NotContains(t, b.String(), "left out")
}

func TestMarkdownNil(t *testing.T) {
	assert.Error(t, Markdown(&bytes.Buffer{}, nil))
}

// repeatDoc is task 2 of testdata/results.json graded three times, the
// second repeat a few successes short at 240/s: one check inconclusive.
func repeatDoc(t *testing.T) *results.Document {
	t.Helper()
	var docs []*results.Document
	for k := range 3 {
		d := testDoc(t)
		d.Task = "task2"
		var checks []results.Check
		for _, c := range d.Checks {
			if c.Task != "task2" {
				continue
			}
			if k == 1 && c.Name == "shed 240/s: successes pinned at capacity" {
				c.Status, c.Score = results.StatusFail, 0
				c.Measured = map[string]float64{"ok": 771}
				c.Message = "771 succeeded; want 780 to 840"
			} else if c.Measured["ok"] > 0 {
				c.Measured = map[string]float64{"ok": c.Measured["ok"] + float64(k)}
			}
			checks = append(checks, c)
		}
		d.Checks = checks
		var runs []*results.Run
		for _, r := range d.Runs {
			if strings.HasPrefix(r.Name, "shed ") || strings.HasPrefix(r.Name, "240/s, line 2000") {
				r.Task = "task2"
				runs = append(runs, r)
			}
		}
		d.Runs = runs
		d.Total()
		docs = append(docs, d)
	}
	doc, err := results.Combine(docs)
	require.NoError(t, err)
	return doc
}

func TestMarkdownRepeatGolden(t *testing.T) {
	doc := repeatDoc(t)
	require.Equal(t, results.StatusInconclusive, doc.Status)
	var b bytes.Buffer
	require.NoError(t, Markdown(&b, doc))
	out := b.String()
	assert.Contains(t, out, "🔀 INCONCLUSIVE, 25/27")
	assert.Contains(t, out, "> Graded 3 times (`--repeat 3`). 🔀 **1 inconclusive**")
	assert.Contains(t, out, "| 🔀 | shed 240/s: successes pinned at capacity | 0/2 | runs disagree: pass (ok 814), fail (ok 771), pass (ok 816). Repeat 2: 771 succeeded; want 780 to 840 (run shed 240/s (repeat 2)) |")
	assert.Contains(t, out, "| shed 240/s (repeat 3) |", "every repeat's floods are listed")
	golden(t, "summary-repeat.golden.md", b.Bytes())
}

// A practice run (grade --quick) says so in every form a learner reads,
// and a graded run does not.
func TestPracticeRunIsLabelled(t *testing.T) {
	for _, practice := range []bool{false, true} {
		doc := testDoc(t)
		doc.Practice = practice
		var md, text bytes.Buffer
		require.NoError(t, Markdown(&md, doc))
		require.NoError(t, Text(&text, doc))
		dir := t.TempDir()
		require.NoError(t, WriteHTML(dir, doc))
		index, err := os.ReadFile(filepath.Join(dir, "index.html"))
		require.NoError(t, err)
		for form, out := range map[string]string{"markdown": md.String(), "text": text.String(), "html": string(index)} {
			assert.Equal(t, practice, strings.Contains(strings.ToLower(out), "practice run"), "%s, practice %v", form, practice)
		}
	}
}
