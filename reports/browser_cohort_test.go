package reports

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/cohortgen"
)

// largeCohort is a cohort of n documents made in memory: the eight tasks'
// documents of internal/cohortgen, summarised once and repeated under n
// paths with their figures varied, so that the page has n rows and
// spreads to draw.
func largeCohort(n int) *Cohort {
	rng := rand.New(rand.NewPCG(1, 2))
	var base []CohortDoc
	for i := range len(cohortgen.Tasks) {
		base = append(base, newCohortDoc("", "", SigNotChecked, cohortgen.Document(i, rng)))
	}
	c := &Cohort{}
	for i := range n {
		d := base[i%len(base)]
		d.Path = fmt.Sprintf("submissions/learner%05d/results.json", i)
		d.SHA256 = fmt.Sprintf("%064x", i)
		d.runs = append([]cohortRun(nil), d.runs...)
		for k := range d.runs {
			d.runs[k].goodputRPS *= 0.9 + 0.2*rng.Float64()
			d.runs[k].p99MS *= 0.8 + 0.5*rng.Float64()
		}
		c.Docs = append(c.Docs, d)
	}
	return c
}

// The cohort page of 10,000 documents opens in the browser and draws every
// chart, with a row per document. How long it took is logged, not judged:
// docs/BENCHMARKS.md records it.
func TestBrowserLargeCohort(t *testing.T) {
	bctx := browser(t)
	const n = 10_000
	dir := t.TempDir()
	require.NoError(t, WriteCohort(dir, largeCohort(n)))
	start := time.Now()
	tab, v := open(t, bctx, filepath.Join(dir, "index.html"))
	ctx, cancel := context.WithTimeout(tab, 120*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.ratelab && Object.keys(ratelab.charts).length === document.querySelectorAll('.plot').length`))
	require.NoError(t, err, "the page's charts were never made")
	t.Logf("the cohort page of %d documents loaded and drew its charts in %s", n, time.Since(start).Round(time.Millisecond))
	states, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartState](inspectCharts))
	require.NoError(t, err)
	assert.NotEmpty(t, states)
	for _, c := range states {
		assert.Greater(t, c.Painted, 2000, "chart %s painted %d pixels; want a drawn chart", c.ID, c.Painted)
		assert.Positive(t, c.Series, "chart %s has series", c.ID)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#sec-docs tbody tr').length`))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rows, n, "a row per document")
	assert.Empty(t, v.problems, "JavaScript errors")
	assert.Empty(t, v.blocked, "requests that tried to leave file://")
}
