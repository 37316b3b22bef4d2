package reports

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/fakegpu"
	"ratelab/results"
)

// task3Page is the page of task 3.
var task3Page = &taskPage{
	ID:    "task3",
	Title: "who gets the capacity: a token bucket and a keyed limiter",
	Lead: "Each client has a bucket of b = 20 tokens refilling at r = 70 per second, in front of task 2's shedding. " +
		"Over any stretch of time T a client can never get more than b + r·T through, and a client over its allowance hears 429 while everyone else is served.",
	Build: buildTask3,
}

func buildTask3(s *site, runs []*results.Run) []block {
	var blocks []block
	if b, ok := boundBlock("t3_bound", runs); ok {
		blocks = append(blocks, b...)
	}
	if b, ok := limitedBlock("t3_limited", runs); ok {
		blocks = append(blocks, b)
	}
	if b, ok := fairnessBlock("t3_fairness", runs); ok {
		blocks = append(blocks, b)
	}
	blocks = append(blocks, outcomesBlock("t3_outcomes", runs,
		"A client over its allowance is refused with 429 and costs the server nothing; 503s only appear when the shared line is briefly full."))
	blocks = append(blocks, latencyBlock("t3_latency", runs, []results.Outcome{results.OutcomeOK},
		"What the bucket admits stays within capacity, so successes wait at most the short line: a few hundred milliseconds."))
	return blocks
}

// bucketOf returns the bucket a run's server gave each client, as the run
// recorded it; ok is false if the server had none (or the run is from an
// old document, which did not record its server's settings).
func bucketOf(r *results.Run) (rate, burst float64, ok bool) {
	cfg, known := fakegpu.FromRecord(r.Server)
	if !known || !cfg.Mode.Limited() {
		return 0, 0, false
	}
	return cfg.BucketRate, cfg.BucketBurst, true
}

// boundBlock draws each client's successes so far, by send time, under the
// bound b + r·t of its own bucket, as its run recorded it, and then the room
// left under the bound, which shows at a glance that it never goes below
// zero.
func boundBlock(id string, runs []*results.Run) ([]block, bool) {
	line, room := charts.NewLine(), charts.NewLine()
	type bucket struct{ rate, burst float64 }
	end := 0.0
	var over []*results.Run
	var buckets []bucket // the distinct buckets of the runs in over, in order
	for _, r := range runs {
		rate, burst, ok := bucketOf(r)
		if !ok || r.OfferedRPS <= rate || len(r.Timeline[results.OutcomeOK]) == 0 || r.TimelineBinMS <= 0 {
			continue // a client under its allowance never meets the bound
		}
		over = append(over, r)
		end = math.Max(end, r.DurationS)
		if b := (bucket{rate, burst}); !slices.Contains(buckets, b) {
			buckets = append(buckets, b)
		}
	}
	if len(over) == 0 {
		return nil, false
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "intended send time (s)", Min: 0, Max: math.Ceil(end)},
		axis{Name: "successes so far (requests)", Min: 0}, "axis")...)
	room.SetGlobalOptions(common(id+"_room",
		axis{Name: "intended send time (s)", Min: 0, Max: math.Ceil(end)},
		axis{Name: "room left under the bound: b + r·t − successes so far (requests)", Min: 0}, "axis")...)
	var limits []string
	for _, b := range buckets {
		var bound []opts.LineData
		for t := 0.0; t <= end+1e-9; t += 0.25 {
			bound = append(bound, xy(t, b.burst+b.rate*t))
		}
		line.AddSeries(fmt.Sprintf("bound b + r·t = %g + %g·t", b.burst, b.rate), bound, lineOpts(colorInk, 2, "dashed", false)...)
		limits = append(limits, fmt.Sprintf("%g + %g × %g = %g in %g s", b.burst, b.rate, end, b.burst+b.rate*end, end))
	}
	minRoom := math.Inf(1)
	var parts []string
	for i, r := range over {
		rate, burst, _ := bucketOf(r)
		bin := r.TimelineBinMS / 1000
		data := []opts.LineData{xy(0, 0)}
		left := []opts.LineData{xy(0, burst)}
		sum := 0.0
		for k, n := range r.Timeline[results.OutcomeOK] {
			t := float64(k+1) * bin
			if t > r.DurationS+1e-9 {
				break // the last bin holds nothing sent
			}
			sum += float64(n)
			data = append(data, xy(t, sum))
			left = append(left, xy(t, burst+rate*t-sum))
			minRoom = math.Min(minRoom, burst+rate*t-sum)
		}
		line.AddSeries(r.Name, data, append(lineOpts(runColor(i), 2, "solid", false),
			charts.WithLineChartOpts(opts.LineChart{Step: "end", ShowSymbol: opts.Bool(false)}))...)
		room.AddSeries(r.Name, left, lineOpts(runColor(i), 2, "solid", true)...)
		parts = append(parts, fmt.Sprintf("%s got %d", r.Name, r.OK))
	}
	caption := fmt.Sprintf("No staircase crosses the dashed bound: %s, against at most %s. The burst lets the first %g through at once; after that, exactly r per second.",
		strings.Join(parts, ", "), strings.Join(limits, ", or "), buckets[0].burst)
	bursts := fmt.Sprintf("the burst of %g is", buckets[0].burst)
	if len(buckets) > 1 {
		caption = fmt.Sprintf("No staircase crosses the dashed bound of its bucket: %s, against at most %s. The burst lets the first requests through at once; after that, exactly r per second.",
			strings.Join(parts, ", "), strings.Join(limits, ", or "))
		bursts = "each burst is"
	}
	p := newPlot(id, 400, caption, line, axisTip(" s", " successes"))
	roomCaption := fmt.Sprintf("The room never goes below zero (its least is %.1f requests): %s spent in the first moments, and then the bucket admits exactly what drips in.", minRoom, bursts)
	rp := newPlot(id+"_room", 300, roomCaption, room, axisTip(" s", " requests of room"))
	return []block{
		{ID: id, Heading: "Successes never pass b + r·T",
			Text: "Successes counted by when each request was due to be sent, in 250 ms bins, for every client that offered more than its refill rate.",
			Plot: &p},
		{ID: id + "_room", Heading: "How close each client came to the bound", Text: "The same counts as the room left under the bound at the end of each bin.", Plot: &rp},
	}, true
}

// limitedBlock draws the 429s per second over time for each run.
func limitedBlock(id string, runs []*results.Run) (block, bool) {
	line := charts.NewLine()
	end := 0.0
	n := 0
	var steady []string
	for i, r := range runs {
		counts := r.Timeline[results.OutcomeTooMany]
		if r.Counts[results.OutcomeTooMany] == 0 || len(counts) == 0 || r.TimelineBinMS <= 0 {
			continue
		}
		bin := r.TimelineBinMS / 1000
		var data []opts.LineData
		var after []float64
		for k, c := range counts {
			t := (float64(k) + 0.5) * bin
			data = append(data, xy(t, float64(c)/bin))
			if t > 1 && t < r.DurationS-bin {
				after = append(after, float64(c)/bin)
			}
		}
		end = math.Max(end, float64(len(counts))*bin)
		line.AddSeries(r.Name, data, lineOpts(runColor(i), 2, "solid", true)...)
		if rate, _, ok := bucketOf(r); ok && len(after) > 0 {
			steady = append(steady, fmt.Sprintf("%s is refused %.0f/s (offered − %g)", r.Name, mean(after), rate))
		}
		n++
	}
	if n == 0 {
		return block{}, false
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "intended send time (s)", Min: 0, Max: axisMax(end)},
		axis{Name: "429 answers per second", Min: 0}, "axis")...)
	caption := "Refusals start once the burst is spent, then run steadily at the offered rate minus the refill rate."
	if len(steady) > 0 {
		caption = "Refusals start once the burst is spent, then run steadily: " + strings.Join(steady, "; ") + "."
	}
	p := newPlot(id, 360, caption, line, axisTip(" s", " 429s/s"))
	return block{ID: id, Heading: "429s over time", Text: "Each flood's 429 answers per 250 ms bin of send time, as a rate.", Plot: &p}, true
}

// fairnessBlock compares the backfill and the interactive client that
// shared one server: how each one's requests ended, in percent of sent.
func fairnessBlock(id string, runs []*results.Run) (block, bool) {
	var pair []*results.Run
	for _, prefix := range []string{"backfill", "interactive"} {
		for _, r := range runs {
			if strings.HasPrefix(r.Name, prefix) {
				pair = append(pair, r)
				break
			}
		}
	}
	if len(pair) != 2 {
		return block{}, false
	}
	names := []string{pair[0].Name, pair[1].Name}
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id, axis{Name: "share of the client's requests (%)", Min: 0, Max: 100},
		axis{Type: "category", Data: names, Inverse: true}, "axis")...)
	for _, o := range results.Outcomes {
		var data []opts.BarData
		any := false
		for _, r := range pair {
			share := 0.0
			if r.Issued > 0 {
				share = 100 * float64(r.Counts[o]) / float64(r.Issued)
			}
			any = any || r.Counts[o] > 0
			data = append(data, opts.BarData{Value: num(share)})
		}
		if !any {
			continue
		}
		bar.AddSeries(outcomeLabel[o], data,
			charts.WithBarChartOpts(opts.BarChart{Stack: "share", BarWidth: "55%"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: outcomeColor[o]}),
			charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "inside", Color: "#ffffff",
				Formatter: string(opts.FuncOpts(`function (p) { return p.value >= 4 ? p.value.toFixed(1) + '%' : ''; }`))}))
	}
	b, in := pair[0], pair[1]
	share := 0.0
	if in.Issued > 0 {
		share = 100 * float64(in.OK) / float64(in.Issued)
	}
	caption := fmt.Sprintf("The interactive client got %d of %d served (%.0f%%) while the backfill sent %s and was held to %d: each client's own bucket decides, so the backfill cannot take the capacity.",
		in.OK, in.Issued, share, fmtRate(b.OfferedRPS), b.OK)
	p := newPlot(id, 190, caption, bar, func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "axis", "valueFormatter": opts.FuncOpts(`function (v) { return v + '%'; }`)}
	})
	return block{ID: id, Heading: "Fairness: a backfill beside an interactive client",
		Text: "Two clients flood one server at the same time, each with its own X-Client-Id and so its own bucket.",
		Plot: &p, Table: fairnessTable(pair)}, true
}

func fairnessTable(pair []*results.Run) *table {
	t := &table{Class: "runs", Head: []string{"client", "offered", "sent", "ok", "429", "503", "timeout", "served", "p99 ok"}}
	for _, r := range pair {
		served := 0.0
		if r.Issued > 0 {
			served = 100 * float64(r.OK) / float64(r.Issued)
		}
		t.Rows = append(t.Rows, []cell{{Text: r.Name, Class: "name"}, numCell(fmtRate(r.OfferedRPS)), numCell(fmt.Sprint(r.Issued)),
			numCell(fmt.Sprint(r.OK)), numCell(fmt.Sprint(r.Counts[results.OutcomeTooMany])), numCell(fmt.Sprint(r.Counts[results.OutcomeUnavailable])),
			numCell(fmt.Sprint(r.Counts[results.OutcomeTimeout])), numCell(fmt.Sprintf("%.1f%%", served)), numCell(msOrDash(r.OK, r.P99MS))})
	}
	return t
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
