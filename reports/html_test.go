package reports

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// testDoc reads testdata/results.json: the floods of real task 1, 2 and 3
// runs merged into one "all" document, with their /stats samples thinned to
// one a second to keep it small.
func testDoc(t testing.TB) *results.Document {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "results.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := ReadDocument(f)
	require.NoError(t, err)
	return doc
}

func TestWriteHTMLFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteHTML(dir, testDoc(t)))
	for _, name := range []string{"index.html", "task1.html", "task2.html", "task3.html", "echarts.min.js", "echarts-LICENSE.txt", "echarts-NOTICE.txt", "echarts-LICENSE-d3.txt"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	// Nothing may point off the machine: every src and href is relative.
	attr := regexp.MustCompile(`(?i)\b(src|href)\s*=\s*"([^"]*)"`)
	pages, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range attr.FindAllStringSubmatch(string(b), -1) {
			assert.NotRegexp(t, `^(?i)([a-z]+:|//)`, m[2], "%s: %s=%q must be a relative path", filepath.Base(p), m[1], m[2])
		}
		assert.NotContains(t, string(b), "go-echarts.github.io", "%s names the remote asset host", filepath.Base(p))
		assert.NotContains(t, string(b), "__f__", "%s: function markers left in", filepath.Base(p))
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	for _, want := range []string{`href="task1.html"`, `href="task3.html"`, "fairness: the interactive client is served beside a backfill", "go1.26"} {
		assert.Contains(t, string(index), want)
	}
}

// The same document gives the same bytes: chart ids are fixed and the
// model's lines do not depend on scheduling.
func TestWriteHTMLDeterministic(t *testing.T) {
	doc := testDoc(t)
	a, err := renderHTML(doc)
	require.NoError(t, err)
	b, err := renderHTML(doc)
	require.NoError(t, err)
	for name := range a {
		assert.Equal(t, string(a[name]), string(b[name]), name)
	}
}

func TestWriteHTMLRefuses(t *testing.T) {
	assert.ErrorContains(t, WriteHTML(t.TempDir(), nil), "no document")
	assert.ErrorContains(t, WriteHTML(t.TempDir(), &results.Document{Schema: "ratelab.results/v0"}), `schema "ratelab.results/v0"`)
}

// A single task's document gets its page even for runs no check names, and
// a task without a page still gets its checks on the index.
func TestWriteHTMLPartial(t *testing.T) {
	doc := testDoc(t)
	var runs []*results.Run
	for _, r := range doc.Runs {
		if strings.HasPrefix(r.Name, "backfill") || strings.HasPrefix(r.Name, "interactive") {
			runs = append(runs, r)
		}
	}
	doc.Runs = runs
	doc.Checks = append(doc.Checks[:0:0], results.Check{Task: "task9", Name: "something new", Status: results.StatusFail, MaxScore: 1, Message: "<script>alert(1)</script>"})
	doc.Task = "all"
	files, err := renderHTML(doc)
	require.NoError(t, err)
	assert.Contains(t, files, "task3.html", "the fairness runs belong to task 3 by their server's mode")
	assert.NotContains(t, files, "task1.html")
	index := string(files["index.html"])
	assert.Contains(t, index, "task9")
	assert.Contains(t, index, "no page for this task yet")
	assert.NotContains(t, index, "<script>alert(1)", "messages are escaped")
}

func TestScriptSafe(t *testing.T) {
	assert.Equal(t, `{"name":"<\/script><\!--"}`, scriptSafe(`{"name":"</script><!--"}`))
}

func TestServerConfig(t *testing.T) {
	cfg := serverConfig("--mode shed --max-waiting 2000 --deadline 0")
	assert.Equal(t, "shed", string(cfg.Mode))
	assert.Equal(t, 2000, cfg.MaxWaiting)
	assert.Zero(t, cfg.Deadline)
	assert.Equal(t, "none", string(serverConfig("none, 8 slots x 100ms").Mode))
	assert.Equal(t, "bucket", string(serverConfig("--mode bucket").Mode))
	assert.Equal(t, "line 2000, no deadline", describeServer(cfg))
}

func TestEmbeddedEcharts(t *testing.T) {
	files, err := assetContents()
	require.NoError(t, err)
	js := string(files[echartsFile])
	assert.Contains(t, js, `version="`+EchartsVersion+`"`)
	assert.Len(t, js, 1034102, "assets/README.md records the size and hash of the file")
}
