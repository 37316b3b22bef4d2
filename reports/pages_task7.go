package reports

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/results"
)

// task7Page is the page of task 7.
var task7Page = &taskPage{
	ID:    "task7",
	Title: "a circuit breaker: failing fast protects the caller",
	Lead: "A service answers its clients at 100 requests per second by calling a dependency; for 10 s the dependency accepts calls and never answers, and the service waits up to 10 s for each. " +
		"The same scenario runs twice, without and with a circuit breaker in front of the dependency. The shaded band on every chart is the time the dependency was dead.",
	Draws: func(doc *results.Document) bool { return len(doc.Scenarios) > 0 },
	Build: buildTask7,
}

func buildTask7(s *site, _ []*results.Run) []block {
	var scs []*results.Scenario
	for _, sc := range s.doc.Scenarios {
		if sc != nil {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return []block{{ID: "no-scenarios", Heading: "No scenarios", Text: "This document holds no dead-dependency scenario: it was skipped (see the checks) or the run stopped early."}}
	}
	without, with := scenarioPair(scs)
	blocks := []block{
		scenarioLineBlock("t7_inflight", scs, "Requests in flight in the service", "requests in flight",
			"The service's own count of requests it was working on, sampled every 100 ms.",
			func(sm results.ScenarioSample) float64 { return float64(sm.InFlight) }, littlesLaw(without), littlesLawName(without), inFlightCaption(without, with)),
		scenarioLineBlock("t7_heap", scs, "The service's heap", "heap in use (MB)",
			"runtime.MemStats.HeapInuse of the service's process, sampled with the in-flight count.",
			func(sm results.ScenarioSample) float64 { return sm.HeapMB }, 0, "", heapCaption(without, with)),
		dependencyBlock("t7_dependency", scs, without, with),
		clientOutcomesBlock("t7_outcomes", scs, without, with),
	}
	if b, ok := scenarioLatencyBlock("t7_latency", scs, failureLatencyCaption(without, with)); ok {
		blocks = append(blocks, b)
	}
	blocks = append(blocks, block{ID: "t7_table", Heading: "The two runs", Table: scenarioTable(scs),
		Text: "The service's and the dependency's own counts. Recovered: how long after the dependency came back the service answered 90% of its clients again."})
	return blocks
}

// scenarioPair picks the scenario without and the one with a breaker; either
// may be nil.
func scenarioPair(scs []*results.Scenario) (without, with *results.Scenario) {
	for _, sc := range scs {
		if sc.Breaker && with == nil {
			with = sc
		}
		if !sc.Breaker && without == nil {
			without = sc
		}
	}
	return without, with
}

// scenarioColor is red without a breaker and blue with one.
func scenarioColor(sc *results.Scenario) string {
	if sc.Breaker {
		return colorShed
	}
	return colorTimeout
}

// deadWindow shades the seconds the dependency was dead, on one series.
func deadWindow(sc *results.Scenario) []charts.SeriesOpts {
	if sc.DeadForS <= 0 {
		return nil
	}
	return []charts.SeriesOpts{
		charts.WithMarkAreaData([]opts.MarkAreaData{{Name: "dependency dead", XAxis: num(sc.DeadAtS)}, {XAxis: num(sc.DeadAtS + sc.DeadForS)}}),
		charts.WithMarkAreaStyleOpts(opts.MarkAreaStyle{
			ItemStyle: &opts.ItemStyle{Color: "rgba(207,34,46,0.08)"},
			Label:     &opts.Label{Show: opts.Bool(true), Position: "insideTop", Color: colorTimeout},
		}),
	}
}

// scenarioEnd is the last sample's time of any scenario, or the flood's end.
func scenarioEnd(scs []*results.Scenario) float64 {
	end := 0.0
	for _, sc := range scs {
		if n := len(sc.Samples); n > 0 {
			end = math.Max(end, sc.Samples[n-1].TS)
		}
		if sc.Run != nil {
			end = math.Max(end, sc.Run.DurationS)
		}
	}
	return end
}

// scenarioLineBlock draws one of the service's sampled values over time,
// one line per scenario.
// A level above 0 is marked with a dashed line named levelName.
func scenarioLineBlock(id string, scs []*results.Scenario, heading, yName, text string, value func(results.ScenarioSample) float64, level float64, levelName, caption string) block {
	line := charts.NewLine()
	line.SetGlobalOptions(common(id,
		axis{Name: "time since the clients started (s)", Min: 0, Max: axisMax(scenarioEnd(scs))},
		axis{Name: yName, Min: 0}, "axis")...)
	for i, sc := range scs {
		var data []opts.LineData
		for _, sm := range sc.Samples {
			data = append(data, xy(sm.TS, value(sm)))
		}
		so := lineOpts(scenarioColor(sc), 2, "solid", false)
		if i == 0 {
			so = append(so, deadWindow(sc)...)
			if level > 0 {
				so = append(so, charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: levelName, YAxis: level}),
					charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
						LineStyle: &opts.LineStyle{Color: colorInk, Type: "dashed", Width: 1},
						Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Color: colorInk, Position: "insideEndTop"}}))
			}
		}
		line.AddSeries(sc.Name, data, so...)
	}
	unit := ""
	if strings.Contains(yName, "(MB)") {
		unit = " MB"
	}
	p := newPlot(id, 340, caption, line, axisTip(" s", unit))
	return block{ID: id, Heading: heading, Text: text, Plot: &p}
}

// littlesLaw is how many requests a service without a breaker holds once
// every call waits the whole call timeout: arrival rate × timeout.
func littlesLaw(sc *results.Scenario) float64 {
	if sc == nil || sc.Run == nil {
		return 0
	}
	return sc.Run.OfferedRPS * sc.CallTimeoutS
}

func littlesLawName(sc *results.Scenario) string {
	if sc == nil || sc.Run == nil {
		return ""
	}
	return fmt.Sprintf("Little's Law: %s × %s = %s", fmtRate(sc.Run.OfferedRPS), fmtSeconds(sc.CallTimeoutS), thousands(littlesLaw(sc)))
}

func inFlightCaption(without, with *results.Scenario) string {
	if without == nil || with == nil || without.Run == nil {
		return "Without a breaker every call to the dead dependency holds a request for the whole call timeout: rate × timeout of them pile up (Little's Law)."
	}
	rate := without.Run.OfferedRPS
	after := fmt.Sprintf("with the breaker it never held more than %d, the few calls out before it opened", with.InFlightMax)
	if 4*with.InFlightMax > without.InFlightMax {
		after = fmt.Sprintf("with the breaker it still held %d: it did not stop the calls in time", with.InFlightMax)
	}
	return fmt.Sprintf("Little's Law: %s arriving × %s waiting = %s requests stuck without a breaker, and the service held %d at once; %s.",
		fmtRate(rate), fmtSeconds(without.CallTimeoutS), thousands(rate*without.CallTimeoutS), without.InFlightMax, after)
}

func heapCaption(without, with *results.Scenario) string {
	if without == nil || with == nil {
		return "Every stuck request holds a goroutine, a connection and its buffers: memory grows with the requests in flight."
	}
	return fmt.Sprintf("Every stuck request holds a goroutine, a connection and its buffers: the heap reached %.0f MB without a breaker, %.0f MB with it. A service with a memory limit would have been killed long before the dependency came back.",
		without.HeapMaxMB, with.HeapMaxMB)
}

// thousands writes v rounded, with a comma between thousands: 1,000.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// counterRates turns a cumulative counter sampled over time into a rate per
// second, over windows of at least every seconds, each point at the middle
// of its window.
func counterRates(ts []float64, counts []int64, every float64) []opts.LineData {
	var out []opts.LineData
	if len(ts) == 0 {
		return nil
	}
	j := 0
	for i := 1; i < len(ts); i++ {
		dt := ts[i] - ts[j]
		if dt < 0.9*every {
			continue
		}
		out = append(out, xy((ts[i]+ts[j])/2, float64(counts[i]-counts[j])/dt))
		j = i
	}
	return out
}

// dependencyBlock draws the calls that reached the dependency per second.
func dependencyBlock(id string, scs []*results.Scenario, without, with *results.Scenario) block {
	line := charts.NewLine()
	line.SetGlobalOptions(common(id,
		axis{Name: "time since the clients started (s)", Min: 0, Max: axisMax(scenarioEnd(scs))},
		axis{Name: "calls reaching the dependency per second", Min: 0}, "axis")...)
	for i, sc := range scs {
		ts := make([]float64, len(sc.Samples))
		counts := make([]int64, len(sc.Samples))
		for k, sm := range sc.Samples {
			ts[k], counts[k] = sm.TS, sm.DependencyCalls
		}
		so := lineOpts(scenarioColor(sc), 2, "solid", false)
		if i == 0 {
			so = append(so, deadWindow(sc)...)
		}
		line.AddSeries(sc.Name, counterRates(ts, counts, 0.5), so...)
	}
	caption := "Without a breaker the service keeps calling the dead dependency at the full rate; with one the calls stop once the window has seen enough slow calls, but for one trial per cooldown."
	if without != nil && with != nil {
		why := "the window's calls, those already out when the first slow call was reported, and one trial per cooldown"
		if 4*with.DependencyCallsDead > without.DependencyCallsDead {
			why = "the breaker did not stop calling a dependency that never answers"
		}
		caption = fmt.Sprintf("Without a breaker the service kept calling the dead dependency at the full rate: %s calls into silence. With it, %d calls reached it while it was dead: %s.",
			thousands(float64(without.DependencyCallsDead)), with.DependencyCallsDead, why)
	}
	p := newPlot(id, 340, caption, line, axisTip(" s", " calls/s"))
	return block{ID: id, Heading: "Calls reaching the dependency",
		Text: "The dependency's own count of calls, as a rate over half-second windows.", Plot: &p}
}

// clientOutcomesBlock stacks what the service's clients got, per second of
// intended send time, one panel per scenario on a shared time axis.
func clientOutcomesBlock(id string, scs []*results.Scenario, without, with *results.Scenario) block {
	var withRun []*results.Scenario
	for _, sc := range scs {
		if sc.Run != nil && sc.Run.TimelineBinMS > 0 {
			withRun = append(withRun, sc)
		}
	}
	if len(withRun) == 0 {
		return block{ID: id, Heading: "What the service's clients got", Text: "No scenario recorded its clients' timeline."}
	}
	bar := charts.NewBar()
	panels := make([]panel, len(withRun))
	end, ymax := 0.0, 0.0
	for i, sc := range withRun {
		r := sc.Run
		bin := r.TimelineBinMS / 1000
		panels[i] = panel{Title: clientPanelTitle(sc), YName: "requests/s"}
		totals := map[int]float64{}
		for _, o := range results.Outcomes {
			counts := r.Timeline[o]
			if r.Counts[o] == 0 || len(counts) == 0 {
				continue
			}
			var data []opts.BarData
			for k, n := range counts {
				t := (float64(k) + 0.5) * bin
				if t > r.DurationS {
					break // sent after the flood: nothing
				}
				data = append(data, opts.BarData{Value: []float64{num(t), num(float64(n) / bin)}})
				totals[k] += float64(n) / bin
				end = math.Max(end, float64(k+1)*bin)
			}
			so := []charts.SeriesOpts{
				charts.WithBarChartOpts(opts.BarChart{XAxisIndex: i, YAxisIndex: i, Stack: "outcomes-" + strconv.Itoa(i), BarWidth: "90%"}),
				charts.WithItemStyleOpts(opts.ItemStyle{Color: outcomeColor[o]}),
			}
			if o == results.OutcomeOK {
				so = append(so, deadWindow(sc)...)
			}
			bar.AddSeries(clientOutcomeLabel(o), data, so...)
		}
		for _, v := range totals {
			ymax = math.Max(ymax, v)
		}
	}
	for i := range panels {
		panels[i].YMax = niceCeil(ymax * 1.1)
	}
	height, layout := panelChart(&bar.RectChart, id, axis{Name: "intended send time (s)", Min: 0, Max: axisMax(end)}, panels, 130, 34, true)
	p := newPlot(id, height, clientOutcomesCaption(without, with), bar, func(m map[string]any) {
		layout(m)
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(
			`function (ps) { var s = ps[0].value[0] + ' s'; ps.forEach(function (p) { s += '<br>' + p.marker + p.seriesName + ': ' + p.value[1] + '/s'; }); return s; }`)}
	})
	return block{ID: id, Heading: "What the service's clients got",
		Text: "Each client request by how it ended, counted by when it was sent (250 ms bins, as a rate), one panel per run on the same time axis.",
		Plot: &p}
}

// clientOutcomeLabel names an outcome as the service's clients see it.
func clientOutcomeLabel(o results.Outcome) string {
	switch o {
	case results.OutcomeUnavailable:
		return "503 failed fast (circuit open)"
	case results.OutcomeOther:
		return "502 dependency failed"
	}
	return outcomeLabel[o]
}

func clientPanelTitle(sc *results.Scenario) string {
	r := sc.Run
	fails := r.Counts[results.OutcomeUnavailable] + r.Counts[results.OutcomeOther] + r.Counts[results.OutcomeTimeout] + r.Counts[results.OutcomeTooMany]
	rec := "never recovered"
	if sc.RecoveredS >= 0 {
		rec = fmt.Sprintf("90%% served again %.2f s after the dependency came back", sc.RecoveredS)
	}
	return fmt.Sprintf("%s: %d of %d served, %d failed, %s", sc.Name, r.OK, r.Issued, fails, rec)
}

func clientOutcomesCaption(without, with *results.Scenario) string {
	if without == nil || with == nil || without.Run == nil || with.Run == nil {
		return "While the dependency is dead its callers fail either way; what the breaker changes is how fast, and what it costs the service."
	}
	closed := fmt.Sprintf("it closed again %.2f s after the dependency came back", with.RecoveredS)
	if with.RecoveredS < 0 {
		closed = "here the service never served 90% of its clients again after the dependency came back"
	}
	return fmt.Sprintf("While the dependency is dead the clients fail either way: %d failed after the service's %s wait without a breaker, %d failed fast with it. The breaker changes how fast they hear it and what it costs the service; %s.",
		without.Run.Counts[results.OutcomeOther], fmtSeconds(without.CallTimeoutS), with.Run.Counts[results.OutcomeUnavailable], closed)
}

// scenarioLatencyBlock draws latency against percentile for each run's
// successes (solid), fast failures (dashed) and slow failures (dotted), in
// the run's colour.
func scenarioLatencyBlock(id string, scs []*results.Scenario, caption string) (block, bool) {
	line := charts.NewLine()
	maxX := 10.0
	n := 0
	dash := map[results.Outcome]string{results.OutcomeOK: "solid", results.OutcomeUnavailable: "dashed", results.OutcomeOther: "dotted"}
	short := map[results.Outcome]string{results.OutcomeOK: "200", results.OutcomeUnavailable: "503 fast", results.OutcomeOther: "502 slow"}
	for _, sc := range scs {
		if sc.Run == nil {
			continue
		}
		for _, o := range []results.Outcome{results.OutcomeOK, results.OutcomeUnavailable, results.OutcomeOther} {
			h, err := sc.Run.Histogram(o)
			if err != nil || h.TotalCount() == 0 {
				continue
			}
			data, x := percentileSeries(h)
			maxX = math.Max(maxX, x)
			line.AddSeries(fmt.Sprintf("%s · %s (%d)", sc.Name, short[o], h.TotalCount()), data, lineOpts(scenarioColor(sc), 2, dash[o], false)...)
			n++
		}
	}
	if n == 0 {
		return block{}, false
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "percentile", Type: "log", Min: 1, Max: math.Pow(10, math.Ceil(math.Log10(maxX))), Format: percentFormat},
		axis{Name: "latency from intended send (ms, log)", Type: "log"}, "axis")...)
	p := newPlot(id, 400, caption, line, func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(percentileTip)}
	})
	return block{ID: id, Heading: "How long the clients waited",
		Text: "Latency percentiles from each run's HdrHistograms, measured from every request's intended send time: successes solid, fast failures (503) dashed, slow failures (502) dotted; the count of each in brackets.",
		Plot: &p}, true
}

func failureLatencyCaption(without, with *results.Scenario) string {
	if without == nil || with == nil || without.Run == nil || with.Run == nil {
		return "Failures without a breaker take the whole call timeout; the breaker's 503s come back at once."
	}
	slow, err1 := without.Run.QuantileMS(results.OutcomeOther, 50)
	fast, err2 := with.Run.QuantileMS(results.OutcomeUnavailable, 99)
	if err1 != nil || err2 != nil {
		return "Failures without a breaker take the whole call timeout; the breaker's 503s come back at once."
	}
	return fmt.Sprintf("Without a breaker a failure took a median of %s, the service's whole call timeout; the breaker's 503s came back with a p99 of %.1f ms, and only the few calls already out when it opened still waited. Successes look the same in both runs.",
		fmtMS(slow), fast)
}

// scenarioTable lists both runs' counts.
func scenarioTable(scs []*results.Scenario) *table {
	t := &table{Class: "runs", Head: []string{"run", "in flight, most", "heap, most", "dependency calls", "while dead", "ok", "503 fast", "502 slow", "recovered"}}
	for _, sc := range scs {
		var ok, fast, slow int64
		if r := sc.Run; r != nil {
			ok, fast, slow = r.OK, r.Counts[results.OutcomeUnavailable], r.Counts[results.OutcomeOther]
		}
		rec := "never"
		if sc.RecoveredS >= 0 {
			rec = fmt.Sprintf("%.2f s", sc.RecoveredS)
		}
		t.Rows = append(t.Rows, []cell{{Text: sc.Name, Class: "name"}, numCell(strconv.FormatInt(sc.InFlightMax, 10)),
			numCell(fmt.Sprintf("%.0f MB", sc.HeapMaxMB)), numCell(strconv.FormatInt(sc.DependencyCalls, 10)),
			numCell(strconv.FormatInt(sc.DependencyCallsDead, 10)), numCell(strconv.FormatInt(ok, 10)),
			numCell(strconv.FormatInt(fast, 10)), numCell(strconv.FormatInt(slow, 10)), numCell(rec)})
	}
	return t
}
