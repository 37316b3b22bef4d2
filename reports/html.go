package reports

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/results"
)

// WriteHTML writes doc as a self-contained report into dir, creating it if
// needed: index.html (the score, every check, the floods and the machine),
// one page per task the document holds (task1.html, ...) with its charts,
// and echarts.min.js with its licence, which every page loads from beside
// itself. Nothing is loaded from the network: the folder can be opened,
// copied or zipped as it is. Files of an earlier report in dir are replaced.
func WriteHTML(dir string, doc *results.Document) error {
	files, err := renderHTML(doc)
	if err != nil {
		return err
	}
	return writeFiles(dir, files)
}

// renderHTML returns every file of doc's report by name.
func renderHTML(doc *results.Document) (map[string][]byte, error) {
	if doc == nil {
		return nil, errors.New("reports: no document")
	}
	if doc.Schema != results.Schema {
		return nil, fmt.Errorf("reports: schema %q, want %q", doc.Schema, results.Schema)
	}
	files, err := assetContents()
	if err != nil {
		return nil, err
	}
	s := newSite(doc)
	for _, id := range s.tasks {
		p := pageFor(id)
		if p == nil || len(s.runs[id]) == 0 && len(s.checks(id)) == 0 {
			continue
		}
		data := s.taskPage(p)
		b, err := renderPage(data)
		if err != nil {
			return nil, fmt.Errorf("reports: page %s: %w", id, err)
		}
		files[id+".html"] = b
	}
	b, err := renderPage(s.indexPage(files))
	if err != nil {
		return nil, fmt.Errorf("reports: index: %w", err)
	}
	files["index.html"] = b
	return files, nil
}

// writeFiles writes files into dir, each through a temporary file renamed
// into place, so a reader never sees half a page.
func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := writeFileAtomic(filepath.Join(dir, name), files[name]); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*")
	if err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if _, err := f.Write(b); err != nil {
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

// taskPage describes the HTML page of one task. The pages are listed in
// taskPages; a new task gets its page by adding one more. Tasks without a
// page still get their checks on the index.
type taskPage struct {
	ID    string
	Title string
	// Lead is the paragraph under the title: what the task shows.
	Lead string
	// Build returns the page's sections for the task's runs.
	Build func(s *site, runs []*results.Run) []block
	// Draws, if set, says whether the document holds something besides
	// floods for Build to draw (task 4's storms): Build is then called even
	// when the task has no runs.
	Draws func(doc *results.Document) bool
}

// taskPages are the task pages, in task order.
var taskPages = []*taskPage{task1Page, task2Page, task3Page, task4Page, task5Page, task6Page, task7Page, task8Page}

// pageFor returns the page of task id, or nil if it has none.
func pageFor(id string) *taskPage {
	for _, p := range taskPages {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// site is one document on its way to pages.
type site struct {
	doc    *results.Document
	tasks  []string                   // the tasks the document holds, in order
	runs   map[string][]*results.Run  // each task's floods
	byTask map[string][]results.Check // each task's checks
	grids  map[string]*goodputModel   // model lines, shared by pages
}

func newSite(doc *results.Document) *site {
	s := &site{doc: doc, runs: map[string][]*results.Run{}, byTask: map[string][]results.Check{}, grids: map[string]*goodputModel{}}
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			s.tasks = append(s.tasks, id)
		}
	}
	for _, c := range doc.Checks {
		add(c.Task)
		s.byTask[c.Task] = append(s.byTask[c.Task], c)
	}
	if _, ok := taskNumber(doc.Task); ok {
		add(doc.Task)
	}
	// A run is on the page of the task that ran it. A run without a task
	// (from a document written before runs recorded theirs) is only in
	// the index's table of floods.
	for _, r := range doc.Runs {
		if r == nil || r.Task == "" {
			continue
		}
		add(r.Task)
		s.runs[r.Task] = append(s.runs[r.Task], r)
	}
	slices.SortStableFunc(s.tasks, compareTasks)
	return s
}

// checks returns the checks of task id.
func (s *site) checks(id string) []results.Check { return s.byTask[id] }

// taskNumber reads the number of a task id such as "task12".
func taskNumber(id string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "task"))
	return n, err == nil && strings.HasPrefix(id, "task") && n > 0
}

// compareTasks orders task1 < task2 < task10 < anything else, by name.
func compareTasks(a, b string) int {
	na, oka := taskNumber(a)
	nb, okb := taskNumber(b)
	switch {
	case oka && okb:
		return na - nb
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// describeServer says in a few words how a server protects itself, from
// its recorded settings; for a server of an old document, which recorded
// only a description, that description; "" when there is none.
// countingName is how a report names task 8's limiter of a
// fakegpu.Config.Counting.
func countingName(counting string) string {
	switch counting {
	case "fixed":
		return "fixed window"
	case "log":
		return "sliding log"
	case "counter":
		return "sliding counter"
	}
	return counting
}

func describeServer(srv *results.Server) string {
	if srv == nil {
		return ""
	}
	cfg, ok := fakegpu.FromRecord(srv)
	if !ok {
		return srv.Description
	}
	var s string
	switch {
	case cfg.Mode == fakegpu.ModeNone:
		s = "unprotected"
	default:
		d := "no deadline"
		if cfg.Deadline > 0 {
			d = "deadline " + cfg.Deadline.String()
		}
		s = fmt.Sprintf("line %d, %s", cfg.MaxWaiting, d)
		switch {
		case cfg.Counting == "bucket":
			s = fmt.Sprintf("token bucket %d per %s burst %g, %s", cfg.CountingLimit, cfg.CountingWindow, cfg.BucketBurst, s)
		case cfg.Counting != "":
			s = fmt.Sprintf("%s %d per %s, %s", countingName(cfg.Counting), cfg.CountingLimit, cfg.CountingWindow, s)
		case cfg.Mode.Limited():
			s = fmt.Sprintf("bucket %g/s burst %g, %s", cfg.BucketRate, cfg.BucketBurst, s)
		}
		if cfg.Mode == fakegpu.ModeRedis {
			s = "Redis " + s
		}
		if cfg.SpreadRetryAfter {
			s += ", Retry-After spread"
		}
	}
	if srv.Workers > 1 {
		s = fmt.Sprintf("%d workers, %s", srv.Workers, s)
	}
	return s
}

// Page data, as the template sees it.

type pageData struct {
	File     string // this page's file name
	Title    string // the <title>
	Heading  string
	Lead     string
	Verdict  *verdict
	Facts    []fact // small key-value pairs under the heading
	Nav      []navItem
	Blocks   []block
	Plots    []plot        // every plot on the page, for the script
	Notes    []string      // shown at the end of the page
	Footer   template.HTML // trusted: built here
	Warnings []string      // shown in a yellow box at the top
}

type verdict struct {
	Status     results.Status
	Score, Max float64
}

func (v verdict) Points() string { return points(v.Score, v.Max) }

type fact struct{ Key, Value string }

type navItem struct {
	Label, Href string
	Current     bool
}

// block is one section of a page: a heading, a paragraph, and a plot, a
// table or both.
type block struct {
	ID      string
	Heading string
	Text    string
	Plot    *plot
	Sliders []slider // controls of the plot's model lines
	Model   any      // the lines the sliders choose from (JSON)
	Table   *table
}

// slider chooses one value of a list, for the model's lines.
type slider struct {
	ID     string
	Label  string
	Max    int // the last index
	Index  int // the first choice
	Values []string
}

// table is plain data; the template escapes every cell.
type table struct {
	Class string
	Head  []string
	Rows  [][]cell
}

type cell struct {
	Text  string
	Class string // "num", "name", "msg", "warn"
	Badge string // a status: the text is drawn as a coloured badge
	Href  string
	Title string
}

func textCell(s string) cell { return cell{Text: s} }
func numCell(s string) cell  { return cell{Text: s, Class: "num"} }
func statusCell(s results.Status) cell {
	return cell{Text: strings.ToUpper(string(s)), Badge: string(s)}
}

//go:embed page.html.tmpl
var pageTemplateText string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"json": func(v any) (template.JS, error) { return jsonJS(v) },
}).Parse(pageTemplateText))

func renderPage(p pageData) ([]byte, error) {
	for _, b := range p.Blocks {
		if b.Plot != nil {
			p.Plots = append(p.Plots, *b.Plot)
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// nav lists the index and every task page, marking the current one.
func (s *site) nav(current string) []navItem {
	items := []navItem{{Label: "Summary", Href: "index.html", Current: current == "index.html"}}
	for _, id := range s.tasks {
		if p := pageFor(id); p != nil && (len(s.runs[id]) > 0 || len(s.checks(id)) > 0) {
			items = append(items, navItem{Label: taskLabel(id), Href: id + ".html", Current: current == id+".html"})
		}
	}
	return items
}

// taskLabel turns "task1" into "Task 1".
func taskLabel(id string) string {
	if n, ok := taskNumber(id); ok {
		return fmt.Sprintf("Task %d", n)
	}
	return id
}

func footer(doc *results.Document) template.HTML {
	return template.HTML(fmt.Sprintf(`Written by ratelab's grader %s from <code>results.json</code> (schema <code>%s</code>). Charts: Apache ECharts %s, loaded from <code>echarts.min.js</code> beside this page (Apache License 2.0: <a href="echarts-LICENSE.txt">licence</a>, <a href="echarts-NOTICE.txt">notice</a>). Nothing is loaded from the network.`,
		template.HTMLEscapeString(doc.Env.GraderVersion), template.HTMLEscapeString(results.Schema), EchartsVersion))
}

// taskVerdict adds up the checks of task id.
func taskVerdict(checks []results.Check) verdict {
	d := results.Document{Checks: checks}
	d.Total()
	return verdict{Status: d.Status, Score: d.Score, Max: d.MaxScore}
}

// checksTable lists checks: status, points, name, and what was measured.
func checksTable(checks []results.Check) *table {
	t := &table{Class: "checks", Head: []string{"", "points", "check", "what was measured, against what"}}
	for _, c := range checks {
		msg := c.Message
		if c.Run != "" {
			msg += " (run " + c.Run + ")"
		}
		t.Rows = append(t.Rows, []cell{statusCell(c.Status), numCell(points(c.Score, c.MaxScore)), {Text: c.Name, Class: "name"}, {Text: msg, Class: "msg"}})
	}
	return t
}

// runsTable lists floods beside the model's predictions.
func runsTable(runs []*results.Run, task map[*results.Run]string) *table {
	t := &table{Class: "runs", Head: []string{"run", "task", "server", "offered", "timeout", "sent", "ok", "model ok", "goodput", "p99 ok", "model p99", "still waiting", "dead", "generator"}}
	for _, r := range runs {
		rel := "on schedule"
		cls := ""
		switch {
		case r.IsVirtual():
			rel = "virtual time"
		case !r.Reliable:
			rel, cls = "fell behind", "warn"
		}
		t.Rows = append(t.Rows, []cell{
			{Text: r.Name, Class: "name"}, textCell(task[r]), textCell(describeServer(r.Server)),
			numCell(fmtRate(r.OfferedRPS)), numCell(fmtSeconds(r.TimeoutS)), numCell(strconv.FormatInt(r.Issued, 10)),
			numCell(strconv.FormatInt(r.OK, 10)), numCell(predicted(r, "ok", "%.0f")), numCell(fmt.Sprintf("%.1f/s", r.GoodputRPS)),
			numCell(msOrDash(r.OK, r.P99MS)), numCell(predicted(r, "p99_ms", "%.0f ms")),
			numCell(serverCount(r, r.ServerAfterFlood.Waiting)), numCell(serverCount(r, r.ServerFinal.Dead)),
			{Text: rel, Class: cls, Title: strings.Join(r.Warnings, "; ")},
		})
	}
	return t
}

func fmtSeconds(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + " s" }

// indexPage is the summary: the score per task and per check, the floods,
// the notes and the machine.
func (s *site) indexPage(files map[string][]byte) pageData {
	doc := s.doc
	p := pageData{
		File: "index.html", Title: fmt.Sprintf("ratelab %s (%s): %s", doc.Task, doc.Impl, strings.ToUpper(string(doc.Status))),
		Heading: fmt.Sprintf("ratelab · %s · %s", doc.Task, orDefault(doc.Impl, "?")),
		Lead:    "The grader's verdict on every check, the floods it measured with the model's predictions beside them, and the machine it ran on. Each task's page draws the measurements.",
		Verdict: &verdict{Status: doc.Status, Score: doc.Score, Max: doc.MaxScore},
		Nav:     s.nav("index.html"),
		Footer:  footer(doc),
		Notes:   doc.Notes,
	}
	if !doc.Started.IsZero() {
		p.Facts = append(p.Facts, fact{"started", doc.Started.UTC().Format("2006-01-02 15:04:05 UTC")})
		if !doc.Finished.IsZero() {
			p.Facts = append(p.Facts, fact{"took", doc.Finished.Sub(doc.Started).Round(time.Second).String()})
		}
	}
	if doc.Practice {
		p.Warnings = append(p.Warnings, "Practice run (grade --quick): its floods were shorter than the lesson's 10 s, with the bounds scaled to their length. This is not the graded score; grade without --quick for that.")
	}
	if doc.Interrupted {
		p.Warnings = append(p.Warnings, "This run was interrupted (SIGINT or SIGTERM): it has no score; its checks and floods cover only what finished.")
	}
	if doc.Repeat > 1 {
		p.Facts = append(p.Facts, fact{"repeats", strconv.Itoa(doc.Repeat)})
		if n := countStatus(doc.Checks, results.StatusInconclusive); n > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("Each task was graded %d times and %d check(s) disagreed across the repeats: they are marked INCONCLUSIVE and score 0, with every repeat's verdict and values in their message. That is the measurement's noise, not a verdict on the code; grade again on a quieter machine.", doc.Repeat, n))
		}
	}

	tasks := &table{Class: "tasks", Head: []string{"task", "", "points", "checks passed", "page"}}
	for _, id := range s.tasks {
		checks := s.checks(id)
		v := taskVerdict(checks)
		passed := 0
		for _, c := range checks {
			if c.Status == results.StatusPass {
				passed++
			}
		}
		title := id
		page := cell{Text: "no page for this task yet"}
		if pg := pageFor(id); pg != nil {
			title = taskLabel(id) + ": " + pg.Title
			if _, ok := files[id+".html"]; ok {
				page = cell{Text: "charts →", Href: id + ".html"}
			}
		}
		tasks.Rows = append(tasks.Rows, []cell{{Text: title, Class: "name"}, statusCell(v.Status), numCell(v.Points()),
			numCell(fmt.Sprintf("%d of %d", passed, len(checks))), page})
	}
	p.Blocks = append(p.Blocks, block{ID: "tasks", Heading: "Score per task", Table: tasks})

	for _, id := range s.tasks {
		checks := s.checks(id)
		if len(checks) == 0 {
			continue
		}
		title := taskLabel(id)
		if pg := pageFor(id); pg != nil {
			title += ": " + pg.Title
		}
		v := taskVerdict(checks)
		p.Blocks = append(p.Blocks, block{ID: id, Heading: fmt.Sprintf("%s — %s", title, v.Points()), Table: checksTable(checks)})
	}
	if orphans := s.checks(""); len(orphans) > 0 {
		p.Blocks = append(p.Blocks, block{ID: "other-checks", Heading: "Other checks", Table: checksTable(orphans)})
	}

	if len(doc.Runs) > 0 {
		taskOf := map[*results.Run]string{}
		for id, runs := range s.runs {
			for _, r := range runs {
				taskOf[r] = id
			}
		}
		var runs []*results.Run
		for _, r := range doc.Runs {
			if r != nil {
				runs = append(runs, r)
			}
		}
		p.Blocks = append(p.Blocks, block{ID: "floods", Heading: "Floods",
			Text:  "Every open-loop flood, with the model's prediction beside the measurement. \"Still waiting\" is the server's line when the last client had its answer or gave up; \"dead\" is work the server finished for clients who had already gone.",
			Table: runsTable(runs, taskOf)})
		for _, r := range runs {
			for _, w := range r.Warnings {
				p.Warnings = append(p.Warnings, r.Name+": "+w)
			}
		}
	}

	env := doc.Env
	envTable := &table{Class: "env", Head: []string{"", ""}}
	for _, kv := range []fact{
		{"Go", env.GoVersion}, {"OS / arch", env.OS + " / " + env.Arch},
		{"CPUs / GOMAXPROCS", fmt.Sprintf("%d / %d", env.CPUs, env.GOMAXPROCS)},
		{"commit", orDefault(env.Commit, "unknown")}, {"grader", env.GraderVersion},
		{"written", env.Time.UTC().Format(time.RFC3339)},
	} {
		envTable.Rows = append(envTable.Rows, []cell{{Text: kv.Key, Class: "name"}, textCell(kv.Value)})
	}
	p.Blocks = append(p.Blocks, block{ID: "env", Heading: "Environment", Table: envTable})
	return p
}

// taskPage is one task's page: its score and checks, then its charts.
func (s *site) taskPage(pg *taskPage) pageData {
	checks := s.checks(pg.ID)
	v := taskVerdict(checks)
	p := pageData{
		File: pg.ID + ".html", Title: fmt.Sprintf("ratelab %s: %s", pg.ID, pg.Title),
		Heading: taskLabel(pg.ID) + ": " + pg.Title, Lead: pg.Lead,
		Nav: s.nav(pg.ID + ".html"), Footer: footer(s.doc),
	}
	if len(checks) > 0 {
		p.Verdict = &v
	}
	runs := s.runs[pg.ID]
	for _, r := range runs {
		if !r.Reliable {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: the load generator fell behind its schedule, so checks on this run were not judged. %s", r.Name, strings.Join(r.Warnings, "; ")))
		}
	}
	if len(runs) == 0 && (pg.Draws == nil || !pg.Draws(s.doc)) {
		p.Blocks = append(p.Blocks, block{ID: "no-runs", Heading: "No floods", Text: "This document holds no floods for this task: the floods were skipped (see the checks) or the run stopped early."})
	} else {
		p.Blocks = append(p.Blocks, pg.Build(s, runs)...)
	}
	if len(checks) > 0 {
		p.Blocks = append(p.Blocks, block{ID: "checks", Heading: fmt.Sprintf("Checks — %s", v.Points()), Table: checksTable(checks)})
	}
	return p
}
