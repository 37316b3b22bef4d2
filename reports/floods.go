package reports

// The charts of open-loop floods that several task pages share: goodput
// against offered load with the model's lines, outcomes, latency
// percentiles, and the server's line and dead work over time beside the
// simulation.

import (
	"fmt"
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/fakegpu"
	"ratelab/model"
	"ratelab/results"
)

// goodputBlock draws goodput against offered load: the model's lines, which
// follow the sliders for the overload duration and the client timeout, the
// model's prediction for each flood, and the floods as dots.
func (s *site) goodputBlock(id string, runs []*results.Run, caption string) block {
	xmax := 480.0
	for _, r := range s.doc.Runs {
		if r != nil && r.OfferedRPS*1.15 > xmax {
			xmax = math.Ceil(r.OfferedRPS*1.15/80) * 80
		}
	}
	xmax = math.Min(xmax, 8*fakegpu.DefaultConfig().Capacity())
	grid := s.goodputGrid(xmax, s.doc.Runs) // one grid for every page: the floods' durations and timeouts
	d0, t0 := defaultChoice(runs, grid)

	line := charts.NewLine()
	ymax := 0.0
	for _, r := range runs {
		ymax = math.Max(ymax, r.GoodputRPS)
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "offered load (requests/s)", Min: 0, Max: xmax},
		axis{Name: "goodput (successes/s)", Min: 0, Max: niceCeil(math.Max(ymax*1.1, 100))}, "item")...)
	pts := func(series string) []opts.LineData {
		var out []opts.LineData
		for _, p := range grid.Lines[series][d0][t0] {
			out = append(out, xy(p[0], p[1]))
		}
		return out
	}
	line.AddSeries("model: unprotected", pts(seriesUnprotected),
		append(lineOpts(colorInk, 2.5, "solid", false), charts.WithSeriesId(seriesUnprotected))...)
	line.AddSeries("model: shedding (simulated)", pts(seriesShed),
		append(lineOpts(colorShed, 2, "solid", false), charts.WithSeriesId(seriesShed))...)

	// The model's own prediction for each flood, as the grader set it.
	var pred []opts.ScatterData
	for _, r := range runs {
		if ok, has := r.Predicted["ok"]; has && r.DurationS > 0 {
			pred = append(pred, opts.ScatterData{Name: r.Name, Value: []float64{num(r.OfferedRPS), num(ok / r.DurationS)}})
		}
	}
	sc := charts.NewScatter()
	if len(pred) > 0 {
		sc.AddSeries("model, per flood", pred,
			charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "diamond", SymbolSize: 13}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: "rgba(255,255,255,0)", BorderColor: colorInk, BorderWidth: 1.5}))
	}
	// The floods, one series per kind of server and timeout.
	groups, order := map[string][]opts.ScatterData{}, []string{}
	servers := map[string]bool{}
	for _, r := range runs {
		servers[describeServer(r.Server)] = true
	}
	for _, r := range runs {
		key := "measured, timeout " + durationLabel(seconds(r.TimeoutS))
		if len(servers) > 1 {
			key = "measured: " + describeServer(r.Server)
			if r.TimeoutS != 1 {
				key += ", timeout " + durationLabel(seconds(r.TimeoutS))
			}
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], opts.ScatterData{Name: r.Name, Value: []float64{num(r.OfferedRPS), num(r.GoodputRPS)}})
	}
	for i, key := range order {
		sc.AddSeries(key, groups[key],
			charts.WithScatterChartOpts(opts.ScatterChart{Symbol: "circle", SymbolSize: 11}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: runColor(i + 1), BorderColor: "#ffffff", BorderWidth: 1}),
			charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "right", Formatter: "{b}", Color: colorOther}),
			charts.WithLabelLayoutOpts(opts.LabelLayout{MoveOverlap: "shiftY"}))
	}
	line.Overlap(sc)
	p := newPlot(id, 460, caption, line, func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "item", "formatter": opts.FuncOpts(
			`function (p) { var v = p.value; return p.seriesName + (p.name ? '<br>' + p.name : '') + '<br>' + v[0] + ' offered/s → ' + v[1] + ' successes/s'; }`)}
	})
	return block{ID: id, Heading: "Goodput against offered load",
		Text: "Move the sliders: a longer overload drags the unprotected line toward zero, a longer timeout buys a little and changes nothing in the long run, and the shedding server stays at capacity. The dots were measured with the floods' own duration and timeout.",
		Plot: &p, Model: grid,
		Sliders: []slider{
			{ID: id + "-d", Label: "overload lasts", Max: len(grid.Durations) - 1, Index: d0, Values: grid.Durations},
			{ID: id + "-t", Label: "client timeout", Max: len(grid.Timeouts) - 1, Index: t0, Values: grid.Timeouts},
		}}
}

// defaultChoice picks the sliders' first position: the floods' most common
// duration and timeout.
func defaultChoice(runs []*results.Run, g *goodputModel) (int, int) {
	count := func(f func(*results.Run) time.Duration) time.Duration {
		n := map[time.Duration]int{}
		best, bestN := time.Duration(0), 0
		for _, r := range runs {
			v := f(r)
			n[v]++
			if n[v] > bestN || n[v] == bestN && v < best {
				best, bestN = v, n[v]
			}
		}
		return best
	}
	d := count(func(r *results.Run) time.Duration { return seconds(r.DurationS) })
	t := count(func(r *results.Run) time.Duration { return seconds(r.TimeoutS) })
	return index(g.durations, d), index(g.timeouts, t)
}

// outcomesBlock stacks each flood's requests by outcome.
func outcomesBlock(id string, runs []*results.Run, caption string) block {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.Name
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id, axis{Name: "requests sent"}, axis{Type: "category", Data: names, Inverse: true}, "axis")...)
	for _, o := range results.Outcomes {
		var data []opts.BarData
		any := false
		for _, r := range runs {
			n := r.Counts[o]
			any = any || n > 0
			data = append(data, opts.BarData{Value: n})
		}
		if !any {
			continue
		}
		bar.AddSeries(outcomeLabel[o], data,
			charts.WithBarChartOpts(opts.BarChart{Stack: "outcomes", BarWidth: "60%"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: outcomeColor[o]}))
	}
	if len(bar.MultiSeries) == 0 {
		return block{ID: id, Heading: "What happened to each request", Text: "No flood sent a request."}
	}
	p := newPlot(id, 70+42*len(runs), caption, bar, nil)
	return block{ID: id, Heading: "What happened to each request", Plot: &p}
}

// latencyBlock draws latency against percentile from the runs' histograms,
// one line per run and outcome: solid for successes, dashed otherwise.
func latencyBlock(id string, runs []*results.Run, outcomes []results.Outcome, caption string) block {
	line := charts.NewLine()
	maxX := 10.0
	var series int
	for i, r := range runs {
		for _, o := range outcomes {
			h, err := r.Histogram(o)
			if err != nil || h.TotalCount() == 0 {
				continue
			}
			data, x := percentileSeries(h)
			maxX = math.Max(maxX, x)
			name := r.Name
			dash := "solid"
			if len(outcomes) > 1 {
				name += " · " + string(o)
			}
			if o != results.OutcomeOK {
				dash = "dashed"
			}
			line.AddSeries(name, data, lineOpts(runColor(i), 2, dash, false)...)
			series++
		}
	}
	maxX = math.Pow(10, math.Ceil(math.Log10(maxX)))
	line.SetGlobalOptions(common(id,
		axis{Name: "percentile", Type: "log", Min: 1, Max: maxX, Format: percentFormat},
		axis{Name: "latency from intended send (ms, log)", Type: "log"}, "axis")...)
	if series == 0 {
		return block{ID: id, Heading: "Latency percentiles", Text: "No flood recorded a latency histogram."}
	}
	p := newPlot(id, 420, caption, line, func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(percentileTip)}
	})
	return block{ID: id, Heading: "Latency percentiles",
		Text: "From each flood's HdrHistogram, latencies measured from every request's intended send time, so a load generator that fell behind cannot hide them.",
		Plot: &p}
}

// percentileSeries is the percentile curve of h (microseconds) in
// milliseconds, floored at 0.01 ms for the log axis, and its largest x.
func percentileSeries(h *hdrhistogram.Histogram) (data []opts.LineData, maxX float64) {
	for _, p := range percentileCurve(h.TotalCount(), func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }) {
		data = append(data, xy(p[0], math.Max(p[1], 0.01)))
		maxX = math.Max(maxX, p[0])
	}
	return data, maxX
}

// percentileCurve samples a latency distribution of n values for a
// percentile plot: x is 1/(1−q), log-spaced from 1 (the minimum) to the
// resolution n allows, and y is value(q·100).
func percentileCurve(n int64, value func(q float64) float64) [][2]float64 {
	top := math.Min(float64(n), 1e5)
	var out [][2]float64
	for x := 1.0; x < top*1.0001; x *= math.Pow(10, 1.0/12) {
		out = append(out, [2]float64{x, value(100 * (1 - 1/x))})
	}
	if last := out[len(out)-1][0]; last < top {
		out = append(out, [2]float64{top, value(100 * (1 - 1/top))})
	}
	return out
}

// queueBlocks draw the server's line and its dead work over time, from the
// /stats samples until the line drained, beside the simulation's.
func queueBlocks(prefix string, runs []*results.Run, captions func([]*results.Run) (waiting, dead string)) []block {
	var sampled []*results.Run
	for _, r := range runs {
		if len(r.Samples) > 0 {
			sampled = append(sampled, r)
		}
	}
	if len(sampled) == 0 {
		return nil
	}
	end, last := 0.0, 0.0
	for _, r := range sampled {
		end = math.Max(end, r.DurationS)
		last = math.Max(last, r.Samples[len(r.Samples)-1].TS)
	}
	xAxis := axis{Name: "time since the flood started (s)", Min: 0, Max: axisMax(last)}
	waiting, dead := charts.NewLine(), charts.NewLine()
	waiting.SetGlobalOptions(common(prefix+"_waiting", xAxis, axis{Name: "requests waiting in line"}, "axis")...)
	dead.SetGlobalOptions(common(prefix+"_dead", xAxis, axis{Name: "dead work so far (requests)"}, "axis")...)
	for i, r := range sampled {
		var w, d []opts.LineData
		for _, smp := range r.Samples {
			w = append(w, xy(smp.TS, float64(smp.Stats.Waiting)))
			d = append(d, xy(smp.TS, float64(smp.Stats.Dead)))
		}
		mark := []charts.SeriesOpts(nil)
		if i == 0 {
			mark = markX(opts.MarkLineNameXAxisItem{Name: "sending stops", XAxis: num(end)})
		}
		waiting.AddSeries(r.Name, w, append(lineOpts(runColor(i), 2, "solid", false), mark...)...)
		dead.AddSeries(r.Name, d, append(lineOpts(runColor(i), 2, "solid", false), mark...)...)
	}
	// The simulation of each flood, dotted, in the same colour.
	for i, r := range sampled {
		res := simulateRun(r)
		if res == nil {
			continue
		}
		var w, d []opts.LineData
		for _, smp := range res.Samples {
			w = append(w, xy(smp.At.Seconds(), float64(smp.Waiting)))
			d = append(d, xy(smp.At.Seconds(), float64(smp.Dead)))
		}
		// The same name as the flood's, so its legend entry shows and
		// hides both; the tooltip tells them apart by id.
		sim := append(lineOpts(runColor(i), 1.5, "dotted", false), charts.WithSeriesId(fmt.Sprintf("sim-%d", i)))
		waiting.AddSeries(r.Name, w, sim...)
		dead.AddSeries(r.Name, d, sim...)
	}
	wCap, dCap := captions(sampled)
	tip := func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(simTooltip)}
	}
	wp := newPlot(prefix+"_waiting", 400, wCap, waiting, tip)
	dp := newPlot(prefix+"_dead", 360, dCap, dead, tip)
	return []block{
		{ID: prefix + "_waiting", Heading: "Queue depth over time", Text: "The server's own count of requests waiting for a slot, sampled every 100 ms from the start of the flood until the line was empty.", Plot: &wp},
		{ID: prefix + "_dead", Heading: "Dead work over time", Text: "Work the server completed after the client had given up: GPU time spent on answers nobody receives.", Plot: &dp},
	}
}

// simTooltip lists the measured and the simulated value of each run at one
// instant.
const simTooltip = `function (ps) { var s = ps[0].axisValueLabel + ' s'; ps.forEach(function (p) { var sim = String(p.seriesId).indexOf('sim-') === 0; s += '<br>' + p.marker + p.seriesName + (sim ? ' (simulated)' : '') + ': ' + p.value[1]; }); return s; }`

// simulateRun replays one flood in the discrete-event simulation, or
// returns nil if the run cannot be described to it (such as a run of an
// old document, which did not record its server's settings).
func simulateRun(r *results.Run) *model.SimResult {
	d, t := seconds(r.DurationS), seconds(r.TimeoutS)
	cfg, ok := fakegpu.FromRecord(r.Server)
	if !ok || d <= 0 || t <= 0 || !(r.OfferedRPS > 0) || r.OfferedRPS*r.DurationS > 1e6 {
		return nil
	}
	s := cfg.Sim()
	s.SampleEvery = 100 * time.Millisecond
	if r.SampleEveryMS > 0 {
		s.SampleEvery = time.Duration(r.SampleEveryMS * float64(time.Millisecond))
	}
	s.Clients = []model.SimClient{{Name: "flood", Rate: r.OfferedRPS, Duration: d, Timeout: t}}
	res, err := s.Run()
	if err != nil {
		return nil
	}
	return res
}
