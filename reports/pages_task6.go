package reports

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/fakegpu"
	"ratelab/results"
)

// task6Page is the page of task 6.
var task6Page = &taskPage{
	ID:    "task6",
	Title: "one limit across many workers: share the bucket",
	Lead: "The same flood hits four server workers behind one port twice: once with a token bucket in each worker, once with one bucket kept in Redis that all four take from. " +
		"A limit meant for the service is only a limit if the workers share it.",
	Build: buildTask6,
}

func buildTask6(s *site, runs []*results.Run) []block {
	var withWorkers []*results.Run
	for _, r := range runs {
		if len(r.Workers) > 0 {
			withWorkers = append(withWorkers, r)
		}
	}
	var blocks []block
	if len(withWorkers) > 0 {
		blocks = append(blocks, workersBlock("t6_workers", withWorkers))
	}
	if b, ok := workerTimelineBlock("t6_timeline", runs); ok {
		blocks = append(blocks, b)
	}
	if len(withWorkers) > 0 {
		blocks = append(blocks, block{ID: "t6_table", Heading: "Every worker's counts", Table: workersTable(withWorkers),
			Text: "Each worker's own /stats at the end of each flood."})
	}
	if b, ok := clusterBlock(s.byTask["task6"]); ok {
		blocks = append(blocks, b)
	}
	return blocks
}

// clusterBlock tabulates the scripts each primary of the Redis Cluster ran,
// from their own INFO commandstats as the cluster checks measured them:
// many clients over every slot, then one hot client.
func clusterBlock(checks []results.Check) (block, bool) {
	var spread, hot map[string]float64
	for _, c := range checks {
		switch {
		case c.Measured["primary1_first_slot"] != 0 || c.Measured["primary1_last_slot"] != 0:
			spread = c.Measured
		case c.Measured["scripts_on_owner"] > 0:
			hot = c.Measured
		}
	}
	if spread == nil || hot == nil {
		return block{}, false
	}
	t := &table{Class: "runs", Head: []string{"primary", "hash slots", "many clients: scripts", "share", "one hot client: scripts"}}
	for i := 1; ; i++ {
		p := fmt.Sprintf("primary%d_", i)
		n, ok := spread[p+"scripts"]
		if !ok {
			break
		}
		t.Rows = append(t.Rows, []cell{{Text: strconv.Itoa(i), Class: "name"},
			numCell(fmt.Sprintf("%.0f–%.0f", spread[p+"first_slot"], spread[p+"last_slot"])),
			numCell(thousands(n)), numCell(fmt.Sprintf("%.0f%%", 100*spread[p+"share"])), numCell(thousands(hot[p+"scripts"]))})
	}
	return block{ID: "t6_cluster", Heading: "Scripts per primary of a Redis Cluster", Table: t,
		Text: fmt.Sprintf("The same script on a cluster of three primaries, as each primary's INFO commandstats counted its scripts. "+
			"Many clients' keys hash all over the slots, so the work spreads; the hot client's one key is in slot %.0f, so one primary ran every one of its scripts.", hot["hot_slot"])}, true
}

// sharedRun says whether r's workers took from one bucket in Redis, as the
// run recorded its server.
func sharedRun(r *results.Run) bool {
	return r.Server.Known() && fakegpu.Mode(r.Server.Mode) == fakegpu.ModeRedis
}

// workerBound is the most one bucket admits in r's flood, from the model's
// prediction: the whole prediction with one shared bucket, a worker's share
// of it with a bucket each.
func workerBound(r *results.Run) float64 {
	ok := r.Predicted["ok"]
	if ok <= 0 || len(r.Workers) == 0 {
		return 0
	}
	if sharedRun(r) {
		return ok
	}
	return ok / float64(len(r.Workers))
}

// workersBlock draws each worker's admissions, per run, beside the bound
// of one bucket.
func workersBlock(id string, runs []*results.Run) block {
	n := 0
	for _, r := range runs {
		n = max(n, len(r.Workers))
	}
	cats := make([]string, 0, n+1)
	for i := range n {
		cats = append(cats, "worker "+strconv.Itoa(i+1))
	}
	cats = append(cats, "all four")
	if n != 4 {
		cats[n] = fmt.Sprintf("all %d", n)
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "server worker", Type: "category", Data: cats},
		axis{Name: "requests admitted (200s, the worker's own count)", Min: 0}, "axis")...)
	bar.SetXAxis(cats)
	var own, shared float64
	var parts []string
	for i, r := range runs {
		data := make([]opts.BarData, n+1)
		var total int64
		lo, hi := int64(math.MaxInt64), int64(0)
		for k := range n {
			if k < len(r.Workers) {
				f := r.Workers[k].Finished
				data[k] = opts.BarData{Value: f}
				total += f
				lo, hi = min(lo, f), max(hi, f)
			} else {
				data[k] = opts.BarData{Value: 0}
			}
		}
		data[n] = opts.BarData{Value: total}
		bound := workerBound(r)
		so := []charts.SeriesOpts{charts.WithItemStyleOpts(opts.ItemStyle{Color: runColor(i)}),
			charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "inside", Formatter: "{c}", Color: "#ffffff"})}
		if sharedRun(r) {
			shared = bound
			parts = append(parts, fmt.Sprintf("with one bucket in Redis the %s share %s (%d to %d each) against the shared bound of %s", countWord(len(r.Workers)), thousands(float64(total)), lo, hi, thousands(bound)))
		} else {
			own = bound
			ratio := 0.0
			if bound > 0 {
				ratio = float64(total) / bound
			}
			parts = append(parts, fmt.Sprintf("with a limiter each, every worker admits its own ~%s (%d to %d), %s in all: %.1f× the limit", thousands(bound), lo, hi, thousands(float64(total)), ratio))
		}
		bar.AddSeries(r.Name, data, so...)
	}
	var marks []opts.MarkLineNameYAxisItem
	switch {
	case own > 0 && shared > 0 && math.Abs(own-shared) < 0.5:
		marks = append(marks, opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("each worker's own bound = the shared bound: %s", thousands(own)), YAxis: own})
	default:
		if own > 0 {
			marks = append(marks, opts.MarkLineNameYAxisItem{Name: "each worker's own bound: " + thousands(own), YAxis: own})
		}
		if shared > 0 {
			marks = append(marks, opts.MarkLineNameYAxisItem{Name: "the shared bound: " + thousands(shared), YAxis: shared})
		}
	}
	if own > 0 && n > 1 {
		marks = append(marks, opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("%d buckets: %d × %s = %s", n, n, thousands(own), thousands(own*float64(n))), YAxis: own * float64(n)})
	}
	if len(marks) > 0 && len(bar.MultiSeries) > 0 {
		for _, o := range []charts.SeriesOpts{charts.WithMarkLineNameYAxisItemOpts(marks...),
			charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
				LineStyle: &opts.LineStyle{Color: colorInk, Type: "dashed", Width: 1},
				Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Color: colorInk, Position: "insideStartTop"}})} {
			o(&bar.MultiSeries[0])
		}
	}
	caption := "Each bucket admits at most its burst plus its rate times the flood: " + strings.Join(parts, "; ") + "."
	p := newPlot(id, 400, caption, bar, nil)
	return block{ID: id, Heading: "What each worker admitted",
		Text: "Every worker's own count of requests it served, per run, and the four added up. The dashed lines are the bound of one bucket over the flood, from the model.",
		Plot: &p}
}

// workerTimelineBlock draws 200s and 429s per second over time for every
// run: 200s solid, 429s dashed, in the run's colour.
func workerTimelineBlock(id string, runs []*results.Run) (block, bool) {
	line := charts.NewLine()
	end := 0.0
	n := 0
	var parts []string
	for i, r := range runs {
		if r.TimelineBinMS <= 0 {
			continue
		}
		bin := r.TimelineBinMS / 1000
		for _, o := range []results.Outcome{results.OutcomeOK, results.OutcomeTooMany} {
			counts := r.Timeline[o]
			if len(counts) == 0 {
				continue
			}
			var data []opts.LineData
			for k, c := range counts {
				t := (float64(k) + 0.5) * bin
				if t > r.DurationS {
					break
				}
				data = append(data, xy(t, float64(c)/bin))
				end = math.Max(end, float64(k+1)*bin)
			}
			dash := "solid"
			if o == results.OutcomeTooMany {
				dash = "dashed"
			}
			line.AddSeries(fmt.Sprintf("%s · %s", r.Name, outcomeLabel[o]), data, lineOpts(runColor(i), 2, dash, false)...)
			n++
		}
		if r.DurationS > 0 {
			parts = append(parts, fmt.Sprintf("%s: %.0f ok/s and %.0f 429s/s on average", r.Name, float64(r.OK)/r.DurationS, float64(r.Counts[results.OutcomeTooMany])/r.DurationS))
		}
	}
	if n == 0 {
		return block{}, false
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "intended send time (s)", Min: 0, Max: axisMax(end)},
		axis{Name: "answers per second", Min: 0}, "axis")...)
	caption := "After the bursts are spent the 200s settle at the refill rate of the buckets that admit them: " + strings.Join(parts, "; ") + "."
	p := newPlot(id, 360, caption, line, axisTip(" s", "/s"))
	return block{ID: id, Heading: "200s and 429s over time",
		Text: "Each flood's answers per 250 ms bin of send time, as a rate: 200s solid, 429s dashed.", Plot: &p}, true
}

func countWord(n int) string {
	if n >= 0 && n < 10 {
		return [...]string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}[n]
	}
	return strconv.Itoa(n)
}

func workersTable(runs []*results.Run) *table {
	t := &table{Class: "runs", Head: []string{"run", "worker", "received", "admitted (200)", "limited (429)", "failed open"}}
	for _, r := range runs {
		for k, w := range r.Workers {
			t.Rows = append(t.Rows, []cell{{Text: r.Name, Class: "name"}, numCell(strconv.Itoa(k + 1)), numCell(strconv.FormatInt(w.Received, 10)),
				numCell(strconv.FormatInt(w.Finished, 10)), numCell(strconv.FormatInt(w.Limited, 10)), numCell(strconv.FormatInt(w.FailOpen, 10))})
		}
	}
	return t
}
