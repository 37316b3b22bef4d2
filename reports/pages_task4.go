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

// task4Page is the page of task 4.
var task4Page = &taskPage{
	ID:    "task4",
	Title: "retries that help: full jitter, Retry-After, a retry budget, and the storm",
	Lead: "400 clients call task 2's shedding server (8 slots of 100 ms, a line of 16) at the same instant and retry what is shed, with backoff from 100 ms capped at 5 s and 12 tries: the ideal is 400 × 100 ms / 8 slots = 5 s. " +
		"Without jitter the clients that were refused together retry together; full jitter spreads them out; a server that spreads its Retry-After schedules them. " +
		"Then the retry amplifier: 100 calls a second for 10 s against the unprotected server, retried at once or within a budget.",
	Draws: func(doc *results.Document) bool { return len(doc.Storms) > 0 },
	Build: buildTask4,
}

func buildTask4(s *site, _ []*results.Run) []block {
	var storms, amps []*results.Storm
	for _, st := range s.doc.Storms {
		switch {
		case st == nil:
		case st.Kind == "amplify":
			amps = append(amps, st)
		default:
			storms = append(storms, st)
		}
	}
	var blocks []block
	if len(storms) > 0 {
		blocks = append(blocks, sendsBlock("t4_sends", storms), stormTimeBlock("t4_time", storms))
	}
	if len(amps) > 0 {
		blocks = append(blocks, amplifierBlock("t4_amplify", amps))
	}
	if len(blocks) == 0 {
		blocks = append(blocks, block{ID: "no-storms", Heading: "No storms", Text: "This document holds no storms for this task: they were skipped (see the checks) or the run stopped early."})
	}
	return blocks
}

// panel is one of several charts stacked one above the other on a shared
// time axis, each with its own y axis.
type panel struct {
	Title string // above the panel, on the right
	YName string // the y axis's title, with its unit
	YMax  any    // nil to fit the data
}

// Geometry of stacked panels, in pixels.
const (
	panelLeft   = 78 // room for the y labels and the vertical y title
	panelRight  = 36
	panelTitleH = 26 // above each panel, for its title
	panelGap    = 22 // under each panel, for its x labels
	panelBottom = 44 // under the last, for the x axis's title
)

// panelChart lays out c's grids and axes as panels of height h, sharing
// the x axis x (its title is drawn under the last panel). A series draws
// in panel i with XAxisIndex and YAxisIndex i. top leaves room for a
// legend. It returns the chart's height and the tweak that places the
// panels' titles, for newPlot.
func panelChart(c *charts.RectChart, id string, x axis, panels []panel, h, top int, legend bool) (int, func(map[string]any)) {
	grids := make([]opts.Grid, len(panels))
	for i := range panels {
		grids[i] = opts.Grid{Left: strconv.Itoa(panelLeft), Right: strconv.Itoa(panelRight),
			Top: strconv.Itoa(top + i*(panelTitleH+h+panelGap) + panelTitleH), Height: strconv.Itoa(h)}
	}
	c.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: id, AssetsHost: "./"}),
		charts.WithAnimation(false),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(legend), Top: "0", Left: "center", Type: "plain"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithGridOpts(grids...),
	)
	for i, p := range panels {
		xa := x.x()
		xa.GridIndex = i
		if i < len(panels)-1 {
			xa.Name = "" // the shared title goes under the last panel only
		}
		ya := axis{Name: p.YName, Min: 0, Max: p.YMax}.y()
		ya.GridIndex = i
		ya.AxisLabel = &opts.AxisLabel{Show: opts.Bool(true)}
		if i == 0 {
			c.XAxisList[0], c.YAxisList[0] = xa, ya
		} else {
			c.ExtendXAxis(xa)
			c.ExtendYAxis(ya)
		}
	}
	height := top + len(panels)*(panelTitleH+h+panelGap) - panelGap + panelBottom
	return height, func(m map[string]any) {
		// Grids: the tweak only places a single one.
		gs := make([]any, len(grids))
		for i, g := range grids {
			gs[i] = toMap(g)
		}
		m["grid"] = gs
		// The y titles run up the side of each panel, where they cannot
		// meet the panel's title.
		if ys, ok := m["yAxis"].([]any); ok {
			for _, y := range ys {
				if mm, ok := y.(map[string]any); ok {
					mm["nameLocation"] = "middle"
					mm["nameRotate"] = 90
					mm["nameGap"] = 44
					mm["nameTextStyle"] = map[string]any{"color": colorOther, "fontSize": 12}
				}
			}
		}
		var titles []any
		for i, p := range panels {
			titles = append(titles, map[string]any{
				"text": p.Title, "right": panelRight, "top": top + i*(panelTitleH+h+panelGap) + 2,
				"textStyle": map[string]any{"fontSize": 13, "fontWeight": "bold", "color": colorInk},
			})
		}
		m["title"] = titles
		// One pointer across every panel, at the same instant.
		m["axisPointer"] = map[string]any{"link": []any{map[string]any{"xAxisIndex": "all"}}}
	}
}

// stormLabel shortens a storm's name for a legend or an axis: "storm 400,
// full jitter" becomes "full jitter".
func stormLabel(st *results.Storm) string {
	name := st.Name
	if i := strings.IndexByte(name, ','); i >= 0 && strings.HasPrefix(name, "storm ") {
		name = strings.TrimSpace(name[i+1:])
	}
	return name
}

// sendsBlock draws every storm's attempts per bin, one panel per storm on
// a shared time axis: lockstep waves are tall bars with silence between,
// spread retries a continuous mass.
func sendsBlock(id string, storms []*results.Storm) block {
	end := 0.0
	for _, st := range storms {
		bin := st.BinMS / 1000
		end = math.Max(end, math.Max(st.LastDoneS, float64(len(st.SendsPerBin))*bin))
	}
	bar := charts.NewBar()
	panels := make([]panel, len(storms))
	for i, st := range storms {
		bin := st.BinMS / 1000
		if bin <= 0 {
			bin = 0.25
		}
		// Every storm starts with all its clients at once: that first bin
		// would flatten everything after it, so the scale fits the rest and
		// the first bar is cut, with its value written on it.
		rest := int64(1)
		for _, n := range st.SendsPerBin[min(1, len(st.SendsPerBin)):] {
			rest = max(rest, n)
		}
		ymax := roundUp2(1.1 * float64(rest))
		panels[i] = panel{YName: "sends / " + strconv.FormatFloat(st.BinMS, 'f', -1, 64) + " ms", YMax: ymax,
			Title: fmt.Sprintf("%s: %d attempts, last client done %.1f s, %.0f%% of bins empty", stormLabel(st), st.ServerReceived, st.LastDoneS, 100*st.EmptyShare)}
		var data []opts.BarData
		for k, n := range st.SendsPerBin {
			d := opts.BarData{Value: []float64{num((float64(k) + 0.5) * bin), float64(n)}}
			if float64(n) > ymax {
				d.Label = &opts.Label{Show: opts.Bool(true), Position: "insideTopLeft", Color: colorInk, Formatter: fmt.Sprintf("%d ↑", n)}
			}
			data = append(data, d)
		}
		sopts := []charts.SeriesOpts{
			charts.WithBarChartOpts(opts.BarChart{XAxisIndex: i, YAxisIndex: i, BarWidth: "85%"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: runColor(i)}),
		}
		var marks []opts.MarkLineNameXAxisItem
		if st.IdealS > 0 {
			marks = append(marks, opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("ideal %.0f s", st.IdealS), XAxis: num(st.IdealS)})
		}
		if st.SimulatedS > 0 {
			marks = append(marks, opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("simulated %.1f s", st.SimulatedS), XAxis: num(st.SimulatedS)})
		}
		if len(marks) > 0 {
			sopts = append(sopts, markX(marks...)...)
		}
		bar.AddSeries(st.Name, data, sopts...)
	}
	height, layout := panelChart(&bar.RectChart, id, axis{Name: "time since the storm started (s)", Min: 0, Max: axisMax(end)}, panels, 110, 6, false)
	p := newPlot(id, height, sendsCaption(storms), bar, func(m map[string]any) {
		layout(m)
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(
			`function (ps) { var s = ''; ps.forEach(function (p) { var t = p.value[0]; s += (s ? '<br>' : '') + p.marker + p.seriesName + ': ' + p.value[1] + ' sends around ' + t + ' s'; }); return s; }`)}
	})
	return block{ID: id, Heading: "Sends per 250 ms: lockstep waves or spread retries",
		Text: "Every attempt each storm's clients made (first tries and retries), counted in 250 ms bins from the instant the 400 clients started, one panel per storm on the same time axis. Each panel has its own scale; the first bin, where all 400 clients start at once, is cut and its count written on it.",
		Plot: &p}
}

// roundUp2 rounds v up to two significant figures.
func roundUp2(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v))-1)
	return math.Ceil(v/p-1e-9) * p
}

func sendsCaption(storms []*results.Storm) string {
	var lock, spread *results.Storm
	for _, st := range storms {
		switch {
		case !st.Jitter && !st.HonorRetryAfter && lock == nil:
			lock = st
		case st.Jitter && !st.HonorRetryAfter && spread == nil:
			spread = st
		}
	}
	if lock == nil || spread == nil {
		return "Lockstep retries come in waves with silence between them; jittered retries fill every bin."
	}
	return fmt.Sprintf("Without jitter the refused clients come back together: waves with silence between them (%.0f%% of the bins empty), each admitting only what 8 slots and a line of 16 hold, so the storm lasts %.1f s. Full jitter fills the gaps (%.0f%% empty) and is done in %.1f s.",
		100*lock.EmptyShare, lock.LastDoneS, 100*spread.EmptyShare, spread.LastDoneS)
}

// stormTimeBlock compares each storm's length and attempts with the ideal:
// side by side, the time until the last call ended and the attempts the
// server received, and a table of the numbers.
func stormTimeBlock(id string, storms []*results.Storm) block {
	names := make([]string, len(storms))
	for i, st := range storms {
		names[i] = stormLabel(st)
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{ChartID: id, AssetsHost: "./"}),
		charts.WithAnimation(false),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}),
		charts.WithGridOpts(
			opts.Grid{Left: "30", Width: "44%", Top: "40", Bottom: "44", ContainLabel: opts.Bool(true)},
			opts.Grid{Right: "36", Width: "40%", Top: "40", Bottom: "44", ContainLabel: opts.Bool(true)}),
	)
	bar.XAxisList[0] = axis{Name: "last call done (s)", Min: 0}.x()
	bar.YAxisList[0] = axis{Type: "category", Data: names, Inverse: true}.y()
	x1 := axis{Name: "attempts the server received", Min: 0}.x()
	x1.GridIndex = 1
	y1 := axis{Type: "category", Data: names, Inverse: true}.y()
	y1.GridIndex = 1
	y1.AxisLabel = &opts.AxisLabel{Show: opts.Bool(false)}
	bar.ExtendXAxis(x1)
	bar.ExtendYAxis(y1)
	for i := range bar.YAxisList {
		if bar.YAxisList[i].AxisLabel == nil {
			bar.YAxisList[i].AxisLabel = &opts.AxisLabel{Show: opts.Bool(true)}
		}
	}
	var times, attempts []opts.BarData
	ideal, clients := 0.0, 0
	for i, st := range storms {
		times = append(times, opts.BarData{Value: math.Round(st.LastDoneS*10) / 10, ItemStyle: &opts.ItemStyle{Color: runColor(i)}})
		attempts = append(attempts, opts.BarData{Value: st.ServerReceived, ItemStyle: &opts.ItemStyle{Color: runColor(i)}})
		ideal = math.Max(ideal, st.IdealS)
		clients = max(clients, st.Clients)
	}
	label := charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "right", Color: colorOther})
	// The category axis runs downwards, so a mark line starts at the top:
	// its label goes there, clear of the axis labels.
	mark := func(name string, x any) []charts.SeriesOpts {
		return []charts.SeriesOpts{charts.WithMarkLineNameXAxisItemOpts(opts.MarkLineNameXAxisItem{Name: name, XAxis: x}),
			charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
				LineStyle: &opts.LineStyle{Color: colorInk, Type: "dashed", Width: 1.5},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Color: colorInk, Position: "start"}})}
	}
	timeOpts := []charts.SeriesOpts{label, charts.WithBarChartOpts(opts.BarChart{BarWidth: "55%"})}
	if ideal > 0 {
		timeOpts = append(timeOpts, mark(fmt.Sprintf("ideal %.0f s", ideal), num(ideal))...)
	}
	bar.AddSeries("last call done (s)", times, timeOpts...)
	attemptOpts := []charts.SeriesOpts{label, charts.WithBarChartOpts(opts.BarChart{XAxisIndex: 1, YAxisIndex: 1, BarWidth: "55%"})}
	if clients > 0 {
		attemptOpts = append(attemptOpts, mark(fmt.Sprintf("ideal: one each, %d", clients), clients)...)
	}
	bar.AddSeries("attempts the server received", attempts, attemptOpts...)
	p := newPlot(id, 90+44*len(storms), stormTimeCaption(storms), bar, func(m map[string]any) {
		if xs, ok := m["xAxis"].([]any); ok {
			for _, x := range xs {
				if mm, ok := x.(map[string]any); ok {
					mm["nameGap"] = 26
				}
			}
		}
	})

	t := &table{Class: "runs", Head: []string{"storm", "jitter", "Retry-After", "attempts", "per client", "succeeded", "gave up", "last done", "× ideal", "empty bins", "peak / mean"}}
	for _, st := range storms {
		per, times := "–", "–"
		if st.Clients > 0 {
			per = fmt.Sprintf("%.1f", float64(st.ServerReceived)/float64(st.Clients))
		}
		if st.IdealS > 0 {
			times = fmt.Sprintf("%.1f×", st.LastDoneS/st.IdealS)
		}
		done := fmt.Sprintf("%.1f s", st.LastDoneS)
		cls := ""
		if st.TimedOut {
			done += " (time limit)"
			cls = "warn"
		}
		t.Rows = append(t.Rows, []cell{{Text: st.Name, Class: "name"}, textCell(yesNo(st.Jitter)), textCell(honoured(st.HonorRetryAfter)),
			numCell(strconv.FormatInt(st.ServerReceived, 10)), numCell(per),
			numCell(fmt.Sprintf("%d of %d", st.Succeeded, st.Clients)), numCell(strconv.FormatInt(st.Failed, 10)),
			{Text: done, Class: strings.TrimSpace("num " + cls)}, numCell(times),
			numCell(fmt.Sprintf("%.0f%%", 100*st.EmptyShare)), numCell(fmt.Sprintf("%.1f", st.PeakToMean))})
	}
	return block{ID: id, Heading: "Storm time and attempts against the ideal",
		Text: "How long each storm took until its last call ended, and how many attempts the server counted, beside the ideal: 400 requests of 100 ms on 8 slots take 5 s, with one attempt each.",
		Plot: &p, Table: t}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func honoured(b bool) string {
	if b {
		return "honoured, spread by the server"
	}
	return "ignored"
}

func stormTimeCaption(storms []*results.Storm) string {
	var parts []string
	for _, st := range storms {
		parts = append(parts, fmt.Sprintf("%s %.1f s with %d attempts", stormLabel(st), st.LastDoneS, st.ServerReceived))
	}
	ideal := 0.0
	var jit, ra *results.Storm
	for _, st := range storms {
		ideal = math.Max(ideal, st.IdealS)
		switch {
		case st.Jitter && !st.HonorRetryAfter && jit == nil:
			jit = st
		case st.Jitter && st.HonorRetryAfter && ra == nil:
			ra = st
		}
	}
	verdict := ""
	switch {
	case jit == nil || ra == nil || ra.ServerReceived <= 0:
	case ra.LastDoneS < jit.LastDoneS:
		verdict = fmt.Sprintf(" Honouring a Retry-After the server spreads over its capacity comes closest, %.1f s sooner than jitter alone with %.1f× fewer attempts.",
			jit.LastDoneS-ra.LastDoneS, float64(jit.ServerReceived)/float64(ra.ServerReceived))
	default:
		verdict = " Here honouring the server's Retry-After did not beat jitter alone: the lesson's reference finishes about 1.5 s sooner with a third of the attempts."
	}
	return fmt.Sprintf("Against the ideal %.0f s: %s.%s", ideal, strings.Join(parts, "; "), verdict)
}

// receivedRates turns a storm's server samples into the attempts per second
// the server received, over windows of at least half a second, each point
// at the middle of its window.
func receivedRates(st *results.Storm) []opts.LineData {
	const window = 0.5
	var out []opts.LineData
	if len(st.ServerSamples) == 0 {
		return nil
	}
	last := st.ServerSamples[0]
	for _, s := range st.ServerSamples[1:] {
		dt := s.TS - last.TS
		if dt < 0.9*window {
			continue
		}
		out = append(out, xy((s.TS+last.TS)/2, float64(s.Stats.Received-last.Stats.Received)/dt))
		last = s
	}
	return out
}

// amplifierBlock draws the attempts per second the server received from
// each amplifier run, with the offered rate marked.
func amplifierBlock(id string, amps []*results.Storm) block {
	line := charts.NewLine()
	end, offered, dur, ymax := 0.0, 0.0, 0.0, 0.0
	for i, st := range amps {
		data := receivedRates(st)
		for _, d := range data {
			ymax = math.Max(ymax, d.Value.([]float64)[1])
		}
		if n := len(st.ServerSamples); n > 0 {
			end = math.Max(end, st.ServerSamples[n-1].TS)
		}
		offered = math.Max(offered, st.OfferedRPS)
		dur = math.Max(dur, st.DurationS)
		// The offered rate on the first series, labelled inside the chart
		// at its right end; the end of the calls on the second, above it.
		var marks []charts.SeriesOpts
		markStyle := func(pos string) charts.SeriesOpts {
			return charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
				LineStyle: &opts.LineStyle{Color: colorInk, Type: "dashed", Width: 1.5},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Color: colorInk, Position: pos}})
		}
		if i == 0 && st.OfferedRPS > 0 {
			marks = append(marks, charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: "offered " + fmtRate(st.OfferedRPS), YAxis: st.OfferedRPS}),
				markStyle("insideEndTop"))
		}
		if i == min(1, len(amps)-1) && st.DurationS > 0 {
			marks = append(marks, charts.WithMarkLineNameXAxisItemOpts(opts.MarkLineNameXAxisItem{Name: "calls stop", XAxis: num(st.DurationS)}))
			if i != 0 {
				marks = append(marks, markStyle("end"))
			}
		}
		// Immediate retries red, the budget blue; anything else by order.
		color := runColor(i)
		if len(amps) == 2 && (amps[0].Budget > 0) != (amps[1].Budget > 0) {
			color = colorTimeout
			if st.Budget > 0 {
				color = colorShed
			}
		}
		line.AddSeries(st.Name, data, append(lineOpts(color, 2, "solid", true), marks...)...)
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "time since the first call (s)", Min: 0, Max: math.Ceil(math.Max(end, dur)/5) * 5},
		axis{Name: "attempts the server received per second", Min: 0, Max: niceCeil(math.Max(ymax, 4*offered) * 1.05)}, "axis")...)
	p := newPlot(id, 380, amplifierCaption(amps), line, axisTip(" s", " attempts/s"))
	return block{ID: id, Heading: "The retry amplifier: what the server received",
		Text: "100 calls a second for 10 s against the unprotected server (80 requests/s of capacity, an unbounded line), each call allowed 4 attempts. The rate is the difference of the server's own received counter between samples, so it does not depend on the code under test.",
		Plot: &p}
}

func amplifierCaption(amps []*results.Storm) string {
	var parts []string
	for _, st := range amps {
		a, ok1 := st.ReceivedRate(0, st.DurationS/2)
		b, ok2 := st.ReceivedRate(st.DurationS/2, st.DurationS)
		if !ok1 || !ok2 || st.DurationS <= 0 {
			continue
		}
		what := "immediate retries"
		if st.Budget > 0 {
			what = fmt.Sprintf("a %.0f%% budget", 100*st.Budget)
		}
		parts = append(parts, fmt.Sprintf("with %s the server received %.0f/s, then %.0f/s in the second half (%.1f× the offered %s)",
			what, a, b, b/st.OfferedRPS, fmtRate(st.OfferedRPS)))
	}
	if len(parts) == 0 {
		return "Immediate retries multiply the load on a server that is already behind; a retry budget keeps it near what was offered."
	}
	return "Once the line is over a second long every call times out and is sent again: " + strings.Join(parts, "; ") + ". The budget turns failures into fast failures instead of more load."
}
