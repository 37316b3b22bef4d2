package reports

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The browser test opens every page of a report in a real, headless
// Chromium, from file://, with the network blocked: every request whose URL
// does not start with file:// is failed before it leaves. It asserts that
// every chart drew (a canvas with painted pixels and an ECharts instance
// with series), that no JavaScript error or exception happened, that no
// request left file://, and that the model's sliders move its lines.
//
// It needs Chromium (apt-get install chromium), or RATELAB_CHROME naming a
// Chrome binary; without one it skips, as it does with -short.
// RATELAB_SCREENSHOTS=DIR saves a full-page PNG of each page there, and one
// of each chart's section, for looking at.

// chromeNames are the binaries the test looks for on PATH.
var chromeNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

func findChrome(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the browser test starts Chromium: skipped with -short")
	}
	if p := os.Getenv("RATELAB_CHROME"); p != "" {
		return p
	}
	for _, name := range chromeNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skipf("no Chromium found: none of %s is on PATH and RATELAB_CHROME is unset; install it with 'apt-get install -y chromium' to run the browser test", strings.Join(chromeNames, ", "))
	return ""
}

// browser starts one headless Chromium for the test and returns its
// context; tabs are contexts made from it.
func browser(t *testing.T) context.Context {
	t.Helper()
	chrome := findChrome(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "start %s", chrome)
	return ctx
}

// visit is what one page did in the browser.
type visit struct {
	requests []string // every URL the page asked for
	blocked  []string // the ones that were not file:// and were failed
	problems []string // exceptions, console errors, error log entries
}

// open loads the file at path in a new tab of the browser, with every
// request that does not start with file:// failed, and returns the tab and
// what happened. The tab closes with the test.
func open(t *testing.T, bctx context.Context, path string) (context.Context, *visit) {
	t.Helper()
	tab, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	v := &visit{}
	var mu sync.Mutex
	record := func(list *[]string, s string) {
		mu.Lock()
		*list = append(*list, s)
		mu.Unlock()
	}
	require.NoError(t, chromedp.Listen(tab, func(ev any) {
		switch e := ev.(type) {
		case *fetch.EventRequestPaused:
			// Commands may not be sent from inside a listener.
			go func() {
				if strings.HasPrefix(e.Request.URL, "file://") {
					chromedp.Call(tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
					return
				}
				record(&v.blocked, e.Request.URL)
				chromedp.Call(tab, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
			}()
		case *network.EventRequestWillBeSent:
			record(&v.requests, e.Request.URL)
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += ": " + d.Exception.Description
			}
			record(&v.problems, fmt.Sprintf("exception at %d:%d: %s", d.LineNumber, d.ColumnNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				record(&v.problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				record(&v.problems, fmt.Sprintf("log error (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	}))
	_, err := chromedp.Call(tab, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}})
	require.NoError(t, err)
	_, err = chromedp.Call(tab, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	_, err = chromedp.Call(tab, runtime.Enable, cdp.Empty{})
	require.NoError(t, err)
	_, err = chromedp.Call(tab, cdplog.Enable, cdp.Empty{})
	require.NoError(t, err)

	ctx, cancelNav := context.WithTimeout(tab, 60*time.Second)
	defer cancelNav()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+path)), "open %s", path)
	return tab, v
}

// chartState is what the page says about one chart.
type chartState struct {
	ID      string `json:"id"`
	Canvas  bool   `json:"canvas"`
	Width   int    `json:"width"`
	Height  int    `json:"height"`
	Painted int    `json:"painted"` // pixels that are not transparent
	Series  int    `json:"series"`
}

// inspectCharts waits until the page's script has made its charts, then
// measures every .plot element.
const inspectCharts = `(() => {
  return Array.from(document.querySelectorAll('.plot')).map(el => {
    const c = el.querySelector('canvas');
    const inst = window.echarts && echarts.getInstanceByDom(el);
    let painted = 0;
    if (c && c.width > 0 && c.height > 0) {
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) painted++;
    }
    return { id: el.id, canvas: !!c, width: c ? c.width : 0, height: c ? c.height : 0,
             painted: painted, series: inst ? (inst.getOption().series || []).length : 0 };
  });
})()`

// moveSliders drags each model's sliders to their last choice and reports,
// per chart, whether the model's lines changed.
const moveSliders = `(() => {
  const out = {};
  if (!window.ratelab) return out;
  Object.keys(ratelab.models || {}).forEach(id => {
    const chart = ratelab.charts[id];
    const lines = () => JSON.stringify(chart.getOption().series.filter(s => String(s.id).indexOf('model-') === 0).map(s => s.data));
    const before = lines();
    ['-d', '-t'].forEach(suffix => {
      const input = document.getElementById(id + suffix);
      input.value = input.max;
      input.dispatchEvent(new Event('input'));
    });
    out[id] = { changed: lines() !== before, label: document.getElementById(id + '-d-v').textContent };
  });
  return out;
})()`

func TestBrowserReport(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	require.NoError(t, WriteHTML(dir, testDoc(t)))
	pages, err := filepath.Glob(filepath.Join(dir, "*.html"))
	require.NoError(t, err)
	require.Len(t, pages, 4, "index.html and one page per task")
	// Task 4 (storms, no floods), task 5 (the judge), task 6 (workers), task 7 (the breaker's scenarios) and
	// task 8 (the four limiters) come from documents of their own.
	for _, name := range []string{"task4", "task5", "task6", "task7", "task8"} {
		d := t.TempDir()
		require.NoError(t, WriteHTML(d, testDocFile(t, name+".json")))
		pages = append(pages, filepath.Join(d, name+".html"))
	}
	cohort := t.TempDir()
	require.NoError(t, WriteCohort(cohort, loadTestCohort(t)))
	pages = append(pages, filepath.Join(cohort, "index.html"))
	shots := os.Getenv("RATELAB_SCREENSHOTS")
	wantCharts := map[string]int{"task4.html": 3, "task5.html": 4, "task6.html": 2, "task7.html": 5, "task8.html": 3}

	for _, path := range pages {
		name := filepath.Base(path)
		if filepath.Dir(path) == cohort {
			name = "cohort.html"
		}
		t.Run(name, func(t *testing.T) {
			dir := filepath.Dir(path)
			tab, v := open(t, bctx, path)
			ctx, cancel := context.WithTimeout(tab, 60*time.Second)
			defer cancel()
			// The charts are drawn by the page's last script; wait for it.
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('.plot').length === 0 || (window.ratelab && Object.keys(ratelab.charts).length === document.querySelectorAll('.plot').length)`))
			require.NoError(t, err, "the page's charts were never made")
			states, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartState](inspectCharts))
			require.NoError(t, err)
			if name != "index.html" {
				assert.NotEmpty(t, states, "%s has charts", name)
			}
			if n, ok := wantCharts[name]; ok {
				assert.Len(t, states, n, "%s draws all its charts", name)
			}
			for _, c := range states {
				assert.True(t, c.Canvas, "%s: chart %s has a canvas", name, c.ID)
				assert.Positive(t, c.Width*c.Height, "%s: chart %s has a size", name, c.ID)
				assert.Greater(t, c.Painted, 2000, "%s: chart %s painted %d pixels; want a drawn chart", name, c.ID, c.Painted)
				assert.Positive(t, c.Series, "%s: chart %s has series", name, c.ID)
			}
			if shots != "" {
				png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(shots, strings.TrimSuffix(name, ".html")+".png"), png, 0o644))
				for _, c := range states {
					png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("section:has(#"+c.ID+")")))
					require.NoError(t, err)
					require.NoError(t, os.WriteFile(filepath.Join(shots, c.ID+".png"), png, 0o644))
				}
			}
			moved, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]struct {
				Changed bool   `json:"changed"`
				Label   string `json:"label"`
			}](moveSliders))
			require.NoError(t, err)
			for id, m := range moved {
				assert.True(t, m.Changed, "%s: moving %s's sliders changes the model's lines", name, id)
				assert.Equal(t, "1 min", m.Label, "%s: %s's duration label follows its slider", name, id)
			}
			if strings.HasPrefix(name, "task1") || strings.HasPrefix(name, "task2") {
				assert.Len(t, moved, 1, "%s has one goodput chart with sliders", name)
			}
			// Let late events (a failed request, an error after a
			// timeout) arrive before judging.
			time.Sleep(200 * time.Millisecond)
			assert.Empty(t, v.problems, "%s: JavaScript errors", name)
			assert.Empty(t, v.blocked, "%s: requests that tried to leave file://", name)
			for _, u := range v.requests {
				assert.True(t, strings.HasPrefix(u, "file://"), "%s requested %s", name, u)
			}
			if len(states) > 0 {
				assert.Contains(t, v.requests, "file://"+filepath.Join(dir, echartsFile), "%s loads echarts.min.js from beside itself", name)
			}
		})
	}
}

// The checks above must be able to fail: a page that reaches for the
// network and throws is caught, and its request never leaves.
func TestBrowserCatchesLeaks(t *testing.T) {
	bctx := browser(t)
	path := filepath.Join(t.TempDir(), "leak.html")
	require.NoError(t, os.WriteFile(path, []byte(`<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="https://go-echarts.github.io/go-echarts-assets/assets/echarts.min.js"></script></head>
<body><img src="http://198.51.100.7/x.png"><script>echarts.init(document.body);</script></body></html>`), 0o644))
	_, v := open(t, bctx, path)
	time.Sleep(500 * time.Millisecond)
	assert.Contains(t, v.blocked, "https://go-echarts.github.io/go-echarts-assets/assets/echarts.min.js")
	assert.Contains(t, v.blocked, "http://198.51.100.7/x.png")
	found := false
	for _, p := range v.problems {
		found = found || strings.Contains(p, "echarts is not defined")
	}
	assert.True(t, found, "the ReferenceError is reported; got %q", v.problems)
}
