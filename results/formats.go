package results

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Location points a check at the file a learner edits, for annotations and
// the autograders' filename fields.
type Location struct {
	File string
	Line int
}

// Locator returns where a task's checks point, or a zero Location.
type Locator func(task string) Location

// junitSuites is JUnit's XML: one testsuite per task, one testcase per check.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Name    string       `xml:"name,attr"`
	Time    string       `xml:"time,attr"` // seconds
	Tests   int          `xml:"tests,attr"`
	Fails   int          `xml:"failures,attr"`
	Errors  int          `xml:"errors,attr"`
	Skipped int          `xml:"skipped,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name    string      `xml:"name,attr"`
	Time    string      `xml:"time,attr"` // seconds
	Tests   int         `xml:"tests,attr"`
	Fails   int         `xml:"failures,attr"`
	Errors  int         `xml:"errors,attr"`
	Skipped int         `xml:"skipped,attr"`
	Cases   []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"` // seconds; checks are not timed one by one: 0
	File      string        `xml:"file,attr,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes doc as JUnit XML: a testsuite per task, a testcase per
// check (classname ratelab.taskN), with failures, errors and skips, and the
// score of each check in its system-out. An inconclusive check is an error
// of type "inconclusive": like ratelab's own errors it could not be judged,
// and CI systems show errors as loudly as failures (a skip is easily
// missed). Times are in seconds: the whole grading on testsuites, each
// task's grading on its testsuite (TaskSeconds), and 0 on each testcase,
// since checks are judged together, not timed one by one.
func WriteJUnit(w io.Writer, doc *Document, loc Locator) error {
	out := junitSuites{Name: "ratelab " + doc.Task, Time: junitSeconds(doc.Finished.Sub(doc.Started).Seconds())}
	byTask := map[string]*junitSuite{}
	var order []string
	for _, c := range doc.Checks {
		s := byTask[c.Task]
		if s == nil {
			s = &junitSuite{Name: "ratelab." + c.Task, Time: junitSeconds(doc.TaskSeconds[c.Task])}
			byTask[c.Task] = s
			order = append(order, c.Task)
		}
		tc := junitCase{Name: c.Name, Classname: "ratelab." + c.Task, Time: "0.000", SystemOut: fmt.Sprintf("score %g of %g: %s", c.Score, c.MaxScore, c.Message)}
		if loc != nil {
			tc.File = loc(c.Task).File
		}
		switch c.Status {
		case StatusFail:
			tc.Failure = &junitProblem{Message: c.Message, Text: c.Message}
			s.Fails++
		case StatusError:
			tc.Error = &junitProblem{Message: c.Message, Text: c.Message}
			s.Errors++
		case StatusInconclusive:
			msg := "inconclusive: " + c.Message
			tc.Error = &junitProblem{Message: msg, Type: string(StatusInconclusive), Text: msg}
			s.Errors++
		case StatusSkip:
			tc.Skipped = &junitProblem{Message: c.Message}
			s.Skipped++
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
	for _, t := range order {
		s := byTask[t]
		out.Suites = append(out.Suites, *s)
		out.Tests += s.Tests
		out.Fails += s.Fails
		out.Errors += s.Errors
		out.Skipped += s.Skipped
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// junitSeconds formats a duration in seconds as JUnit's time attribute.
func junitSeconds(s float64) string {
	if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		s = 0
	}
	return strconv.FormatFloat(s, 'f', 3, 64)
}

// ClassroomResult is the JSON that GitHub Classroom's
// autograding-grading-reporter reads (base64-encoded) from a runner step.
type ClassroomResult struct {
	Version  int             `json:"version"`
	Status   string          `json:"status"` // pass, fail or error
	MaxScore float64         `json:"max_score"`
	Tests    []ClassroomTest `json:"tests"`
}

// ClassroomTest is one check in ClassroomResult.
type ClassroomTest struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"` // pass, fail or error
	Score    float64 `json:"score"`
	Message  string  `json:"message"`
	TestCode string  `json:"test_code"`
	Filename string  `json:"filename"`
	LineNo   int     `json:"line_no"`
	Duration int     `json:"duration"` // milliseconds
}

// Classroom converts doc to GitHub Classroom's format, shaped for what its
// reporter (classroom-resources/autograding-grading-reporter v1) prints:
//
//   - Its "Total points" line is passed tests / all tests × max_score, not
//     the sum of the scores. So a check worth k whole points becomes k tests
//     of one point each ("(point 2 of 3)"), all passing or all failing, and
//     the printed total is exactly the document's score. A check whose
//     points are not whole, or that is worth none (an error such as a
//     failed calibration, in a document that is an error anyway), is one
//     test; the printed total is then not exact.
//   - It prints a failed test's name and test_code but never its message,
//     and an error's message but never its name. So a failed check's name
//     carries its reason, test_code the command that replays it (with the
//     run's seed), and an error's message starts with its name.
//
// A skipped check counts as failed with score 0, since the reporter knows
// no skips. An inconclusive check (or document) is reported as an error,
// score 0, its message saying so: the reporter knows only pass, fail and
// error, and error is the one that does not blame the learner for noise.
func Classroom(doc *Document, loc Locator) ClassroomResult {
	out := ClassroomResult{Version: 1, Status: classroomStatus(doc.Status), MaxScore: doc.MaxScore, Tests: []ClassroomTest{}}
	for _, c := range doc.Checks {
		status := classroomStatus(c.Status)
		name := c.Task + ": " + c.Name
		msg := c.Message
		if c.Status == StatusInconclusive {
			msg = "inconclusive: " + msg
		}
		first := ClassroomTest{Name: name, Status: status, Message: msg}
		switch status {
		case "fail":
			first.Name = name + " — " + firstLine(msg, classroomReasonMax)
			first.TestCode = replayCommand(doc, c.Task)
		case "error":
			first.Message = name + ": " + msg
		}
		if loc != nil {
			l := loc(c.Task)
			first.Filename, first.LineNo = l.File, l.Line
		}
		points := 1
		if k := c.MaxScore; k >= 1 && k == float64(int(k)) {
			points = int(k)
		}
		for i := range points {
			t := first
			if points > 1 {
				t.Name = fmt.Sprintf("%s (point %d of %d)", name, i+1, points)
				if i == 0 {
					t.Name = fmt.Sprintf("%s (point 1 of %d)", first.Name, points)
				} else {
					t.Message, t.TestCode = "", ""
				}
			}
			t.Score = c.Score / float64(points)
			out.Tests = append(out.Tests, t)
		}
	}
	return out
}

// classroomReasonMax bounds the reason a failed test's name carries.
const classroomReasonMax = 240

// firstLine returns s up to its first newline, shortened to at most max
// bytes (on a rune boundary) with "…" when cut.
func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// replayCommand is the command that grades task again with doc's seed.
func replayCommand(doc *Document, task string) string {
	if doc.Seed != 0 {
		return fmt.Sprintf("go run ./cmd/grade %s --seed %d", task, doc.Seed)
	}
	return "go run ./cmd/grade " + task
}

func classroomStatus(s Status) string {
	switch s {
	case StatusPass:
		return "pass"
	case StatusError, StatusInconclusive, StatusInterrupted:
		return "error"
	}
	return "fail"
}

// ClassroomBase64 returns Classroom(doc) as base64-encoded JSON, the value a
// runner step sets as its `result` output.
func ClassroomBase64(doc *Document, loc Locator) (string, error) {
	b, err := json.Marshal(Classroom(doc, loc))
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// GradescopeResult is Gradescope's results.json.
type GradescopeResult struct {
	Score         float64          `json:"score"`
	ExecutionTime int              `json:"execution_time"` // seconds
	Output        string           `json:"output"`
	Tests         []GradescopeTest `json:"tests"`
}

// GradescopeTest is one check in GradescopeResult.
type GradescopeTest struct {
	Name       string  `json:"name"`
	Score      float64 `json:"score"`
	MaxScore   float64 `json:"max_score"`
	Status     string  `json:"status"` // passed or failed
	Output     string  `json:"output"`
	Visibility string  `json:"visibility"`
}

// Gradescope converts doc to Gradescope's results.json. Gradescope knows
// only passed and failed: an inconclusive check is failed with score 0 and
// an output that says its repeats disagreed and that it deserves a regrade
// rather than a fix.
func Gradescope(doc *Document) GradescopeResult {
	out := GradescopeResult{
		Score:         doc.Score,
		ExecutionTime: int(doc.Finished.Sub(doc.Started).Seconds()),
		Output:        fmt.Sprintf("ratelab %s (%s): %s, %g of %g", doc.Task, doc.Impl, doc.Status, doc.Score, doc.MaxScore),
		Tests:         []GradescopeTest{},
	}
	if len(doc.Notes) > 0 {
		out.Output += "\n" + strings.Join(doc.Notes, "\n")
	}
	for _, c := range doc.Checks {
		st := "failed"
		if c.Status == StatusPass {
			st = "passed"
		}
		output := c.Message
		if c.Status == StatusInconclusive {
			output = "INCONCLUSIVE: this check was graded several times and the repeats disagreed, so it scores 0 until it is graded again; " +
				"that is the measurement's noise, not a verdict on your code.\n" + c.Message
		}
		out.Tests = append(out.Tests, GradescopeTest{
			Name: c.Task + ": " + c.Name, Score: c.Score, MaxScore: c.MaxScore,
			Status: st, Output: output, Visibility: "visible",
		})
	}
	return out
}

// Annotation is a GitHub Actions workflow command pointing at a file.
type Annotation struct {
	Location
	// Level is the command: "error" (the default when empty) or "warning".
	Level   string
	Title   string
	Message string
}

// maxAnnotations is how many annotations of a kind GitHub keeps per step.
const maxAnnotations = 10

// Annotations returns at most ten annotations for the checks that did not
// pass, the most valuable (by points) first: errors, except for
// inconclusive checks, which are warnings, since their repeats disagreed
// and the code may well be right.
func Annotations(doc *Document, loc Locator) []Annotation {
	var failed []Check
	for _, c := range doc.Checks {
		if c.Status != StatusPass {
			failed = append(failed, c)
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return failed[i].MaxScore > failed[j].MaxScore })
	var out []Annotation
	for _, c := range failed[:min(len(failed), maxAnnotations)] {
		a := Annotation{Title: fmt.Sprintf("%s: %s (0 of %g)", c.Task, c.Name, c.MaxScore), Message: c.Message}
		if c.Status == StatusInconclusive {
			a.Level = "warning"
			a.Title = fmt.Sprintf("%s: %s (inconclusive, 0 of %g)", c.Task, c.Name, c.MaxScore)
		}
		if loc != nil {
			a.Location = loc(c.Task)
		}
		out = append(out, a)
	}
	return out
}

// String formats a as a GitHub workflow command (::error file=...::msg, or
// ::warning), escaping what the command syntax requires.
func (a Annotation) String() string {
	esc := func(s string) string {
		return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
	}
	escProp := func(s string) string {
		return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
	}
	var props []string
	if a.File != "" {
		props = append(props, "file="+escProp(a.File))
		if a.Line > 0 {
			props = append(props, fmt.Sprintf("line=%d", a.Line))
		}
	}
	props = append(props, "title="+escProp(a.Title))
	level := a.Level
	if level == "" {
		level = "error"
	}
	return "::" + level + " " + strings.Join(props, ",") + "::" + esc(a.Message)
}
