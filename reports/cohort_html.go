package reports

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/results"
)

// Files a cohort report writes besides its page and the charting library.
const (
	cohortChecksCSV  = "checks.csv"
	cohortRunsCSV    = "runs.csv"
	cohortSkippedCSV = "skipped.csv"
)

// WriteCohort writes c's comparison report into dir: index.html (the score
// distribution, the pass rate of every check, the spread of the floods' key
// measurements with their outliers, and every skipped file with its
// reason), the CSV exports checks.csv, runs.csv and skipped.csv (see
// docs/REPORTS.md), and echarts.min.js with its licence. Like WriteHTML it
// needs no network to open.
func WriteCohort(dir string, c *Cohort) error {
	files, err := renderCohort(c)
	if err != nil {
		return err
	}
	if err := writeFiles(dir, files); err != nil {
		return err
	}
	// The CSV files hold a row per document and check: written as they
	// are made, never whole in memory.
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{cohortChecksCSV, c.WriteChecksCSV}, {cohortRunsCSV, c.WriteRunsCSV}, {cohortSkippedCSV, c.WriteSkippedCSV}} {
		if err := writeStreamAtomic(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return nil
}

// renderCohort makes c's page and the files it needs beside it, the CSV
// files aside.
func renderCohort(c *Cohort) (map[string][]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("reports: no cohort")
	}
	files, err := assetContents()
	if err != nil {
		return nil, err
	}
	page, err := renderPage(cohortPage(c))
	if err != nil {
		return nil, fmt.Errorf("reports: cohort page: %w", err)
	}
	files["index.html"] = page
	return files, nil
}

// writeStreamAtomic writes what write writes to path, through a temporary
// file in the same folder renamed over it, as writeFileAtomic does.
func writeStreamAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*")
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	w := bufio.NewWriterSize(f, 1<<16)
	if err := write(w); err != nil {
		f.Close()
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("reports: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	return nil
}

func cohortPage(c *Cohort) pageData {
	p := pageData{
		File: "index.html", Title: fmt.Sprintf("ratelab cohort: %d documents", len(c.Docs)),
		Heading: "ratelab cohort",
		Lead: fmt.Sprintf("%d results documents side by side, %d files skipped. Each document counts once; files that are malformed, truncated, of another schema, copies of another, forged, or whose own verdict disagrees with their checks are listed at the end with the reason, and counted nowhere else.",
			len(c.Docs), len(c.Skipped)),
		Nav:    []navItem{{Label: "Cohort", Href: "index.html", Current: true}},
		Footer: trusted(`Written by ratelab's grader from the documents listed below. Data: <a href="checks.csv">checks.csv</a> (one row per document and check), <a href="runs.csv">runs.csv</a> (one row per document and flood or storm), <a href="skipped.csv">skipped.csv</a>. Charts: Apache ECharts ` + EchartsVersion + `, loaded from <code>echarts.min.js</code> beside this page (<a href="echarts-LICENSE.txt">licence</a>, <a href="echarts-NOTICE.txt">notice</a>). Nothing is loaded from the network.`),
	}
	p.Facts = append(p.Facts, fact{"signatures", signatureSummary(c)})
	p.Warnings = append(p.Warnings, signatureWarnings(c)...)
	p.Warnings = append(p.Warnings, frozenWarnings(c)...)
	if len(c.Docs) == 0 {
		p.Warnings = append(p.Warnings, "No document could be read: see the skipped files below.")
	} else {
		p.Blocks = append(p.Blocks, scoreBlocks(c)...)
		p.Blocks = append(p.Blocks, checkBlocks(c)...)
		p.Blocks = append(p.Blocks, measurementBlocks(c)...)
		p.Blocks = append(p.Blocks, documentsBlock(c))
	}
	skipped := &table{Class: "skipped", Head: []string{"file", "why it was skipped"}}
	if c.Verified {
		skipped.Head = append(skipped.Head, "signature")
	}
	for _, s := range c.Skipped {
		row := []cell{{Text: s.Path, Class: "name"}, {Text: s.Reason, Class: "msg"}}
		if c.Verified {
			row = append(row, signatureCell(s.Signature))
		}
		skipped.Rows = append(skipped.Rows, row)
	}
	text := "Every file that was found but not counted."
	if len(c.Skipped) == 0 {
		text = "None: every file found was read and counted."
		skipped = nil
	}
	p.Blocks = append(p.Blocks, block{ID: "skipped", Heading: fmt.Sprintf("Skipped files (%d)", len(c.Skipped)), Text: text, Table: skipped})
	return p
}

// signatureSummary says in a few words whether and how the signatures were
// checked.
func signatureSummary(c *Cohort) string {
	if !c.Verified {
		return "not checked (" + results.SigningKeyEnv + " is not set)"
	}
	n := c.signatureCount()
	return fmt.Sprintf("checked with %s: %d signed, %d unsigned, %d forged", results.SigningKeyEnv, n[SigSigned], n[SigUnsigned], n[SigForged])
}

// signatureWarnings name the forged files, which were not counted, and
// count the unsigned ones, which were.
func signatureWarnings(c *Cohort) []string {
	if !c.Verified {
		return nil
	}
	var forged []string
	for _, s := range c.Skipped {
		if s.Signature == SigForged {
			forged = append(forged, s.Path)
		}
	}
	var w []string
	if len(forged) > 0 {
		w = append(w, fmt.Sprintf("%s not counted: the signature does not match (edited after grading, or signed with another key): %s.",
			plural(len(forged), "forged document", "forged documents"), strings.Join(forged, ", ")))
	}
	if n := c.signatureCount()[SigUnsigned]; n > 0 {
		w = append(w, fmt.Sprintf("%s no signature: anyone could have written or edited %s. %s counted, and marked unsigned in the list of documents and the CSV files.",
			plural(n, "document has", "documents have"), map[bool]string{true: "it", false: "them"}[n == 1], map[bool]string{true: "It is", false: "They are"}[n == 1]))
	}
	return w
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// signatureCell draws a signature verdict as a badge: signed green,
// unsigned yellow, forged red, not checked grey.
func signatureCell(sig string) cell {
	badge := map[string]string{SigSigned: "pass", SigUnsigned: "error", SigForged: "fail", SigNotChecked: "skip"}[sig]
	if badge == "" {
		return textCell("")
	}
	return cell{Text: sig, Badge: badge}
}

// trusted marks markup built here, with nothing from a document in it.
func trusted(s string) template.HTML { return template.HTML(s) }

// scoreBlocks draw the documents' scores as a histogram and list the
// scores per task.
func scoreBlocks(c *Cohort) []block {
	labels := make([]string, 11)
	for i := range 10 {
		labels[i] = fmt.Sprintf("%d–%d%%", 10*i, 10*i+9)
	}
	labels[10] = "100%"
	counts := make([]int, 11)
	var pct []float64
	full := 0
	for _, d := range c.Docs {
		if d.MaxScore <= 0 || d.Interrupted {
			continue // an interrupted run has no score to place
		}
		v := 100 * d.Score / d.MaxScore
		pct = append(pct, v)
		counts[min(int(math.Floor(v/10+1e-9)), 10)]++
		if d.Status == results.StatusPass {
			full++
		}
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(common("cohort_scores", axis{Name: "score (% of the points)", Type: "category", Data: labels},
		axis{Name: "documents", Min: 0}, "axis")...)
	var data []opts.BarData
	for _, n := range counts {
		data = append(data, opts.BarData{Value: n})
	}
	bar.AddSeries("documents", data, charts.WithItemStyleOpts(opts.ItemStyle{Color: colorShed}),
		charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "top", Color: colorOther}))
	caption := "No document has any points to score."
	if len(pct) > 0 {
		s := summarize(pct)
		caption = fmt.Sprintf("Median score %.0f%% (middle half %.0f–%.0f%%) over %d documents; %d passed every check.", s.Med, s.Q1, s.Q3, len(pct), full)
	}
	p := newPlot("cohort_scores", 320, caption, bar, nil)

	// Per task, from the checks, so "all" documents count for each task.
	type agg struct {
		scores []float64
		passed int
	}
	byTask := map[string]*agg{}
	var order []string
	for _, d := range c.Docs {
		for _, v := range d.tasks {
			a := byTask[v.task]
			if a == nil {
				a = &agg{}
				byTask[v.task] = a
				order = append(order, v.task)
			}
			if v.max > 0 {
				a.scores = append(a.scores, 100*v.score/v.max)
			}
			if v.status == results.StatusPass {
				a.passed++
			}
		}
	}
	slices.SortFunc(order, compareTasks)
	t := &table{Class: "tasks", Head: []string{"task", "documents", "median score", "middle half", "lowest", "passed every check"}}
	for _, id := range order {
		a := byTask[id]
		s := summarize(a.scores)
		t.Rows = append(t.Rows, []cell{{Text: taskTitle(id), Class: "name"}, numCell(fmt.Sprint(s.N)), numCell(pct0(s.Med)),
			numCell(pct0(s.Q1) + "–" + pct0(s.Q3)), numCell(pct0(s.Min)), numCell(fmt.Sprintf("%d of %d", a.passed, s.N))})
	}
	return []block{
		{ID: "scores", Heading: "Score distribution", Text: "Each document's score as a share of its points.", Plot: &p},
		{ID: "tasks", Heading: "Score per task", Text: "Documents that graded several tasks count once for each.", Table: t},
	}
}

func pct0(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", v)
}

// checkStat counts one check's verdicts across the cohort. Its pass rate
// counts passes only: an inconclusive check (repeats that disagreed) is not
// a pass.
type checkStat struct {
	task, name string
	n          map[results.Status]int
	total      int
}

func (s *checkStat) rate() float64 {
	return float64(s.n[results.StatusPass]) / float64(max(s.total, 1))
}

// checkBlocks draw the pass rate of every check, hardest first.
func checkBlocks(c *Cohort) []block {
	stats := map[[2]string]*checkStat{}
	var order []*checkStat
	for _, d := range c.Docs {
		for _, ch := range d.checks {
			k := [2]string{ch.task, ch.name}
			s := stats[k]
			if s == nil {
				s = &checkStat{task: ch.task, name: ch.name, n: map[results.Status]int{}}
				stats[k] = s
				order = append(order, s)
			}
			s.n[ch.status]++
			s.total++
		}
	}
	if len(order) == 0 {
		return nil
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].rate() != order[j].rate() {
			return order[i].rate() < order[j].rate()
		}
		return compareTasks(order[i].task, order[j].task) < 0
	})
	names := make([]string, len(order))
	for i, s := range order {
		names[i] = s.task + " · " + s.name
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(common("cohort_checks", axis{Name: "documents", Min: 0},
		axis{Type: "category", Data: names, Inverse: true, LabelWidth: 380}, "axis")...)
	for _, st := range []results.Status{results.StatusPass, results.StatusFail, results.StatusSkip, results.StatusError, results.StatusInconclusive} {
		if st == results.StatusInconclusive && !anyStatus(order, st) {
			continue // documents graded once have none: keep their chart as it was
		}
		var data []opts.BarData
		for _, s := range order {
			data = append(data, opts.BarData{Value: s.n[st]})
		}
		bar.AddSeries(string(st), data, charts.WithBarChartOpts(opts.BarChart{Stack: "verdicts", BarWidth: "62%"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: statusColor[st]}))
	}
	hardest := order[0]
	caption := fmt.Sprintf("Hardest first: %q (%s) passed in %d of %d documents.", hardest.name, hardest.task, hardest.n[results.StatusPass], hardest.total)
	p := newPlot("cohort_checks", 80+22*len(order), caption, bar, nil)
	t := &table{Class: "checks", Head: []string{"task", "check", "pass", "fail", "skip", "error", "inconclusive", "pass rate"}}
	for _, s := range order {
		t.Rows = append(t.Rows, []cell{textCell(s.task), {Text: s.name, Class: "name"},
			numCell(fmt.Sprint(s.n[results.StatusPass])), numCell(fmt.Sprint(s.n[results.StatusFail])),
			numCell(fmt.Sprint(s.n[results.StatusSkip])), numCell(fmt.Sprint(s.n[results.StatusError])),
			numCell(fmt.Sprint(s.n[results.StatusInconclusive])),
			numCell(fmt.Sprintf("%.0f%%", 100*s.rate()))})
	}
	return []block{{ID: "checks", Heading: "Pass rate per check", Text: "How each check went across the cohort, the least passed first. Skip: not run because an earlier stage failed; error: not judged (the machine, not the learner); inconclusive: graded several times (--repeat) with repeats that disagreed, never counted as a pass.", Plot: &p, Table: t}}
}

// anyStatus reports whether any check of stats had status st.
func anyStatus(stats []*checkStat, st results.Status) bool {
	for _, s := range stats {
		if s.n[st] > 0 {
			return true
		}
	}
	return false
}

var statusColor = map[results.Status]string{
	results.StatusPass: colorOK, results.StatusFail: colorTimeout, results.StatusSkip: colorSent, results.StatusError: colorLimited,
	results.StatusInconclusive: colorShedOut,
}

// metric is one measurement the cohort compares across documents.
type metric struct {
	id, title, unit string
	log             bool // draw on a log scale
	floods          func(r *cohortRun) (value, model float64, ok bool)
	storms          func(s *cohortStorm) (float64, bool)
}

var cohortMetrics = []metric{
	{id: "goodput", title: "Goodput", unit: "successes/s", floods: func(r *cohortRun) (float64, float64, bool) {
		m := math.NaN()
		if r.durationS > 0 {
			m = r.predictedOK / r.durationS // NaN without a prediction
		}
		return r.goodputRPS, m, r.issued > 0
	}},
	{id: "p99", title: "p99 latency of successes", unit: "ms", log: true, floods: func(r *cohortRun) (float64, float64, bool) {
		return r.p99MS, r.predictedP99MS, r.ok > 0
	}},
	{id: "storm_time", title: "Storm time", unit: "s until the last call ended", storms: func(s *cohortStorm) (float64, bool) {
		return s.lastDoneS, s.clients > 0
	}},
	{id: "attempts", title: "Attempts", unit: "attempts sent, retries included", storms: func(s *cohortStorm) (float64, bool) {
		return float64(s.attempts), s.clients > 0
	}},
}

// sample is one document's value of a metric for one run.
type sample struct {
	path  string
	value float64
}

// measurementBlocks draw, for every metric and run name, the spread across
// the cohort as a box plot, the model's value, and the outliers, then list
// the outliers.
func measurementBlocks(c *Cohort) []block {
	var blocks []block
	outliers := &table{Class: "outliers", Head: []string{"file", "run", "measurement", "value", "cohort median", "usual range"}}
	for _, m := range cohortMetrics {
		values := map[string][]sample{}
		models := map[string]float64{}
		var names []string
		add := func(name string, path string, v, model float64) {
			if _, ok := values[name]; !ok {
				names = append(names, name)
			}
			values[name] = append(values[name], sample{path, v})
			if !math.IsNaN(model) {
				models[name] = model
			}
		}
		for _, d := range c.Docs {
			if m.floods != nil {
				for i := range d.runs {
					r := &d.runs[i]
					if v, model, ok := m.floods(r); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
						add(r.name, d.Path, v, model)
					}
				}
			}
			if m.storms != nil {
				for i := range d.storms {
					s := &d.storms[i]
					if v, ok := m.storms(s); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
						add(s.name, d.Path, v, math.NaN())
					}
				}
			}
		}
		if len(names) == 0 {
			continue
		}
		id := "cohort_" + m.id
		box, sc, model := charts.NewBoxPlot(), charts.NewScatter(), charts.NewScatter()
		xType, unit := "value", m.unit
		if m.log {
			xType, unit = "log", m.unit+", log scale"
		}
		box.SetGlobalOptions(common(id, axis{Name: m.title + " (" + unit + ")", Type: xType},
			axis{Type: "category", Data: names, Inverse: true, LabelWidth: 260}, "item")...)
		var boxes []opts.BoxPlotData
		var outs, preds []opts.ScatterData
		nOut := 0
		for _, name := range names {
			var vs []float64
			for _, s := range values[name] {
				vs = append(vs, s.value)
			}
			st := summarize(vs)
			boxes = append(boxes, opts.BoxPlotData{Name: name, Value: []float64{num(st.WhiskLo), num(st.Q1), num(st.Med), num(st.Q3), num(st.WhiskHigh)}})
			for _, s := range values[name] {
				if st.outlier(s.value) {
					nOut++
					outs = append(outs, opts.ScatterData{Name: s.path, Value: []any{num(s.value), name}})
					outliers.Rows = append(outliers.Rows, []cell{{Text: s.path, Class: "name"}, textCell(name), textCell(m.title),
						numCell(fmt.Sprintf("%.4g %s", s.value, shortUnit(m.unit))), numCell(fmt.Sprintf("%.4g", st.Med)),
						numCell(fmt.Sprintf("%.4g–%.4g", st.Low, st.High))})
				}
			}
			if v, ok := models[name]; ok {
				preds = append(preds, opts.ScatterData{Name: "model", Value: []any{num(v), name}})
			}
		}
		box.AddSeries("middle half and range of the documents", boxes,
			charts.WithItemStyleOpts(opts.ItemStyle{Color: "#ddf4ff", BorderColor: colorShed, BorderWidth: 1.5}))
		if len(outs) > 0 {
			sc.AddSeries("outliers", outs, charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "circle", SymbolSize: 9}),
				charts.WithItemStyleOpts(opts.ItemStyle{Color: colorTimeout}))
			box.Overlap(sc)
		}
		if len(preds) > 0 {
			model.AddSeries("model", preds, charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "diamond", SymbolSize: 12}),
				charts.WithItemStyleOpts(opts.ItemStyle{Color: "rgba(255,255,255,0)", BorderColor: colorInk, BorderWidth: 1.5}))
			box.Overlap(model)
		}
		outs1 := "outliers"
		if nOut == 1 {
			outs1 = "outlier"
		}
		caption := fmt.Sprintf("%s per run across the cohort: the box is the middle half, the whiskers the rest; %d %s (beyond 1.5 box-widths) in red.", m.title, nOut, outs1)
		if len(preds) > 0 {
			caption += " Diamonds: the model."
		}
		p := newPlot(id, 90+34*len(names), caption, box, func(mm map[string]any) {
			mm["tooltip"] = map[string]any{"trigger": "item"}
		})
		blocks = append(blocks, block{ID: m.id, Heading: m.title + " across the cohort", Plot: &p})
	}
	if len(outliers.Rows) > 0 {
		blocks = append(blocks, block{ID: "outliers", Heading: fmt.Sprintf("Outliers (%d)", len(outliers.Rows)),
			Text:  fmt.Sprintf("Measurements beyond 1.5 times the interquartile range (at least 5%% of the median) from the middle half of the documents with that run; judged only among %d or more documents.", outlierMinN),
			Table: outliers})
	}
	return blocks
}

func shortUnit(u string) string {
	if i := strings.IndexByte(u, ' '); i > 0 {
		return u[:i]
	}
	return u
}

// documentsBlock lists every document counted.
func documentsBlock(c *Cohort) block {
	t := &table{Class: "docs", Head: []string{"file", "task", "impl", "", "points", "finished", "sha256", "signature"}}
	for _, d := range c.Docs {
		t.Rows = append(t.Rows, []cell{{Text: d.Path, Class: "name"}, textCell(d.Task), textCell(d.Impl), statusCell(d.Status),
			numCell(d.pointsText()), textCell(d.finishedText()), {Text: d.SHA256[:12], Class: "msg"}, signatureCell(d.Signature)})
	}
	return block{ID: "docs", Heading: fmt.Sprintf("Documents (%d)", len(c.Docs)), Table: t}
}

// frozenWarnings names the documents graded with frozen files (tests,
// grader, servers) other than the most common set in the cohort, and those
// that say their frozen files were edited. A release's template carries one
// set: a document with another was graded by a changed grader or suite.
func frozenWarnings(c *Cohort) []string {
	count := map[string]int{}
	for _, d := range c.Docs {
		if d.frozenSHA256 != "" {
			count[d.frozenSHA256]++
		}
	}
	common, most := "", 0
	for h, n := range count {
		if n > most || n == most && h < common {
			common, most = h, n
		}
	}
	var odd, edited []string
	for _, d := range c.Docs {
		if d.frozenSHA256 != "" && d.frozenSHA256 != common {
			odd = append(odd, d.Path)
		}
		if d.edited {
			edited = append(edited, d.Path)
		}
	}
	var out []string
	if len(odd) > 0 {
		out = append(out, fmt.Sprintf("%d of %d documents were graded with frozen files (tests, grader, servers) that differ from the most common set (%d documents): %s",
			len(odd), len(c.Docs), most, strings.Join(odd, ", ")))
	}
	if len(edited) > 0 {
		out = append(out, fmt.Sprintf("%d documents say their frozen files were edited or did not match the manifest; their scores are not valid: %s",
			len(edited), strings.Join(edited, ", ")))
	}
	return out
}
