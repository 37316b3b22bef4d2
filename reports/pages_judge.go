package reports

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/provider"
	"ratelab/results"
)

func init() {
	registerPage(&taskPage{
		ID:    "task5",
		Title: "a polite client: the whole job at the provider's rate",
		Lead: "Four strategies run the same job of relevance judgments against a fake LLM API that limits requests and input tokens per minute, each with its own key: " +
			"naive sends everything at once and gives up on a 429, sleep1 sleeps a second and retries, polite paces itself under both limits, and polite-cached also puts the shared instructions in the prompt cache. " +
			"Every count here is the API's own.",
		Draws: func(doc *results.Document) bool { return len(doc.Judge) > 0 },
		Build: buildTask5,
	})
}

func buildTask5(s *site, _ []*results.Run) []block {
	var rep provider.JudgeReport
	if len(s.doc.Judge) == 0 {
		return []block{{ID: "no-judge", Heading: "No judge report", Text: "This document holds no judge report: the judge was skipped (see the checks) or the run stopped early."}}
	}
	if err := json.Unmarshal(s.doc.Judge, &rep); err != nil || len(rep.Strategies) == 0 {
		return []block{{ID: "no-judge", Heading: "No judge report", Text: "This document's judge report could not be read or holds no strategy."}}
	}
	sts := rep.Strategies
	return []block{
		judgeOutcomeBlock("t5_outcome", sts),
		judgeTimeBlock("t5_time", sts),
		judgeRequestsBlock("t5_requests", sts),
		{ID: "t5_table", Heading: "The strategies", Table: judgeTable(sts),
			Text: fmt.Sprintf("The API's counts per strategy key. The job: %d judgments of %d prompt tokens, %d of them the shared instructions; the API allows %s requests and %s input tokens a minute.",
				rep.Workload.N, rep.Workload.PromptTokens, rep.Workload.PrefixTokens, thousands(float64(rep.Limits.RequestsPerMinute)), thousands(float64(rep.Limits.InputTokensPerMinute)))},
	}
}

func strategyNames(sts []provider.StrategyResult) []string {
	names := make([]string, len(sts))
	for i, st := range sts {
		names[i] = st.Name
	}
	return names
}

func barValues(sts []provider.StrategyResult, v func(provider.StrategyResult) float64) []opts.BarData {
	data := make([]opts.BarData, len(sts))
	for i, st := range sts {
		data[i] = opts.BarData{Value: num(v(st))}
	}
	return data
}

func strategyByName(sts []provider.StrategyResult, name string) (provider.StrategyResult, bool) {
	for _, st := range sts {
		if st.Name == name {
			return st, true
		}
	}
	return provider.StrategyResult{}, false
}

func percentOf(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// judgeOutcomeBlock stacks each strategy's completed and lost judgments.
func judgeOutcomeBlock(id string, sts []provider.StrategyResult) block {
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "strategy", Type: "category", Data: strategyNames(sts)},
		axis{Name: "judgments (of the job's N)", Min: 0}, "axis")...)
	bar.SetXAxis(strategyNames(sts))
	bar.AddSeries("completed (200)", barValues(sts, func(st provider.StrategyResult) float64 { return float64(st.Completed) }),
		charts.WithBarChartOpts(opts.BarChart{Stack: "job", BarWidth: "45%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorOK}))
	bar.AddSeries("lost (given up or not finished)", barValues(sts, func(st provider.StrategyResult) float64 { return float64(st.Lost) }),
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
func judgeTimeBlock(id string, sts []provider.StrategyResult) block {
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
	bar.AddSeries("wall time", barValues(sts, func(st provider.StrategyResult) float64 { return st.WallSeconds }),
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

func zeroOrCount(n int64) string {
	if n == 0 {
		return "no"
	}
	return thousands(float64(n))
}

// judgeRequestsBlock draws each strategy's requests and 429s.
func judgeRequestsBlock(id string, sts []provider.StrategyResult) block {
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "strategy", Type: "category", Data: strategyNames(sts)},
		axis{Name: "requests", Min: 0}, "axis")...)
	bar.SetXAxis(strategyNames(sts))
	bar.AddSeries("attempts (every request sent)", barValues(sts, func(st provider.StrategyResult) float64 { return float64(st.Attempts) }),
		charts.WithBarChartOpts(opts.BarChart{BarGap: "10%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorSent}))
	bar.AddSeries("429 limited", barValues(sts, func(st provider.StrategyResult) float64 { return float64(st.Rejected429) }),
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

func judgeTable(sts []provider.StrategyResult) *table {
	t := &table{Class: "runs", Head: []string{"strategy", "N", "completed", "lost", "attempts", "429", "529", "wall", "minimum", "ratio", "timed out"}}
	for _, st := range sts {
		t.Rows = append(t.Rows, []cell{{Text: st.Name, Class: "name"}, numCell(thousands(float64(st.N))), numCell(thousands(float64(st.Completed))),
			numCell(thousands(float64(st.Lost))), numCell(thousands(float64(st.Attempts))), numCell(thousands(float64(st.Rejected429))),
			numCell(thousands(float64(st.Overloaded529))), numCell(fmt.Sprintf("%.2f s", st.WallSeconds)), numCell(fmt.Sprintf("%.2f s", st.MinSeconds)),
			numCell(fmt.Sprintf("%.2f×", st.Ratio)), textCell(yesNo(st.TimedOut))})
	}
	return t
}
