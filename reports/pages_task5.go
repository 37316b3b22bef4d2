package reports

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/results"
)

// task5Page is the page of task 5.
var task5Page = &taskPage{
	ID:    "task5",
	Title: "a polite client: the whole job at the provider's rate",
	Lead: "Up to five strategies run the same job of relevance judgments against a fake LLM API that limits requests and input tokens per minute, each with its own key: " +
		"naive sends everything at once and gives up on a 429, sleep1 sleeps a second and retries, polite paces itself under both limits, polite-cached also puts the shared instructions in the prompt cache, " +
		"and batch hands the whole job to the Message Batches API, at half the price. " +
		"Every count here is the API's own.",
	Draws: func(doc *results.Document) bool { return doc.Judge != nil },
	Build: buildTask5,
}

func buildTask5(s *site, _ []*results.Run) []block {
	rep := s.doc.Judge
	if rep == nil {
		return []block{{ID: "no-judge", Heading: "No judge report", Text: "This document holds no judge report: the judge was skipped (see the checks) or the run stopped early."}}
	}
	if len(rep.Strategies) == 0 {
		return []block{{ID: "no-judge", Heading: "No judge report", Text: "This document's judge report holds no strategy."}}
	}
	sts := rep.Strategies
	blocks := []block{
		judgeOutcomeBlock("t5_outcome", sts),
		judgeTimeBlock("t5_time", sts),
		judgeTimelineBlock("t5_timeline", sts),
		judgeRequestsBlock("t5_requests", sts),
	}
	if judgeCosted(sts) {
		blocks = append(blocks, judgeCostBlock("t5_cost", rep))
	}
	return append(blocks, block{ID: "t5_table", Heading: "The strategies", Table: judgeTable(sts),
		Text: fmt.Sprintf("The API's counts per strategy key. The job: %d judgments of %d prompt tokens, %d of them the shared instructions; the API allows %s requests and %s input tokens a minute.",
			rep.Workload.N, rep.Workload.PromptTokens, rep.Workload.PrefixTokens, thousands(float64(rep.Limits.RequestsPerMinute)), thousands(float64(rep.Limits.InputTokensPerMinute)))})
}

// judgeCosted says whether the report records costs: reports from before
// the API had prices have none.
func judgeCosted(sts []results.JudgeStrategy) bool {
	return slices.ContainsFunc(sts, func(st results.JudgeStrategy) bool { return st.CostUSD > 0 })
}

// judgeCostBlock draws what each strategy's job cost, and compares the
// batch strategy with the polite client: time to all N and cost.
func judgeCostBlock(id string, rep *results.JudgeReport) block {
	sts := rep.Strategies
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "strategy", Type: "category", Data: strategyNames(sts)},
		axis{Name: "cost (US dollars)", Min: 0}, "axis")...)
	bar.SetXAxis(strategyNames(sts))
	bar.AddSeries("cost", barValues(sts, func(st results.JudgeStrategy) float64 { return math.Round(100*st.CostUSD) / 100 }),
		charts.WithBarChartOpts(opts.BarChart{BarWidth: "45%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorSent}),
		charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "top", Formatter: "${c}", Color: colorInk}))
	var parts []string
	for _, st := range sts {
		parts = append(parts, fmt.Sprintf("%s %s", st.Name, fmtUSD(st.CostUSD)))
	}
	caption := "What each strategy's requests cost: " + strings.Join(parts, ", ") + "."
	if b, ok := strategyByName(sts, "batch"); ok {
		if pol, ok := strategyByName(sts, "polite"); ok && pol.CostUSD > 0 {
			caption = fmt.Sprintf("batch judged %s of %s in %.1f s (minimum %s, its batch throughput) for %s, %.0f%% of what polite paid for %s in %.1f s: "+
				"the API did the pacing, and no request was refused. ",
				thousands(float64(b.Completed)), thousands(float64(b.N)), b.WallSeconds, fmtSeconds(num(b.MinSeconds)), fmtUSD(b.CostUSD),
				100*b.CostUSD/pol.CostUSD, thousands(float64(pol.Completed)), pol.WallSeconds) + caption
		}
		if pc, ok := strategyByName(sts, "polite-cached"); ok && pc.CostUSD > 0 && pc.CostUSD < b.CostUSD {
			caption += fmt.Sprintf(" Caching the shared instructions cost less still (polite-cached %s): cache reads cost a tenth of input, and this fake's batches do not cache.", fmtUSD(pc.CostUSD))
		}
	}
	p := newPlot(id, 340, caption, bar, nil)
	pr := rep.Limits.Prices
	return block{ID: id, Heading: "What the job cost",
		Text: fmt.Sprintf("Each strategy's tokens at the fake API's illustrative prices, in US dollars per million tokens: %s input, %s output, %s cache writes, %s cache reads; batched tokens at %.0f%% of those.",
			fmtUSD(pr.InputUSDPerMTok), fmtUSD(pr.OutputUSDPerMTok), fmtUSD(pr.CacheWriteUSDPerMTok), fmtUSD(pr.CacheReadUSDPerMTok), 100*results.BatchPriceFraction),
		Plot: &p}
}

// fmtUSD writes dollars with cents, such as $19.11.
func fmtUSD(v float64) string { return fmt.Sprintf("$%.2f", v) }

func strategyNames(sts []results.JudgeStrategy) []string {
	names := make([]string, len(sts))
	for i, st := range sts {
		names[i] = st.Name
	}
	return names
}

func barValues(sts []results.JudgeStrategy, v func(results.JudgeStrategy) float64) []opts.BarData {
	data := make([]opts.BarData, len(sts))
	for i, st := range sts {
		data[i] = opts.BarData{Value: num(v(st))}
	}
	return data
}

func strategyByName(sts []results.JudgeStrategy, name string) (results.JudgeStrategy, bool) {
	for _, st := range sts {
		if st.Name == name {
			return st, true
		}
	}
	return results.JudgeStrategy{}, false
}

func percentOf(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// judgeOutcomeBlock stacks each strategy's completed and lost judgments.
func judgeOutcomeBlock(id string, sts []results.JudgeStrategy) block {
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "strategy", Type: "category", Data: strategyNames(sts)},
		axis{Name: "judgments (of the job's N)", Min: 0}, "axis")...)
	bar.SetXAxis(strategyNames(sts))
	bar.AddSeries("completed (200)", barValues(sts, func(st results.JudgeStrategy) float64 { return float64(st.Completed) }),
		charts.WithBarChartOpts(opts.BarChart{Stack: "job", BarWidth: "45%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorOK}))
	bar.AddSeries("lost (given up or not finished)", barValues(sts, func(st results.JudgeStrategy) float64 { return float64(st.Lost) }),
		charts.WithBarChartOpts(opts.BarChart{Stack: "job", BarWidth: "45%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorTimeout}))
	var parts []string
	for _, st := range sts {
		if st.Lost > 0 {
			parts = append(parts, fmt.Sprintf("%s lost %s of %s (%.0f%%)", st.Name, thousands(float64(st.Lost)), thousands(float64(st.N)), percentOf(st.Lost, int64(st.N))))
		} else {
			parts = append(parts, fmt.Sprintf("%s finished all %s", st.Name, thousands(float64(st.N))))
		}
	}
	caption := "A strategy that gives up on a 429 loses the judgments the limit refused: " + strings.Join(parts, "; ") + "."
	p := newPlot(id, 340, caption, bar, nil)
	return block{ID: id, Heading: "Judgments completed and lost",
		Text: "Each strategy's judgments the API answered 200, and those it never got an answer for.", Plot: &p}
}

// judgeTimeBlock draws each strategy's wall time beside its theoretical
// minimum.
func judgeTimeBlock(id string, sts []results.JudgeStrategy) block {
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "strategy", Type: "category", Data: strategyNames(sts)},
		axis{Name: "time (s)", Min: 0}, "axis")...)
	bar.SetXAxis(strategyNames(sts))
	minData := make([]opts.BarData, len(sts))
	for i, st := range sts {
		minData[i] = opts.BarData{Value: num(st.MinSeconds), Name: "bound by " + strings.ReplaceAll(st.MinBoundBy, "_", " ")}
	}
	bar.AddSeries("theoretical minimum", minData,
		charts.WithBarChartOpts(opts.BarChart{BarGap: "10%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorSent}),
		charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "top", Formatter: "min {c} s", Color: colorOther}))
	bar.AddSeries("wall time", barValues(sts, func(st results.JudgeStrategy) float64 { return st.WallSeconds }),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorShed}),
		charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "top", Formatter: "{c} s", Color: colorInk}))
	var parts []string
	for _, st := range sts {
		parts = append(parts, fmt.Sprintf("%s %.2f×", st.Name, st.Ratio))
	}
	caption := "Wall time over the minimum: " + strings.Join(parts, ", ") + "."
	if pol, ok := strategyByName(sts, "polite"); ok {
		caption = fmt.Sprintf("The polite client finishes all %s in %.2f× the minimum of %s (bound by %s) with %s 429s. ", thousands(float64(pol.Completed)), pol.Ratio,
			fmtSeconds(pol.MinSeconds), strings.ReplaceAll(pol.MinBoundBy, "_", " "), zeroOrCount(pol.Rejected429)) + caption
		if n, ok := strategyByName(sts, "naive"); ok && n.Lost > 0 {
			caption += fmt.Sprintf(" Naive is only fast because it stops early, having lost %.0f%%.", percentOf(n.Lost, int64(n.N)))
		}
	}
	p := newPlot(id, 360, caption, bar, nil)
	return block{ID: id, Heading: "Wall time against the theoretical minimum",
		Text: "From each strategy's first request to its last answer, beside the least the limits allow: the job's requests over the request rate, or its uncached input tokens over the input-token rate, whichever is longer.",
		Plot: &p}
}

// judgeTimelineBlock draws each strategy's judgments done over time, from
// the judge's timeline of when its calls returned, beside the fastest the
// limits allow: N at an even pace over the theoretical minimum. A report
// from before timelines were recorded gets a note instead of the chart.
func judgeTimelineBlock(id string, sts []results.JudgeStrategy) block {
	const heading = "Judgments done over time"
	line := charts.NewLine()
	end, top := 0.0, 0.0
	var parts, missing []string
	drawn := 0
	// finish is a strategy that did its whole job: n judgments by at
	// seconds, against a minimum of min seconds.
	type finish struct{ n, at, min float64 }
	finished := map[string]finish{}
	for i, st := range sts {
		top = math.Max(top, float64(st.N))
		tl := st.Timeline
		if tl == nil || tl.BinMS <= 0 || len(tl.OK) == 0 {
			missing = append(missing, st.Name)
			continue
		}
		ok, done, at := cumulative(tl.OK, tl.BinMS/1000, st.WallSeconds)
		line.AddSeries(st.Name, ok, lineOpts(runColor(i), 2, "solid", false)...)
		drawn++
		if len(tl.Failed) > 0 {
			failed, _, _ := cumulative(tl.Failed, tl.BinMS/1000, st.WallSeconds)
			line.AddSeries(st.Name+" · failed", failed, lineOpts(runColor(i), 1.5, "dashed", false)...)
		}
		end = math.Max(end, float64(len(tl.OK))*tl.BinMS/1000)
		if done >= int64(st.N) {
			finished[st.Name] = finish{n: float64(done), at: at, min: st.MinSeconds}
			parts = append(parts, fmt.Sprintf("%s is done at %.1f s (minimum %s)", st.Name, at, fmtSeconds(num(st.MinSeconds))))
		} else {
			parts = append(parts, fmt.Sprintf("%s levels off at %s of %s", st.Name, thousands(float64(done)), thousands(float64(st.N))))
		}
	}
	if drawn == 0 {
		return block{ID: id, Heading: heading,
			Text: "This report holds no timeline of the judgments: it was written by a judge that did not record when calls returned. Grade task 5 again to draw it."}
	}
	// The fastest possible: N at an even pace over each distinct minimum,
	// sampled as finely as the timelines so the tooltip can read it anywhere;
	// the first dashed, the others dotted.
	seen := map[[2]float64]bool{}
	dash := "dashed"
	for _, st := range sts {
		key := [2]float64{st.MinSeconds, float64(st.N)}
		if st.MinSeconds <= 0 || st.N <= 0 || seen[key] {
			continue
		}
		seen[key] = true
		var data []opts.LineData
		step := results.JudgeTimelineBin.Seconds()
		for k := 0; k <= int(math.Ceil(st.MinSeconds/step)); k++ {
			t := math.Min(float64(k)*step, st.MinSeconds)
			data = append(data, xy(t, float64(st.N)*t/st.MinSeconds))
		}
		end = math.Max(end, st.MinSeconds)
		line.AddSeries(fmt.Sprintf("minimum %s (%s)", fmtSeconds(num(st.MinSeconds)), strings.ReplaceAll(st.MinBoundBy, "_", " ")), data,
			lineOpts(colorInk, 1.5, dash, false)...)
		dash = "dotted"
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "time since the strategy's first request (s)", Min: 0, Max: axisMax(end)},
		axis{Name: "judgments done (cumulative)", Min: 0, Max: niceCeil(top)}, "axis")...)
	caption := "The closer a line keeps to the ink line of its minimum, the better the strategy spends the limits: " + strings.Join(parts, "; ") + "."
	if s1, ok := finished["sleep1"]; ok && s1.at > 0 && s1.min > 0 {
		caption += fmt.Sprintf(" sleep1 averages %.0f judgments/s where the limits allow %.0f/s: its retries come back in waves a second apart, and the refill between the waves goes unused.",
			s1.n/s1.at, s1.n/s1.min)
	}
	text := fmt.Sprintf("Judgments answered 200 as each strategy's calls returned, counted by the judge in bins of %s from the strategy's first request; dashed in a strategy's colour, the calls that returned an error.",
		binWords(sts))
	if len(missing) > 0 {
		text += " No timeline for " + strings.Join(missing, ", ") + "."
	}
	p := newPlot(id, 380, caption, line, axisTip(" s", " judgments"))
	return block{ID: id, Heading: heading, Text: text, Plot: &p}
}

// cumulative returns the running sum of counts per bin of bin seconds as a
// line from (0, 0) through the end of each bin, the last cut at wall
// seconds if that is sooner; the sum; and the time the sum last grew.
func cumulative(counts []int64, bin, wall float64) ([]opts.LineData, int64, float64) {
	data := []opts.LineData{xy(0, 0)}
	sum, grew := int64(0), 0.0
	for k, c := range counts {
		t := float64(k+1) * bin
		if k == len(counts)-1 && wall > float64(k)*bin {
			t = math.Min(t, wall)
		}
		sum += c
		if c > 0 {
			grew = t
		}
		data = append(data, xy(t, float64(sum)))
	}
	return data, sum, grew
}

// binWords names the timelines' bin width, such as "250 ms", or each one
// if they differ.
func binWords(sts []results.JudgeStrategy) string {
	var widths []string
	for _, st := range sts {
		if st.Timeline == nil || st.Timeline.BinMS <= 0 {
			continue
		}
		w := fmt.Sprintf("%s ms", thousands(st.Timeline.BinMS))
		if !slices.Contains(widths, w) {
			widths = append(widths, w)
		}
	}
	if len(widths) == 1 {
		return widths[0]
	}
	return strings.Join(widths, ", ") + " (wider for longer runs)"
}

func zeroOrCount(n int64) string {
	if n == 0 {
		return "no"
	}
	return thousands(float64(n))
}

// judgeRequestsBlock draws each strategy's requests and 429s.
func judgeRequestsBlock(id string, sts []results.JudgeStrategy) block {
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "strategy", Type: "category", Data: strategyNames(sts)},
		axis{Name: "requests", Min: 0}, "axis")...)
	bar.SetXAxis(strategyNames(sts))
	bar.AddSeries("attempts (every request sent)", barValues(sts, func(st results.JudgeStrategy) float64 { return float64(st.Attempts) }),
		charts.WithBarChartOpts(opts.BarChart{BarGap: "10%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorSent}))
	bar.AddSeries("429 limited", barValues(sts, func(st results.JudgeStrategy) float64 { return float64(st.Rejected429) }),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: colorLimited}))
	var parts []string
	for _, st := range sts {
		parts = append(parts, fmt.Sprintf("%s %s of %s (%.0f%%)", st.Name, thousands(float64(st.Rejected429)), thousands(float64(st.Attempts)), percentOf(st.Rejected429, st.Attempts)))
	}
	caption := "Every 429 is a request the provider refused and counts against the client: " + strings.Join(parts, ", ") + "."
	if s1, ok := strategyByName(sts, "sleep1"); ok && s1.Completed > 0 {
		caption += fmt.Sprintf(" Sleeping and retrying finishes the job, but sends %.1f requests per judgment.", float64(s1.Attempts)/float64(s1.Completed))
	}
	p := newPlot(id, 340, caption, bar, nil)
	return block{ID: id, Heading: "Requests sent and refused", Text: "The API's count of each strategy's requests, and of the 429s among them.", Plot: &p}
}

// judgeTable lists the strategies, with a column for the time to all but
// the last judgments when the report records it, and a cost column when it
// records costs.
func judgeTable(sts []results.JudgeStrategy) *table {
	costed := judgeCosted(sts)
	most := slices.ContainsFunc(sts, func(st results.JudgeStrategy) bool { return st.MostSeconds > 0 })
	t := &table{Class: "runs", Head: []string{"strategy", "N", "completed", "lost", "attempts", "429", "529", "wall"}}
	if most {
		t.Head = append(t.Head, fmt.Sprintf("%.0f%% done", 100*(1-results.JudgeTailShare)))
	}
	t.Head = append(t.Head, "minimum", "ratio", "timed out")
	if costed {
		t.Head = append(t.Head, "cost")
	}
	for _, st := range sts {
		row := []cell{{Text: st.Name, Class: "name"}, numCell(thousands(float64(st.N))), numCell(thousands(float64(st.Completed))),
			numCell(thousands(float64(st.Lost))), numCell(thousands(float64(st.Attempts))), numCell(thousands(float64(st.Rejected429))),
			numCell(thousands(float64(st.Overloaded529))), numCell(fmt.Sprintf("%.2f s", st.WallSeconds))}
		if most {
			done := "–"
			if st.MostSeconds > 0 {
				done = fmt.Sprintf("%.2f s", st.MostSeconds)
			}
			row = append(row, numCell(done))
		}
		row = append(row, numCell(fmt.Sprintf("%.2f s", st.MinSeconds)), numCell(fmt.Sprintf("%.2f×", st.Ratio)), textCell(yesNo(st.TimedOut)))
		if costed {
			row = append(row, numCell(fmtUSD(st.CostUSD)))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
