package reports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"ratelab/results"
)

// plot is one chart on a page: its ECharts option, built with go-echarts,
// and the one line under it saying what to notice.
type plot struct {
	ID      string // the element's id, and a JavaScript identifier
	Height  int    // pixels; the width follows the page
	Caption string
	Option  template.JS // the ECharts option, as a JavaScript object literal
}

// Colours. Outcomes keep theirs on every chart; the model is ink, as in
// the lesson's figures, and shedding is blue.
const (
	colorInk     = "#1f2328"
	colorShed    = "#1f6feb"
	colorSent    = "#8c959f"
	colorOK      = "#2da44e"
	colorLimited = "#d4a72c"
	colorShedOut = "#8250df"
	colorTimeout = "#cf222e"
	colorOther   = "#57606a"
)

// outcomeColor gives each outcome its colour.
var outcomeColor = map[results.Outcome]string{
	results.OutcomeOK:          colorOK,
	results.OutcomeTooMany:     colorLimited,
	results.OutcomeUnavailable: colorShedOut,
	results.OutcomeTimeout:     colorTimeout,
	results.OutcomeOther:       colorOther,
}

// outcomeLabel names an outcome for a legend.
var outcomeLabel = map[results.Outcome]string{
	results.OutcomeOK:          "200 ok",
	results.OutcomeTooMany:     "429 limited",
	results.OutcomeUnavailable: "503 shed",
	results.OutcomeTimeout:     "timeout",
	results.OutcomeOther:       "other",
}

// runPalette colours runs, in order: distinct, and readable on white.
var runPalette = []string{"#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#bf3989", "#6e7781", "#4d2d00", "#0550ae"}

func runColor(i int) string { return runPalette[i%len(runPalette)] }

// axis describes one axis: its title, with the unit, and its kind.
type axis struct {
	Name     string // with its unit: "offered load (requests/s)"
	Type     string // "value" (default), "log" or "category"
	Min, Max any
	Data     any    // the categories of a category axis
	Format   string // a JavaScript formatter function for the labels, or ""
	Inverse  bool
	// LabelWidth, if positive, cuts longer labels with an ellipsis.
	LabelWidth int
}

func (a axis) x() opts.XAxis {
	x := opts.XAxis{Type: orDefault(a.Type, "value"), Name: a.Name, NameLocation: "middle", NameGap: 28,
		Min: a.Min, Max: a.Max, Data: a.Data, SplitLine: &opts.SplitLine{Show: opts.Bool(a.Type != "category")}}
	if a.Format != "" {
		x.AxisLabel = &opts.AxisLabel{Formatter: opts.FuncOpts(a.Format)}
	}
	return x
}

func (a axis) y() opts.YAxis {
	y := opts.YAxis{Type: orDefault(a.Type, "value"), Name: a.Name, NameLocation: "end", NameGap: 12,
		Min: a.Min, Max: a.Max, Data: a.Data, SplitLine: &opts.SplitLine{Show: opts.Bool(a.Type != "category")}}
	if a.Inverse {
		y.Inverse = opts.Bool(true)
	}
	if a.Format != "" || a.LabelWidth > 0 {
		y.AxisLabel = &opts.AxisLabel{}
	}
	if a.Format != "" {
		y.AxisLabel.Formatter = opts.FuncOpts(a.Format)
	}
	if a.LabelWidth > 0 {
		y.AxisLabel.Width, y.AxisLabel.Overflow = a.LabelWidth, "truncate"
	}
	return y
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// common returns the options every chart shares: its id, no animation (so
// screenshots are stable), a legend on top, a tooltip, a grid that makes
// room for the axis labels and titles, and the two axes.
func common(id string, x, y axis, tooltip string) []charts.GlobalOpts {
	return []charts.GlobalOpts{
		charts.WithInitializationOpts(opts.Initialization{ChartID: id, AssetsHost: "./"}),
		charts.WithAnimation(false),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "0", Left: "center", Type: "plain"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: tooltip}),
		charts.WithGridOpts(opts.Grid{Left: "30", Right: "36", Top: "40", Bottom: "40", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(x.x()),
		charts.WithYAxisOpts(y.y()),
	}
}

// legendWidth is about how wide a chart's legend may be, in pixels, on the
// page's 1180-pixel column.
const legendWidth = 980

// legendRows estimates how many rows the legend of m wraps into: each item
// is its symbol, its name and a gap.
func legendRows(m map[string]any) int {
	series, ok := m["series"].(charts.MultiSeries)
	if !ok {
		return 0
	}
	seen := map[string]bool{}
	rows, used := 1, 0
	for _, s := range series {
		if s.Name == "" || seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		w := 40 + 7*len([]rune(s.Name))
		if used > 0 && used+w > legendWidth {
			rows++
			used = 0
		}
		used += w
	}
	if len(seen) == 0 {
		return 0
	}
	return rows
}

// option is what every go-echarts chart can give: its option as JSON.
type option interface {
	Validate()
	JSONNotEscaped() template.HTML
	Accept(charts.ConfigurationVisitor)
}

// tweak adds what go-echarts has no field for to the finished option.
type tweak struct {
	charts.BaseConfigurationVisitor
	fn func(map[string]any)
}

func (t tweak) Visit(m map[string]any) {
	delete(m, "toolbox") // an empty toolbox: nothing to show
	top := 14 + 24*legendRows(m)
	// The y axis's title goes above the axis, left-aligned and horizontal,
	// where it is easy to read and never meets the labels; go-echarts has
	// no field for its text style.
	if ys, ok := m["yAxis"].([]opts.YAxis); ok {
		var out []any
		for _, y := range ys {
			mm := toMap(y)
			if y.Name != "" {
				mm["nameTextStyle"] = map[string]any{"align": "left", "color": colorOther, "fontSize": 12}
				top = max(top, 14+24*legendRows(m)+20)
			}
			out = append(out, mm)
		}
		m["yAxis"] = out
	}
	if xs, ok := m["xAxis"].([]opts.XAxis); ok {
		var out []any
		for _, x := range xs {
			mm := toMap(x)
			mm["nameTextStyle"] = map[string]any{"color": colorOther, "fontSize": 12}
			out = append(out, mm)
		}
		m["xAxis"] = out
	}
	if grids, ok := m["grid"].([]opts.Grid); ok && len(grids) == 1 {
		grids[0].Top = strconv.Itoa(top)
	}
	if t.fn != nil {
		t.fn(m)
	}
}

// toMap turns an option struct into a map, to add what it has no field for.
func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // option structs always marshal
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

// funcMarker is how go-echarts marks JavaScript functions inside its JSON;
// its renderer strips the quotes around them, and so does newPlot.
var funcMarker = regexp.MustCompile(`(__f__")|("__f__)|(__f__)`)

// newPlot renders c's option. fn, if not nil, edits the option first.
func newPlot(id string, height int, caption string, c option, fn func(map[string]any)) plot {
	c.Accept(tweak{fn: fn})
	c.Validate()
	js := strings.TrimSpace(string(c.JSONNotEscaped()))
	js = funcMarker.ReplaceAllString(js, "")
	return plot{ID: id, Height: height, Caption: caption, Option: template.JS(scriptSafe(js))}
}

// scriptSafe keeps text inside a <script> element from ending it: "</"
// becomes "<\/" and "<!--" becomes "<\!--", which mean the same in
// JavaScript strings. Run names and messages come from a results file.
func scriptSafe(s string) string {
	s = strings.ReplaceAll(s, "</", `<\/`)
	return strings.ReplaceAll(s, "<!--", `<\!--`)
}

// num rounds v to 4 significant figures for the page, and maps NaN and the
// infinities (which JSON cannot hold) to 0.
func num(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return f
}

// xy is one point of a line or scatter series.
func xy(x, y float64) opts.LineData { return opts.LineData{Value: []float64{num(x), num(y)}} }

// lineOpts styles a model or measurement line.
func lineOpts(color string, width float32, dash string, symbol bool) []charts.SeriesOpts {
	return []charts.SeriesOpts{
		charts.WithLineChartOpts(opts.LineChart{ShowSymbol: opts.Bool(symbol), Symbol: "circle", SymbolSize: 5}),
		charts.WithLineStyleOpts(opts.LineStyle{Color: color, Width: width, Type: dash}),
		charts.WithItemStyleOpts(opts.ItemStyle{Color: color}),
	}
}

// markX draws labelled vertical lines on a series, such as "sending stops"
// at the end of a flood.
func markX(marks ...opts.MarkLineNameXAxisItem) []charts.SeriesOpts {
	return []charts.SeriesOpts{
		charts.WithMarkLineNameXAxisItemOpts(marks...),
		charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
			LineStyle: &opts.LineStyle{Color: colorSent, Type: "dashed", Width: 1},
			Label:     &opts.Label{Show: opts.Bool(true), Formatter: "{b}", Color: colorOther, Position: "end"}}),
	}
}

// axisTip is a tooltip for line charts on a value x axis: the x value with
// its unit, then each series' y value with its unit.
//
// JavaScript functions travel inside go-echarts' JSON, which doubles every
// backslash and escapes quotes: they must hold neither backslashes nor
// double quotes, and these units no quotes at all.
func axisTip(xUnit, yUnit string) func(map[string]any) {
	if strings.ContainsAny(xUnit+yUnit, `'"\`) {
		panic("reports: axisTip: a unit with a quote or a backslash")
	}
	return func(m map[string]any) {
		m["tooltip"] = map[string]any{"trigger": "axis", "formatter": opts.FuncOpts(fmt.Sprintf(
			`function (ps) { var s = ps[0].axisValueLabel + '%s'; ps.forEach(function (p) { s += '<br>' + p.marker + p.seriesName + ': ' + p.value[1] + '%s'; }); return s; }`,
			xUnit, yUnit))}
	}
}

// percentileTip is the tooltip of a percentile chart: the percentile, then
// each series' latency.
const percentileTip = `function (ps) { var s = Math.round(100000 - 100000 / ps[0].value[0]) / 1000 + '%'; ps.forEach(function (p) { s += '<br>' + p.marker + p.seriesName + ': ' + p.value[1] + ' ms'; }); return s; }`

// percentFormat labels a percentile axis drawn as 1/(1−q) on a log scale.
const percentFormat = `function (v) { var q = 100 - 100 / v; return (q === 0 ? '0' : q.toFixed(Math.max(0, Math.round(Math.log10(v)) - 2))) + '%'; }`

func fmtRate(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "/s" }

func fmtMS(v float64) string {
	if v >= 10000 {
		return fmt.Sprintf("%.1f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// jsonJS encodes v for a <script>: encoding/json escapes <, > and &, so no
// string in it can end the element.
func jsonJS(v any) (template.JS, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return template.JS(b), nil
}

// axisMax rounds the end of a time axis up to a tick: whole seconds up to
// 12, then steps of 2, then of 5.
func axisMax(v float64) float64 {
	step := 5.0
	switch {
	case v <= 12:
		step = 1
	case v <= 24:
		step = 2
	}
	return math.Ceil(v/step) * step
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
