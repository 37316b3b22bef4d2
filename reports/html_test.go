package reports

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
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
	doc, err := results.Decode(f)
	require.NoError(t, err)
	return doc
}

// testDocFile reads a document from testdata: task4.json (a real task 4
// run, its amplifier's server samples thinned to one every 500 ms),
// task5.json (a real task 5 run from before the judge recorded timelines,
// with timelines added: synthesized from each strategy's totals, wall time
// and the shapes the judge measures, such as sleep1's waves a second
// apart), task7.json (a real task 7 run, its scenarios' samples thinned
// likewise), or task8.json (a real task 8 run of the reference).
func testDocFile(t testing.TB, name string) *results.Document {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err)
	return doc
}

// assertOffline checks every page in dir: nothing may point off the
// machine (every src and href is relative), and no function marker of
// go-echarts is left in.
func assertOffline(t *testing.T, dir string) {
	t.Helper()
	attr := regexp.MustCompile(`(?i)\b(src|href)\s*=\s*"([^"]*)"`)
	pages, _ := filepath.Glob(filepath.Join(dir, "*.html"))
	require.NotEmpty(t, pages)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range attr.FindAllStringSubmatch(string(b), -1) {
			assert.NotRegexp(t, `^(?i)([a-z]+:|//)`, m[2], "%s: %s=%q must be a relative path", filepath.Base(p), m[1], m[2])
		}
		assert.NotContains(t, string(b), "go-echarts.github.io", "%s names the remote asset host", filepath.Base(p))
		assert.NotContains(t, string(b), "__f__", "%s: function markers left in", filepath.Base(p))
	}
}

func TestWriteHTMLFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteHTML(dir, testDoc(t)))
	for _, name := range []string{"index.html", "task1.html", "task2.html", "task3.html", "echarts.min.js", "echarts-LICENSE.txt", "echarts-NOTICE.txt", "echarts-LICENSE-d3.txt"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	assertOffline(t, dir)
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	for _, want := range []string{`href="task1.html"`, `href="task3.html"`, "fairness: the interactive client is served beside a backfill", "go1.26"} {
		assert.Contains(t, string(index), want)
	}
}

// Task 4's storms are not floods: its page draws them from the document's
// storms, on one time axis, with the amplifier's received rate.
func TestWriteHTMLStorms(t *testing.T) {
	doc := testDocFile(t, "task4.json")
	require.Empty(t, doc.Runs, "task 4 has storms, no floods")
	dir := t.TempDir()
	require.NoError(t, WriteHTML(dir, doc))
	assertOffline(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, "task4.html"))
	require.NoError(t, err)
	page := html.UnescapeString(string(b))
	assertContainsAll(t, "task4.html", page,
		`id="t4_sends"`, `id="t4_time"`, `id="t4_amplify"`,
		"Sends per 250 ms", "no jitter: 3448 attempts, last client done 31.7 s, 93% of bins empty",
		"(93% of the bins empty)", "ideal 5 s", "storm 400, no jitter, Retry-After honoured",
		"offered 100/s", "then 359/s in the second half (3.6× the offered 100/s)",
		"amplifier: a 10% budget keeps retries near the offered load", "comes closest, 1.6 s sooner than jitter alone with 3.1× fewer attempts",
	)
	assert.False(t, strings.Contains(page, "No floods"), "task 4's page draws its storms")
	for _, id := range []string{"t4_sends", "t4_time", "t4_amplify"} {
		assert.Equal(t, 1, strings.Count(page, "show("+strconvQuote(id)+", "), "%s is drawn once", id)
	}

	// Without storms the page says so instead of drawing empty charts.
	doc.Storms = nil
	files, err := renderHTML(doc)
	require.NoError(t, err)
	assertContainsAll(t, "task4.html", string(files["task4.html"]), "No floods")
	assert.False(t, strings.Contains(string(files["task4.html"]), `id="t4_sends"`), "no storms, no storm chart")
}

// writtenPage writes doc's report into a new folder, checks that it stays
// offline and returns the folder and page name's text, HTML entities
// decoded.
func writtenPage(t *testing.T, doc *results.Document, name string) (dir, page string) {
	t.Helper()
	dir = t.TempDir()
	require.NoError(t, WriteHTML(dir, doc))
	assertOffline(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return dir, html.UnescapeString(string(b))
}

// Task 7's page draws both scenarios: in flight, heap and dependency calls
// over time with the dead window shaded, the clients' outcomes and waits.
func TestWriteHTMLBreaker(t *testing.T) {
	doc := testDocFile(t, "task7.json")
	require.Len(t, doc.Scenarios, 2)
	_, page := writtenPage(t, doc, "task7.html")
	assertContainsAll(t, "task7.html", page,
		`id="t7_inflight"`, `id="t7_heap"`, `id="t7_dependency"`, `id="t7_outcomes"`, `id="t7_latency"`,
		"dependency dead", "Little's Law: 100/s arriving × 10 s waiting = 1,000 requests stuck without a breaker, and the service held 1000 at once; with the breaker it never held more than 25",
		"the heap reached 80 MB without a breaker, 6 MB with it", "1,000 calls into silence", "25 calls reached it while it was dead",
		"1000 failed after the service's 10 s wait without a breaker, 1039 failed fast with it", "it closed again 0.75 s after the dependency came back", "503 failed fast (circuit open)",
		"a failure took a median of 10.0 s", "Little's Law: 100/s × 10 s = 1,000",
	)
}

// Task 8's page draws the four limiters side by side from a real run's
// measurements: the boundary burst, the synchronised return, memory per
// client, the counter against the log, and the summary table.
func TestWriteHTMLCounting(t *testing.T) {
	doc := testDocFile(t, "task8.json")
	require.Len(t, doc.Counting, 1)
	dir, page := writtenPage(t, doc, "task8.html")
	assertContainsAll(t, "task8.html", page,
		`id="t8_boundary"`, `id="t8_return"`, `id="t8_memory"`, "How often the approximation is wrong", "Which one, when",
		"fixed window 200 (100 + 100)", "sliding log 100", "Fullest bin over the mean bin: fixed window",
		"At the largest limit: fixed window", "their definitions, same instants", "usual choice for per-client limits at scale")
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(index), `href="task8.html"`)
	assert.NotContains(t, page, "In front of the server", "a document without server floods has no table of them")

	// With the server floods (optional: older documents have none), a
	// table of the server's counts per limiter.
	doc.Counting[0].Server = []results.CountingServer{{
		Limiter: results.LimiterBucket, Run: "server, token bucket", Limit: 10, WindowMS: 2000, Burst: 2, RatePerClient: 20, DurationS: 10,
		Clients:    []results.CountingServerClient{{Key: "client-0", Admitted: 51, Limited: 149, SpanS: 9.8, Bound: 51}},
		Limited429: 596, MaxRetryAfterS: 1,
	}}
	_, page = writtenPage(t, doc, "task8.html")
	assertContainsAll(t, "task8.html", page, "In front of the server", "10 per 2000 ms, burst 2", "51 (51)", "1 × 20/s for 10 s")
	assert.NotContains(t, page, "averages hide spikes", "a document without the plays has no table of them")

	// With the lesson's token-bucket plays (optional too).
	doc.BucketPlays = []*results.BucketPlay{
		{Name: "steady", OfferedRPS: 6, DurationS: 10, BucketRate: 4, BucketBurst: 10, Sent: 60, Admitted: 49, Refused: 11, Predicted: 49, Bound: 49.33},
		{Name: "spikes", Pattern: &results.Pattern{Kind: "spikes", Spike: 30, EveryS: 6}, OfferedRPS: 5, DurationS: 12, BucketRate: 4, BucketBurst: 10,
			Sent: 60, Admitted: 20, Refused: 40, Predicted: 20, Bound: 34},
	}
	_, page = writtenPage(t, doc, "task8.html")
	assertContainsAll(t, "task8.html", page, "averages hide spikes", "30 at once every 6 s for 12 s (5/s on average)", "4/s, burst 10", "6/s for 10 s")
}

// Task 5's page draws the judge's strategies; task 6's the workers' counts.
func TestWriteHTMLJudgeAndWorkers(t *testing.T) {
	for name, wants := range map[string][]string{
		"task5": {`id="t5_outcome"`, `id="t5_time"`, `id="t5_timeline"`, `id="t5_requests"`, "naive lost 1,653 of 2,000 (83%)",
			"The polite client finishes all 2,000 in 1.01× the minimum of 15 s (bound by input tokens) with no 429s",
			"counted by the judge in bins of 250 ms", "naive levels off at 347 of 2,000; sleep1 is done at 24.2 s (minimum 15 s); polite is done at 15.2 s (minimum 15 s); polite-cached is done at 5.3 s (minimum 5 s).",
			"sleep1 averages 83 judgments/s where the limits allow 133/s",
			`"name":"minimum 15 s (input tokens)"`, `"name":"minimum 5 s (requests)"`, `"name":"naive · failed"`},
		"task6": {`id="t6_workers"`, `id="t6_timeline"`, "each worker's own bound = the shared bound: 720",
			"every worker admits its own ~720 (716 to 719), 2,870 in all: 4.0× the limit", "with one bucket in Redis the four share 719"},
	} {
		dir := t.TempDir()
		require.NoError(t, WriteHTML(dir, testDocFile(t, name+".json")))
		assertOffline(t, dir)
		b, err := os.ReadFile(filepath.Join(dir, name+".html"))
		require.NoError(t, err)
		assertContainsAll(t, name+".html", html.UnescapeString(string(b)), wants...)
	}
}

// A judge report with costs and the batch strategy gets a cost chart and a
// cost column; one from before prices (task5.json) gets neither.
func TestWriteHTMLJudgeCost(t *testing.T) {
	files, err := renderHTML(testDocFile(t, "task5.json"))
	require.NoError(t, err)
	old := html.UnescapeString(string(files["task5.html"]))
	assert.NotContains(t, old, `id="t5_cost"`, "no costs recorded, no cost chart")
	assert.NotContains(t, old, "<th>cost</th>")

	doc := testDocFile(t, "task5.json")
	rep := doc.Judge
	rep.Limits.Prices = results.APIPrices{InputUSDPerMTok: 3, OutputUSDPerMTok: 15, CacheWriteUSDPerMTok: 3.75, CacheReadUSDPerMTok: 0.3}
	for i := range rep.Strategies {
		rep.Strategies[i].CostUSD = 19.1127
	}
	rep.Strategies[3].CostUSD = 3.462705 // polite-cached
	batch := rep.Strategies[2]
	batch.Name, batch.WallSeconds, batch.MinSeconds, batch.MinBoundBy, batch.CostUSD, batch.Timeline = "batch", 21.9, 20, "batch_requests", 9.55635, nil
	rep.Strategies = append(rep.Strategies, batch)
	files, err = renderHTML(doc)
	require.NoError(t, err)
	page := html.UnescapeString(string(files["task5.html"]))
	assertContainsAll(t, "task5.html with costs", page, `id="t5_cost"`, "What the job cost", "<th>cost</th>", "$9.56", "$19.11",
		"batch judged 2,000 of 2,000 in 21.9 s (minimum 20 s, its batch throughput) for $9.56, 50% of what polite paid for 2,000 in 15.2 s",
		"$3.00 input, $15.00 output, $3.75 cache writes, $0.30 cache reads; batched tokens at 50% of those", "No timeline for batch.",
		"Caching the shared instructions cost less still (polite-cached $3.46)")
}

// The judge's table has a column for the time to all but the last 2% of
// each job when the report records it (a strategy without it shows a
// dash), and none in a report from before it was recorded.
func TestWriteHTMLJudgeMostDone(t *testing.T) {
	files, err := renderHTML(testDocFile(t, "task5.json"))
	require.NoError(t, err)
	assert.NotContains(t, html.UnescapeString(string(files["task5.html"])), "98% done", "not recorded, no column")

	doc := testDocFile(t, "task5.json")
	for i := range doc.Judge.Strategies {
		if doc.Judge.Strategies[i].Name == "polite-cached" {
			doc.Judge.Strategies[i].MostSeconds = 5.123
		}
	}
	files, err = renderHTML(doc)
	require.NoError(t, err)
	assertContainsAll(t, "task5.html", html.UnescapeString(string(files["task5.html"])), "<th>98% done</th>", "5.12 s", ">–<")
}

// Task 5's chart of judgments over time draws the cumulative sums of the
// judge's timeline, ends at the wall time, and is left out, with a note, for
// a judge report from before timelines were recorded.
func TestWriteHTMLJudgeTimeline(t *testing.T) {
	doc := testDocFile(t, "task5.json")
	rep := doc.Judge
	require.NotNil(t, rep)
	b := judgeTimelineBlock("t5_timeline", rep.Strategies)
	require.NotNil(t, b.Plot)
	opt := string(b.Plot.Option)
	// polite: 17 in the first 250 ms, 2,000 at its wall time of 15.158 s.
	assertContainsAll(t, "the option", opt, `"name":"polite","type":"line"`, `{"value":[0,0]},{"value":[0.25,17]},{"value":[0.5,51]}`, `{"value":[15.16,2000]}]`, `"name":"judgments done (cumulative)"`,
		`"name":"time since the strategy's first request (s)"`, `"max":2000`)

	for _, st := range rep.Strategies {
		require.NotNil(t, st.Timeline, st.Name)
		data, sum, _ := cumulative(st.Timeline.OK, st.Timeline.BinMS/1000, st.WallSeconds)
		assert.Equal(t, st.Client.OK, int(sum), "%s: the timeline holds every call that returned a message", st.Name)
		assert.Len(t, data, len(st.Timeline.OK)+1)
	}

	// A strategy without a timeline (one that could not start) is named.
	some := slices.Clone(rep.Strategies)
	some[2].Timeline = nil
	b = judgeTimelineBlock("t5_timeline", some)
	require.NotNil(t, b.Plot)
	assert.Contains(t, b.Text, "No timeline for polite.")
	assert.NotContains(t, string(b.Plot.Option), `"name":"polite","type":"line"`)

	for i := range rep.Strategies {
		rep.Strategies[i].Timeline = nil
	}
	files, err := renderHTML(doc)
	require.NoError(t, err)
	page := html.UnescapeString(string(files["task5.html"]))
	assertContainsAll(t, "task5.html without timelines", page, `id="t5_outcome"`, `id="t5_time"`, `id="t5_requests"`,
		"Judgments done over time", "This report holds no timeline of the judgments")
	assert.NotContains(t, page, `id="t5_timeline"`, "no timeline, no chart")
}

// assertContainsAll checks that page holds every string, naming only the
// missing ones (a page is too long to print).
func assertContainsAll(t *testing.T, name, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		assert.True(t, strings.Contains(page, w), "%s does not contain %q", name, w)
	}
}

func strconvQuote(s string) string { return `"` + s + `"` }

// The same document gives the same bytes: chart ids are fixed and the
// model's lines do not depend on scheduling.
func TestWriteHTMLDeterministic(t *testing.T) {
	for _, doc := range []*results.Document{testDoc(t), testDocFile(t, "task4.json"), testDocFile(t, "task5.json"), testDocFile(t, "task6.json"), testDocFile(t, "task7.json"), testDocFile(t, "task8.json")} {
		a, err := renderHTML(doc)
		require.NoError(t, err)
		b, err := renderHTML(doc)
		require.NoError(t, err)
		for name := range a {
			assert.Equal(t, string(a[name]), string(b[name]), name)
		}
	}
}

func TestWriteHTMLRefuses(t *testing.T) {
	assert.ErrorContains(t, WriteHTML(t.TempDir(), nil), "no document")
	assert.ErrorContains(t, WriteHTML(t.TempDir(), &results.Document{Schema: "ratelab.results/v0"}), `schema "ratelab.results/v0"`)
}

// A task's runs get its page even when no check names them, and
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
	assert.Contains(t, files, "task3.html", "the fairness runs are on the page of the task that ran them")
	assert.NotContains(t, files, "task1.html")
	index := string(files["index.html"])
	assert.Contains(t, index, "task9")
	assert.Contains(t, index, "no page for this task yet")
	assert.NotContains(t, index, "<script>alert(1)", "messages are escaped")
}

func TestScriptSafe(t *testing.T) {
	assert.Equal(t, `{"name":"<\/script><\!--"}`, scriptSafe(`{"name":"</script><!--"}`))
}

func TestDescribeServer(t *testing.T) {
	server := func(change func(*fakegpu.Config)) *results.Server {
		c := fakegpu.DefaultConfig()
		change(&c)
		r := c.Record()
		return &r
	}
	workers := server(func(c *fakegpu.Config) { c.Mode, c.Redis = fakegpu.ModeRedis, "redis://127.0.0.1:6379" })
	workers.Workers = 4
	for _, tc := range []struct {
		server *results.Server
		want   string
	}{
		{nil, ""},
		{server(func(c *fakegpu.Config) {}), "unprotected"},
		{server(func(c *fakegpu.Config) { c.Mode = fakegpu.ModeShed }), "line 16, deadline 800ms"},
		{server(func(c *fakegpu.Config) { c.Mode, c.MaxWaiting, c.Deadline = fakegpu.ModeShed, 2000, 0 }), "line 2000, no deadline"},
		{server(func(c *fakegpu.Config) { c.Mode, c.SpreadRetryAfter = fakegpu.ModeShed, true }), "line 16, deadline 800ms, Retry-After spread"},
		{server(func(c *fakegpu.Config) { c.Mode, c.BucketRate, c.BucketBurst = fakegpu.ModeBucket, 35, 5 }), "bucket 35/s burst 5, line 16, deadline 800ms"},
		{workers, "4 workers, Redis bucket 70/s burst 20, line 16, deadline 800ms"},
		// Task 8's limiters in front of shedding.
		{server(func(c *fakegpu.Config) {
			c.Mode, c.Counting, c.CountingLimit, c.CountingWindow = fakegpu.ModeBucket, "log", 10, 2*time.Second
		}), "sliding log 10 per 2s, line 16, deadline 800ms"},
		{server(func(c *fakegpu.Config) {
			c.Mode, c.Counting, c.CountingLimit, c.CountingWindow, c.BucketRate, c.BucketBurst = fakegpu.ModeBucket, "bucket", 40, 10*time.Second, 4, 10
		}), "token bucket 40 per 10s burst 10, line 16, deadline 800ms"},
		// An old document's server is its description, as it came.
		{&results.Server{Description: "--mode shed --max-waiting 2000"}, "--mode shed --max-waiting 2000"},
	} {
		assert.Equal(t, tc.want, describeServer(tc.server), "describeServer(%+v)", tc.server)
	}
}

func TestEmbeddedEcharts(t *testing.T) {
	files, err := assetContents()
	require.NoError(t, err)
	js := string(files[echartsFile])
	assert.Contains(t, js, `version="`+EchartsVersion+`"`)
	assert.Len(t, js, 1034102, "assets/README.md records the size and hash of the file")
}

// A document from before runs recorded their task and their server's
// settings still renders: its runs are listed on the index with the
// description it gave their server, and on no task page.
func TestWriteHTMLOldDocument(t *testing.T) {
	old := `{"schema":"ratelab.results/v1","task":"all","impl":"solutions","status":"pass","score":1,"max_score":1,
		"checks":[{"task":"task2","name":"shed 240/s: no client times out","status":"pass","score":1,"max_score":1,"message":"0 timed out","run":"shed 240/s"}],
		"runs":[{"name":"shed 240/s","offered_rps":240,"duration_s":10,"timeout_s":1,"expected":2400,"issued":2400,"counts":{"200":816,"503":1584},"ok":816,
			"goodput_rps":81.6,"reliable":true,"server":"--mode shed --max-waiting 2000","server_after_flood":{},"server_final":{},"drained_s":0.1}],
		"env":{"go_version":"go1.26"}}`
	doc, err := results.Decode(strings.NewReader(old))
	require.NoError(t, err)
	files, err := renderHTML(doc)
	require.NoError(t, err)
	index := html.UnescapeString(string(files["index.html"]))
	assertContainsAll(t, "index.html", index, "shed 240/s", "--mode shed --max-waiting 2000")
	assertContainsAll(t, "task2.html", html.UnescapeString(string(files["task2.html"])), "No floods", "shed 240/s: no client times out")
}

// Task 3's bound is the bucket each run recorded, not the lesson's default.
func TestWriteHTMLBucketBound(t *testing.T) {
	doc := testDoc(t)
	for _, r := range doc.Runs {
		if r.Task == "task3" {
			require.True(t, r.Server.Known(), r.Name)
			r.Server.BucketRatePerS, r.Server.BucketBurst = 35, 10
		}
	}
	files, err := renderHTML(doc)
	require.NoError(t, err)
	page := html.UnescapeString(string(files["task3.html"]))
	assertContainsAll(t, "task3.html", page, `"name":"bound b + r·t = 10 + 35·t"`, "against at most 10 + 35 × 10 = 360 in 10 s",
		"the burst of 10 is spent", "is refused 170/s (offered − 35)")
	assert.NotContains(t, page, "20 + 70·t")
}

// The pages are listed once each, in task order.
func TestTaskPages(t *testing.T) {
	var ids []string
	for _, p := range taskPages {
		ids = append(ids, p.ID)
		assert.Same(t, p, pageFor(p.ID), "pageFor(%q)", p.ID)
		assert.NotNil(t, p.Build, "%s has no Build", p.ID)
	}
	assert.Equal(t, []string{"task1", "task2", "task3", "task4", "task5", "task6", "task7", "task8"}, ids)
	assert.Nil(t, pageFor("task9"), `pageFor("task9")`)
}
