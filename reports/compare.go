package reports

// The page of grade compare: two sides' floods drawn on the same charts,
// and the comparison's figures as tables.

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/compare"
	"ratelab/results"
)

// sideLabel names the two sides on charts.
var sideLabel = [2]string{"A", "B"}

// sideDash is how each side's lines are drawn: A solid, B dashed.
var sideDash = [2]string{"solid", "dashed"}

// WriteComparison writes the page of comparison c to file, with the
// charting library and its licence beside it (as WriteHTML does): the
// two sides' floods on the same charts (goodput against offered load for
// every run, and the first run of each side's latency percentiles and
// queue depth over time, A solid and B dashed), the checks whose verdicts
// changed, and every figure with its delta. a and b are the documents c
// was computed from.
func WriteComparison(file string, c *compare.Comparison, a, b []*results.Document) error {
	if c == nil || len(a) == 0 || len(b) == 0 {
		return errors.New("reports: comparison: no documents")
	}
	files, err := assetContents()
	if err != nil {
		return err
	}
	page, err := renderPage(comparisonPage(filepath.Base(file), c, [2][]*results.Document{a, b}))
	if err != nil {
		return fmt.Errorf("reports: comparison page: %w", err)
	}
	if err := writeFiles(filepath.Dir(file), files); err != nil {
		return err
	}
	return writeFileAtomic(file, page)
}

func comparisonPage(name string, c *compare.Comparison, docs [2][]*results.Document) pageData {
	p := pageData{
		File:    name,
		Title:   fmt.Sprintf("ratelab compare %s: %s and %s", c.Task, c.A.Path, c.B.Path),
		Heading: fmt.Sprintf("ratelab · compare · %s · %s", c.Task, c.Impl),
		Lead:    "Two gradings of one task side by side: A is the first given, B the second; every delta is B minus A. The charts draw both sides' floods on the same axes.",
		Facts:   []fact{{"A", sideFact(c.A)}, {"B", sideFact(c.B)}},
		Notes:   c.Notes,
		Footer:  footer(docs[0][0]),
	}
	for i, s := range []compare.Side{c.A, c.B} {
		if s.Interrupted > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: %d of its %d document(s) were interrupted (SIGINT or SIGTERM): they have no score and are not failures; what they finished is compared as it is.", sideLabel[i], s.Interrupted, len(s.Files)))
		}
	}
	if b, ok := compareGoodputBlock(docs); ok {
		p.Blocks = append(p.Blocks, b)
	}
	firsts := [2][]*results.Run{docs[0][0].Runs, docs[1][0].Runs}
	if b, ok := compareLatencyBlock(firsts); ok {
		p.Blocks = append(p.Blocks, b)
	}
	if b, ok := compareQueueBlock(firsts); ok {
		p.Blocks = append(p.Blocks, b)
	}
	p.Blocks = append(p.Blocks, compareChecksBlock(c), compareFiguresBlock(c))
	return p
}

func sideFact(s compare.Side) string {
	return fmt.Sprintf("%s (%d document(s), %s time)", s.Path, len(s.Files), s.Clock)
}

// compareGoodputBlock draws every run of both sides: goodput against
// offered load.
func compareGoodputBlock(docs [2][]*results.Document) (block, bool) {
	sc := charts.NewScatter()
	xmax, ymax := 100.0, 100.0
	n := 0
	for i, ds := range docs {
		var pts []opts.ScatterData
		for _, d := range ds {
			for _, r := range d.Runs {
				if r == nil || r.Interrupted {
					continue
				}
				pts = append(pts, opts.ScatterData{Name: r.Name, Value: []float64{num(r.OfferedRPS), num(r.GoodputRPS)}})
				xmax, ymax = math.Max(xmax, r.OfferedRPS), math.Max(ymax, r.GoodputRPS)
			}
		}
		n += len(pts)
		symbol := "circle"
		if i == 1 {
			symbol = "diamond"
		}
		sc.AddSeries(sideLabel[i], pts,
			charts.WithScatterChartOpts(opts.ScatterChart{Symbol: symbol, SymbolSize: 12}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: runColor(i), BorderColor: "#ffffff", BorderWidth: 1, Opacity: opts.Float(0.8)}))
	}
	if n == 0 {
		return block{}, false
	}
	sc.SetGlobalOptions(common("cmp_goodput",
		axis{Name: "offered load (requests/s)", Min: 0, Max: niceCeil(xmax * 1.1)},
		axis{Name: "goodput (successes/s)", Min: 0, Max: niceCeil(ymax * 1.1)}, "item")...)
	p := newPlot("cmp_goodput", 420, "Where B's marks leave A's, the change moved the flood's successes; repeats of one side spread around the same point on the wall clock and sit on it in virtual time.", sc, func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "item", "formatter": opts.FuncOpts(
			`function (p) { var v = p.value; return p.seriesName + ' · ' + p.name + '<br>' + v[0] + ' offered/s → ' + v[1] + ' successes/s'; }`)}
	})
	return block{ID: "cmp_goodput", Heading: "Goodput against offered load", Text: "Every flood of every run on both sides.", Plot: &p}, true
}

// pairedRuns lists the floods both sides' first documents hold by name,
// in A's order, then those only one holds.
func pairedRuns(runs [2][]*results.Run) (names []string, by [2]map[string]*results.Run) {
	for i := range runs {
		by[i] = map[string]*results.Run{}
		for _, r := range runs[i] {
			if r != nil && !r.Interrupted {
				if _, dup := by[i][r.Name]; !dup {
					by[i][r.Name] = r
					if i == 0 || by[0][r.Name] == nil {
						names = append(names, r.Name)
					}
				}
			}
		}
	}
	return names, by
}

// compareLatencyBlock draws the success latency percentiles of each flood,
// A solid and B dashed in the flood's colour.
func compareLatencyBlock(runs [2][]*results.Run) (block, bool) {
	names, by := pairedRuns(runs)
	line := charts.NewLine()
	maxX, series := 10.0, 0
	for j, name := range names {
		for i := range by {
			r := by[i][name]
			if r == nil {
				continue
			}
			h, err := r.Histogram(results.OutcomeOK)
			if err != nil || h.TotalCount() == 0 {
				continue
			}
			data, x := percentileSeries(h)
			maxX = math.Max(maxX, x)
			line.AddSeries(sideLabel[i]+" · "+name, data, lineOpts(runColor(j), 2, sideDash[i], false)...)
			series++
		}
	}
	if series == 0 {
		return block{}, false
	}
	line.SetGlobalOptions(common("cmp_latency",
		axis{Name: "percentile", Type: "log", Min: 1, Max: math.Pow(10, math.Ceil(math.Log10(maxX))), Format: percentFormat},
		axis{Name: "latency of successes from intended send (ms, log)", Type: "log"}, "axis")...)
	p := newPlot("cmp_latency", 440, "A's floods solid, B's dashed, one colour per flood: a dashed line below its solid one is a faster tail.", line, func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(percentileTip)}
	})
	return block{ID: "cmp_latency", Heading: "Latency percentiles", Text: "From each flood's HdrHistogram, for the first run of each side.", Plot: &p}, true
}

// compareQueueBlock draws the server's line over time for each flood, A
// solid and B dashed.
func compareQueueBlock(runs [2][]*results.Run) (block, bool) {
	names, by := pairedRuns(runs)
	line := charts.NewLine()
	last, series := 1.0, 0
	for j, name := range names {
		for i := range by {
			r := by[i][name]
			if r == nil || len(r.Samples) == 0 {
				continue
			}
			var data []opts.LineData
			for _, s := range r.Samples {
				data = append(data, xy(s.TS, float64(s.Stats.Waiting)))
			}
			last = math.Max(last, r.Samples[len(r.Samples)-1].TS)
			line.AddSeries(sideLabel[i]+" · "+name, data, lineOpts(runColor(j), 2, sideDash[i], false)...)
			series++
		}
	}
	if series == 0 {
		return block{}, false
	}
	line.SetGlobalOptions(common("cmp_waiting",
		axis{Name: "time since the flood started (s)", Min: 0, Max: axisMax(last)},
		axis{Name: "requests waiting in line"}, "axis")...)
	p := newPlot("cmp_waiting", 400, "A's floods solid, B's dashed: the server's own count of requests waiting for a slot, until its line drained.", line, axisTip(" s", ""))
	return block{ID: "cmp_waiting", Heading: "Queue depth over time", Text: "Sampled from the server's /stats during each flood, for the first run of each side.", Plot: &p}, true
}

func compareChecksBlock(c *compare.Comparison) block {
	t := &table{Class: "checks", Head: []string{"check", "A", "B", "changed"}}
	for _, v := range c.Checks {
		mark := ""
		if v.Changed {
			mark = "changed"
		}
		t.Rows = append(t.Rows, []cell{{Text: v.Name, Class: "name"}, textCell(statuses(v.A)), textCell(statuses(v.B)), {Text: mark, Class: "warn"}})
	}
	return block{ID: "cmp_checks", Heading: "Checks", Text: "Each check's verdict on every run of each side.", Table: t}
}

func statuses(st []results.Status) string {
	if len(st) == 0 {
		return "absent"
	}
	parts := make([]string, len(st))
	for i, s := range st {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

func compareFiguresBlock(c *compare.Comparison) block {
	t := &table{Class: "runs", Head: []string{"section", "item", "figure", "A", "B", "delta", "change", "test"}}
	for _, f := range c.Figures {
		delta, test := "", ""
		if f.A.N > 0 && f.B.N > 0 {
			delta = fmt.Sprintf("%+.4g", f.Delta)
			if f.DeltaPct != nil {
				delta += fmt.Sprintf(" (%+.1f%%)", *f.DeltaPct)
			}
		}
		if f.Test != nil {
			test = fmt.Sprintf("p=%.3f n=%d+%d", f.Test.P, f.Test.N1, f.Test.N2)
		}
		cls := ""
		if f.Change == compare.ChangeSignificant || (f.Change == compare.ChangeExact || f.Change == compare.ChangeUntested) && f.Delta != 0 {
			cls = "warn"
		}
		t.Rows = append(t.Rows, []cell{textCell(f.Section), {Text: f.Item, Class: "name"}, textCell(f.Key),
			numCell(medianText(f.A)), numCell(medianText(f.B)), {Text: delta, Class: "num " + cls}, textCell(string(f.Change)), textCell(test)})
	}
	return block{ID: "cmp_figures", Heading: "Every figure", Text: "A side's value is the median of its runs. \"exact\" is virtual time, where every run gives the same value; \"~\" is a wall-clock difference the Mann-Whitney U test does not find significant.", Table: t}
}

func medianText(s compare.Sample) string {
	if s.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.6g", s.Median)
}
