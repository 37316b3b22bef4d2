package reports

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/results"
)

// task8Page is the page of task 8.
var task8Page = &taskPage{
	ID:    "task8",
	Title: "four ways of counting requests per second",
	Lead: "The same traffic goes to four per-client limiters set to the same average: a fixed window, a sliding log, a sliding counter and a token bucket. " +
		"Each section is one measurement: a burst on both sides of a window boundary, many clients coming back after being refused, the memory each keeps per client, and how often the counter's approximation decides otherwise than the exact log.",
	Draws: func(doc *results.Document) bool { return len(doc.Counting) > 0 },
	Build: buildTask8,
}

// countingColor gives each limiter its colour on every chart.
func countingColor(limiter string) string {
	switch limiter {
	case results.LimiterFixed:
		return colorTimeout
	case results.LimiterLog:
		return colorShed
	case results.LimiterCounter:
		return colorShedOut
	case results.LimiterBucket:
		return colorOK
	}
	return colorOther
}

func buildTask8(s *site, _ []*results.Run) []block {
	var c *results.Counting
	for _, x := range s.doc.Counting {
		if x != nil {
			c = x
			break
		}
	}
	if c == nil {
		return []block{{ID: "no-counting", Heading: "No measurements", Text: "This document holds no measurement of the four limiters: they were skipped (see the checks) or the run stopped early."}}
	}
	var blocks []block
	if len(c.Boundary) > 0 {
		blocks = append(blocks, boundaryBlock("t8_boundary", c.Boundary))
	}
	if len(c.Return) > 0 {
		blocks = append(blocks, returnBlock("t8_return", c.Return), returnTableBlock("t8_return_table", c.Return))
	}
	if len(c.Memory) > 0 {
		blocks = append(blocks, memoryBlock("t8_memory", c.Memory))
	}
	if d := c.Disagreement; d != nil {
		blocks = append(blocks, disagreementBlock("t8_disagreement", d))
	}
	if len(c.Server) > 0 {
		blocks = append(blocks, serverTableBlock("t8_server", c.Server))
	}
	if len(s.doc.BucketPlays) > 0 {
		blocks = append(blocks, playsBlock("t8_plays", s.doc.BucketPlays))
	}
	blocks = append(blocks, whichOneBlock("t8_which", c))
	if len(c.Warnings) > 0 {
		t := &table{Class: "runs", Head: []string{"warning"}}
		for _, w := range c.Warnings {
			t.Rows = append(t.Rows, []cell{{Text: w, Class: "warn"}})
		}
		blocks = append(blocks, block{ID: "t8_warnings", Heading: "What the machine did to the timing", Table: t})
	}
	return blocks
}

// boundaryBlock stacks each limiter's admissions before and after the
// window boundary.
func boundaryBlock(id string, bs []results.CountingBoundary) block {
	names := make([]string, len(bs))
	before := make([]opts.BarData, len(bs))
	after := make([]opts.BarData, len(bs))
	for i, b := range bs {
		names[i] = b.Limiter
		before[i] = opts.BarData{Value: b.AdmittedBefore}
		after[i] = opts.BarData{Value: b.AdmittedAfter}
	}
	bar := charts.NewBar()
	bar.SetGlobalOptions(common(id,
		axis{Name: "limiter", Type: "category", Data: names},
		axis{Name: "requests admitted", Min: 0}, "axis")...)
	bar.SetXAxis(names)
	bar.AddSeries("just before the boundary", before,
		charts.WithBarChartOpts(opts.BarChart{Stack: "burst", BarWidth: "45%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorShed}))
	bar.AddSeries("just after it", after,
		charts.WithBarChartOpts(opts.BarChart{Stack: "burst", BarWidth: "45%"}), charts.WithItemStyleOpts(opts.ItemStyle{Color: colorLimited}))
	b0 := bs[0]
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("%s %d (%d + %d) in %.0f ms", b.Limiter, b.Admitted(), b.AdmittedBefore, b.AdmittedAfter, b.LastEndMS-b.FirstStartMS))
	}
	caption := fmt.Sprintf("One client sends %d requests just before a boundary of %s windows and %d just after, a limit of %d per window: ",
		b0.Limit, fmtMS(b0.WindowMS), b0.Limit, b0.Limit) + strings.Join(parts, "; ") + "."
	p := newPlot(id, 340, caption, bar, nil)
	return block{ID: id, Heading: "A burst on both sides of a window boundary",
		Text: "A fixed window forgets everything at its boundary, so it lets through up to twice its limit within moments; the log counts the last full window wherever it falls, and the counter and the bucket sit in between.",
		Plot: &p}
}

// returnBlock draws each limiter's admissions per bin while many refused
// clients come back.
func returnBlock(id string, rs []results.CountingReturn) block {
	line := charts.NewLine()
	maxT := 0.0
	for _, r := range rs {
		maxT = max(maxT, r.BinMS*float64(len(r.Bins)))
	}
	line.SetGlobalOptions(common(id,
		axis{Name: "time in the measured windows (ms)", Min: 0, Max: axisMax(maxT)},
		axis{Name: "admissions per bin", Min: 0}, "axis")...)
	var parts []string
	for _, r := range rs {
		data := make([]opts.LineData, len(r.Bins))
		for i, n := range r.Bins {
			data[i] = xy(float64(i)*r.BinMS, float64(n))
		}
		line.AddSeries(r.Limiter, data, lineOpts(countingColor(r.Limiter), 2, "solid", false)...)
		parts = append(parts, fmt.Sprintf("%s %.1f", r.Limiter, r.PeakOverMean))
	}
	r0 := rs[0]
	caption := fmt.Sprintf("%d clients, each wanting more than its %d per %s window, retry exactly when told; bins of %s. Fullest bin over the mean bin: ",
		r0.Clients, r0.Limit, fmtMS(r0.WindowMS), fmtMS(r0.BinMS)) + strings.Join(parts, ", ") + "."
	p := newPlot(id, 340, caption, line, axisTip(" ms", ""))
	return block{ID: id, Heading: "Everyone comes back at once",
		Text: "Under a fixed window every refused client is told to wait for the same boundary, so their retries land together in one spike; the other three spread them over the window.",
		Plot: &p}
}

// returnTableBlock lists the synchronised return's numbers.
func returnTableBlock(id string, rs []results.CountingReturn) block {
	t := &table{Class: "runs", Head: []string{"limiter", "clients", "limit per window", "admitted", "refused", "fullest bin / mean", "retries late, p99"}}
	for _, r := range rs {
		t.Rows = append(t.Rows, []cell{{Text: r.Limiter, Class: "name"}, numCell(strconv.Itoa(r.Clients)),
			numCell(fmt.Sprintf("%d per %s", r.Limit, fmtMS(r.WindowMS))), numCell(thousands(float64(r.Admitted))),
			numCell(thousands(float64(r.Refused))), numCell(fmt.Sprintf("%.2f", r.PeakOverMean)), numCell(fmtMS(r.LateP99MS))})
	}
	return block{ID: id, Heading: "The return in numbers", Table: t,
		Text: "Admitted and refused count the measured windows only, after the warm-up. Late: how long after its wait a client's retry actually ran, which bounds how sharp a spike the machine can show."}
}

// serverTableBlock lists the floods of the fake GPU with each limiter in
// front of shedding, as the server counted them: per limiter the clients'
// admissions against their bound, and the 429s it judged.
func serverTableBlock(id string, ss []results.CountingServer) block {
	t := &table{Class: "runs", Head: []string{"limiter", "limit per window", "clients × rate", "admitted per client (most allowed)", "refused per client", "429s judged", "wrong Retry-After", "longest Retry-After"}}
	for _, s := range ss {
		var adm, ref []string
		for _, c := range s.Clients {
			adm = append(adm, fmt.Sprintf("%d (%.0f)", c.Admitted, c.Bound))
			ref = append(ref, strconv.FormatInt(c.Limited, 10))
		}
		limit := fmt.Sprintf("%d per %s", s.Limit, fmtMS(s.WindowMS))
		if s.Burst > 0 {
			limit += fmt.Sprintf(", burst %d", s.Burst)
		}
		bad := numCell(strconv.FormatInt(s.BadRetryAfter, 10))
		if s.BadRetryAfter > 0 {
			bad.Class += " warn"
		}
		t.Rows = append(t.Rows, []cell{{Text: s.Limiter, Class: "name"}, numCell(limit),
			numCell(fmt.Sprintf("%d × %g/s for %.0f s", len(s.Clients), s.RatePerClient, s.DurationS)),
			numCell(strings.Join(adm, ", ")), numCell(strings.Join(ref, ", ")),
			numCell(thousands(float64(s.Limited429))), bad, numCell(fmt.Sprintf("%d s", s.MaxRetryAfterS))})
	}
	return block{ID: id, Heading: "In front of the server", Table: t,
		Text: "Each limiter stood in front of the fake GPU's shedding, keyed by X-Client-Id, and several clients flooded it well over their limit. " +
			"The figures are the server's own: what it admitted to each client against the most that limiter allows over the client's span (a fixed window and a counter count per aligned window, the log over any window, the bucket its burst plus its rate), " +
			"and its judgement of every 429's Retry-After against the wait that limiter could truly report."}
}

// playsBlock lists the lesson's token-bucket plays on the server: what
// the bucket admitted of each client's arrivals, as the server counted,
// beside the schedule replayed against a bucket of the same refill and
// burst.
func playsBlock(id string, ps []*results.BucketPlay) block {
	t := &table{Class: "runs", Head: []string{"play", "arrivals", "bucket", "sent", "admitted", "refused", "replayed", "most any bucket admits"}}
	for _, p := range ps {
		arrivals := fmt.Sprintf("%g/s for %.0f s", p.OfferedRPS, p.DurationS)
		if p.Pattern != nil && p.Pattern.Kind == "spikes" {
			arrivals = fmt.Sprintf("%d at once every %g s for %.0f s (%g/s on average)", p.Pattern.Spike, p.Pattern.EveryS, p.DurationS, p.OfferedRPS)
		}
		adm := numCell(strconv.FormatInt(p.Admitted, 10))
		if d := p.Admitted - p.Predicted; d > 1 || d < -1 {
			adm.Class += " warn"
		}
		t.Rows = append(t.Rows, []cell{{Text: p.Name, Class: "name"}, {Text: arrivals},
			numCell(fmt.Sprintf("%g/s, burst %g", p.BucketRate, p.BucketBurst)),
			numCell(strconv.FormatInt(p.Sent, 10)), adm, numCell(strconv.FormatInt(p.Refused, 10)),
			numCell(strconv.FormatInt(p.Predicted, 10)), numCell(fmt.Sprintf("%.1f", p.Bound))})
	}
	return block{ID: id, Heading: "The token bucket's play: averages hide spikes", Table: t,
		Text: "One client against the token bucket in front of the server. Steady arrivals a little over the refill are admitted at the refill once the burst is spent; " +
			"spikes whose average barely exceeds the refill lose two thirds of every spike, because the bucket holds only its burst and refills almost nothing within a spike. " +
			"\"Replayed\" is the same arrivals fed to a bucket of that refill and burst; the last column is burst + refill × the time from the first request to the last."}
}

// memoryBlock draws bytes per client against the limit, one line per
// limiter.
func memoryBlock(id string, ms []results.CountingMemory) block {
	line := charts.NewLine()
	line.SetGlobalOptions(common(id,
		axis{Name: "limit (requests per window)", Type: "log"},
		axis{Name: "heap per client (bytes)", Type: "log"}, "axis")...)
	byLimiter := map[string][]results.CountingMemory{}
	var order []string
	for _, m := range ms {
		if _, ok := byLimiter[m.Limiter]; !ok {
			order = append(order, m.Limiter)
		}
		byLimiter[m.Limiter] = append(byLimiter[m.Limiter], m)
	}
	t := &table{Class: "runs", Head: []string{"limiter", "limit per window", "clients", "admitted", "heap", "per client"}}
	var parts []string
	for _, name := range order {
		var data []opts.LineData
		for _, m := range byLimiter[name] {
			data = append(data, xy(float64(m.Limit), max(1, m.BytesPerClient)))
			t.Rows = append(t.Rows, []cell{{Text: m.Limiter, Class: "name"}, numCell(fmt.Sprintf("%s per %s", thousands(float64(m.Limit)), fmtMS(m.WindowMS))),
				numCell(thousands(float64(m.Clients))), numCell(thousands(float64(m.Admitted))),
				numCell(bytesText(float64(m.HeapBytes))), numCell(bytesText(m.BytesPerClient))})
		}
		line.AddSeries(name, data, lineOpts(countingColor(name), 2, "solid", true)...)
		top := byLimiter[name][0]
		for _, m := range byLimiter[name] {
			if m.Limit > top.Limit {
				top = m
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s", name, bytesText(top.BytesPerClient)))
	}
	caption := "Heap kept per client once each has sent its limit within one window, after a garbage collection before and after. At the largest limit: " + strings.Join(parts, ", ") + "."
	p := newPlot(id, 340, caption, line, nil)
	return block{ID: id, Heading: "Memory per client",
		Text: "The log keeps one timestamp per admitted request, so its memory grows with the limit; the fixed window and the counter keep a couple of integers and the bucket a level and a time, whatever the limit.",
		Plot: &p, Table: t}
}

// bytesText prints a byte count in B, KiB or MiB.
func bytesText(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// disagreementBlock tabulates how often the counter and the log decided
// differently on the same trace.
func disagreementBlock(id string, d *results.CountingDisagreement) block {
	t := &table{Class: "runs", Head: []string{"", "requests", "decided otherwise", "share", "only the counter admitted", "only the log admitted"}}
	t.Rows = append(t.Rows,
		[]cell{{Text: "the limiters measured", Class: "name"}, numCell(thousands(float64(d.Requests))), numCell(thousands(float64(d.Differ))),
			numCell(fmt.Sprintf("%.3f%%", 100*d.Share())), numCell(thousands(float64(d.CounterOnly))), numCell(thousands(float64(d.LogOnly)))},
		[]cell{{Text: "their definitions, same instants", Class: "name"}, numCell(thousands(float64(d.Requests))), numCell(thousands(float64(d.ModelDiffer))),
			numCell(fmt.Sprintf("%.3f%%", 100*d.ModelShare())), numCell("—"), numCell("—")})
	text := fmt.Sprintf("A seeded random trace (seed %d): %d clients, each sending close to its %d per %s as a Poisson process for %.0f s, goes to the sliding counter and the sliding log at the same instants. "+
		"The counter assumes last window's requests were spread evenly; where they were not, it decides otherwise than the exact log. "+
		"The second row is the same comparison between the two definitions, written plainly in the harness: the measured limiters should come close to it.",
		d.Seed, d.Clients, d.Limit, fmtMS(d.WindowMS), d.Seconds)
	return block{ID: id, Heading: "How often the approximation is wrong", Text: text, Table: t}
}

// whichOneBlock sums up, per limiter, the measured figures that tell the
// four apart, with when each is the better choice.
func whichOneBlock(id string, c *results.Counting) block {
	when := map[string]string{
		results.LimiterFixed:   "cheapest and simplest; fine when a double burst at the boundary and everyone returning at once do not hurt",
		results.LimiterLog:     "exact in every window; for small limits or when every request must be accounted for, at memory that grows with the limit",
		results.LimiterCounter: "nearly exact at a fixed, tiny cost per client; the usual choice for per-client limits at scale",
		results.LimiterBucket:  "allows a chosen burst and then a steady rate; the right shape when short bursts are welcome and the average is what matters",
	}
	boundary := map[string]string{}
	for _, b := range c.Boundary {
		boundary[b.Limiter] = fmt.Sprintf("%d of %d", b.Admitted(), b.Sent)
	}
	peak := map[string]string{}
	for _, r := range c.Return {
		peak[r.Limiter] = fmt.Sprintf("%.1f", r.PeakOverMean)
	}
	mem := map[string]string{}
	largest := map[string]int{}
	for _, m := range c.Memory {
		if m.Limit >= largest[m.Limiter] {
			largest[m.Limiter] = m.Limit
			mem[m.Limiter] = bytesText(m.BytesPerClient)
		}
	}
	t := &table{Class: "runs", Head: []string{"limiter", "boundary burst admitted", "return: fullest bin / mean", "bytes per client, largest limit", "when to choose it"}}
	for _, name := range []string{results.LimiterFixed, results.LimiterLog, results.LimiterCounter, results.LimiterBucket} {
		t.Rows = append(t.Rows, []cell{{Text: name, Class: "name"}, numCell(orDash(boundary[name])), numCell(orDash(peak[name])),
			numCell(orDash(mem[name])), {Text: when[name], Class: "msg"}})
	}
	return block{ID: id, Heading: "Which one, when", Table: t,
		Text: "The figures measured above, side by side, and what they mean for choosing one."}
}

// orDash is s, or a dash when s is empty.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
