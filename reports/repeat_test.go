package reports

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

func TestTextInconclusive(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Text(&b, repeatDoc(t)))
	out := b.String()
	assert.Contains(t, out, "  INCONCLUSIVE  0/2  shed 240/s: successes pinned at capacity\n                     runs disagree: pass (ok 814), fail (ok 771), pass (ok 816)")
	assert.Contains(t, out, "  PASS          2/2  shed 480/s: successes pinned at capacity\n")
	assert.Contains(t, out, "task2 graded 3 times: 1 check(s) disagreed")
	assert.Contains(t, out, "task2 solutions: INCONCLUSIVE, score 25/27")

	// Without an inconclusive check the columns stay as they were.
	b.Reset()
	require.NoError(t, Text(&b, testDoc(t)))
	assert.Contains(t, b.String(), "  PASS   1/1  80/s: every request succeeds\n              800 of 800")
}

func TestHTMLInconclusive(t *testing.T) {
	files, err := renderHTML(repeatDoc(t))
	require.NoError(t, err)
	index := html.UnescapeString(string(files["index.html"]))
	assertContainsAll(t, "index.html", index,
		`<span class="badge inconclusive">inconclusive</span>`, `<span class="badge inconclusive">INCONCLUSIVE</span>`,
		"repeats 3", "Each task was graded 3 times and 1 check(s) disagreed across the repeats",
		"shed 240/s (repeat 3)", ".inconclusive {")
	assert.Contains(t, string(files["task2.html"]), "INCONCLUSIVE")
}

// Repeated storms and scenarios (kept under their repeat's name) draw as
// more lines, and the pages still render.
func TestHTMLRepeatedStormsAndScenarios(t *testing.T) {
	for _, name := range []string{"task4", "task7"} {
		a, b := testDocFile(t, name+".json"), testDocFile(t, name+".json")
		doc, err := results.Combine([]*results.Document{a, b})
		require.NoError(t, err)
		dir := t.TempDir()
		require.NoError(t, WriteHTML(dir, doc), name)
		assertOffline(t, dir)
		page, err := os.ReadFile(filepath.Join(dir, name+".html"))
		require.NoError(t, err)
		assert.Contains(t, html.UnescapeString(string(page)), "(repeat 2)", "%s.html draws the second repeat", name)
	}
}

// In a cohort an inconclusive check is counted as such, never as a pass.
func TestCohortInconclusive(t *testing.T) {
	c := &Cohort{Docs: []CohortDoc{newCohortDoc("a", "", SigNotChecked, testDoc(t)), newCohortDoc("b", "", SigNotChecked, repeatDoc(t))}}
	blocks := checkBlocks(c)
	require.Len(t, blocks, 1)
	tab := blocks[0].Table
	require.Contains(t, tab.Head, "inconclusive")
	col := 0
	for i, h := range tab.Head {
		if h == "inconclusive" {
			col = i
		}
	}
	var found bool
	for _, row := range tab.Rows {
		if row[0].Text == "task2" && row[1].Text == "shed 240/s: successes pinned at capacity" {
			found = true
			assert.Equal(t, "1", row[2].Text, "passes")
			assert.Equal(t, "1", row[col].Text, "inconclusive")
			assert.Equal(t, "50%", row[len(row)-1].Text, "pass rate")
		}
	}
	assert.True(t, found)
	assert.True(t, strings.Contains(blocks[0].Text, "never counted as a pass"))

	score := scoreBlocks(c)[1].Table
	for _, row := range score.Rows {
		if strings.HasPrefix(row[0].Text, "task2") {
			assert.Equal(t, "1 of 2", row[len(row)-1].Text, "an inconclusive task did not pass every check")
		}
	}
}
