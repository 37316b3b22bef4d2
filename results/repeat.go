package results

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// RepeatValue is one repeat's verdict on a check graded several times: what
// reports show to draw the spread.
type RepeatValue struct {
	Repeat   int                `json:"repeat"` // 1 for the first repeat
	Status   Status             `json:"status"`
	Score    float64            `json:"score"`
	Measured map[string]float64 `json:"measured,omitempty"`
}

// Combine folds the documents of one task graded len(docs) times, in the
// order they were graded, into one document whose Repeat is len(docs). A
// single document is returned as it is. It is an error to combine no
// documents, or documents of different tasks or trees. The documents are
// not modified.
//
// Checks are matched by task and name (and, should a name repeat within a
// document, by occurrence), in the order the first document holds them,
// then any that only later repeats reached. Each combined check keeps every
// repeat's status, score and measurements in Repeats and ends its message
// with the list of them, so a pass or a fail is never silent about the
// spread. Its status follows these rules:
//
//   - Passes and fails are the judged repeats. Errors (not judged, such as a
//     flood the load generator could not keep on schedule), skips and
//     repeats that never reached the check (an interrupted run) abstain:
//     they are listed but do not vote.
//   - Every judged repeat passed: pass, with the lowest of their scores and
//     the first passing repeat's message and figures.
//   - Every judged repeat failed: fail, likewise from the first failing
//     repeat.
//   - Judged repeats disagree: StatusInconclusive, score 0, the message
//     "runs disagree: " with every repeat's verdict and measured values,
//     then the first failing repeat's message (it says what the tolerance
//     was), whose figures and run the check keeps.
//   - No judged repeat: error if any repeat errored, else skip, from the
//     first such repeat.
//
// Every repeat's runs, storms and scenarios are kept, those of repeat k ≥ 2
// copied with " (repeat k)" after their names, and checks name the run of
// the repeat their figures come from. Notes are kept once each, and one
// more says how the repeats went. The judge report and the integrity
// record are the first repeat's that has one; the environment and start
// are the first repeat's, the end the last's. The document is interrupted
// if any repeat was, and its status and score are recomputed (Total). The
// signature is dropped: sign the combined document.
func Combine(docs []*Document) (*Document, error) {
	if len(docs) == 0 {
		return nil, errors.New("results: combine: no documents")
	}
	for i, d := range docs {
		if d == nil {
			return nil, fmt.Errorf("results: combine: repeat %d has no document", i+1)
		}
		if d.Task != docs[0].Task || d.Impl != docs[0].Impl {
			return nil, fmt.Errorf("results: combine: repeat %d graded %s (%s), repeat 1 %s (%s)", i+1, d.Task, d.Impl, docs[0].Task, docs[0].Impl)
		}
	}
	if len(docs) == 1 {
		return docs[0], nil
	}
	first, last := docs[0], docs[len(docs)-1]
	out := &Document{
		Schema: first.Schema, Task: first.Task, Impl: first.Impl, Practice: first.Practice,
		Started: first.Started, Finished: last.Finished, Env: first.Env, Repeat: len(docs),
		Checks: []Check{}, Runs: []*Run{},
	}

	// Match the checks across repeats.
	type key struct {
		task, name string
		nth        int
	}
	var order []key
	byKey := map[key][]*Check{}
	for i, d := range docs {
		seen := map[[2]string]int{}
		for j := range d.Checks {
			c := &d.Checks[j]
			name := [2]string{c.Task, c.Name}
			k := key{c.Task, c.Name, seen[name]}
			seen[name]++
			if byKey[k] == nil {
				byKey[k] = make([]*Check, len(docs))
				order = append(order, k)
			}
			byKey[k][i] = c
		}
	}
	inconclusive := 0
	for _, k := range order {
		c := combineCheck(byKey[k])
		if c.Status == StatusInconclusive {
			inconclusive++
		}
		out.Checks = append(out.Checks, c)
	}

	for i, d := range docs {
		out.Interrupted = out.Interrupted || d.Interrupted
		out.Practice = out.Practice || d.Practice
		if out.Judge == nil && d.Judge != nil {
			out.Judge = d.Judge
		}
		if out.Integrity == nil {
			out.Integrity = d.Integrity
		}
		if out.Seed == 0 {
			out.Seed = d.Seed
		}
		for task, secs := range d.TaskSeconds {
			if out.TaskSeconds == nil {
				out.TaskSeconds = map[string]float64{}
			}
			out.TaskSeconds[task] += secs
		}
		if out.Redis == nil {
			out.Redis = d.Redis
		}
		// The first repeat's cluster, unless a later one also ran the
		// failover the first skipped: its check's figures are there.
		if out.Cluster == nil || out.Cluster.Failover == nil && d.Cluster != nil && d.Cluster.Failover != nil {
			out.Cluster = d.Cluster
		}
		for _, n := range d.Notes {
			if !slices.Contains(out.Notes, n) {
				out.Notes = append(out.Notes, n)
			}
		}
		for _, r := range d.Runs {
			out.Runs = append(out.Runs, repeatRun(r, i+1))
		}
		for _, st := range d.Storms {
			if st != nil && i > 0 {
				c := *st
				c.Name = repeatName(st.Name, i+1)
				st = &c
			}
			out.Storms = append(out.Storms, st)
		}
		for _, sc := range d.Scenarios {
			if sc != nil && i > 0 {
				c := *sc
				c.Name = repeatName(sc.Name, i+1)
				c.Run = repeatRun(sc.Run, i+1)
				sc = &c
			}
			out.Scenarios = append(out.Scenarios, sc)
		}
		out.Counting = append(out.Counting, d.Counting...)
		for _, p := range d.BucketPlays {
			if p != nil && i > 0 {
				c := *p
				c.Name = repeatName(p.Name, i+1)
				p = &c
			}
			out.BucketPlays = append(out.BucketPlays, p)
		}
	}
	note := fmt.Sprintf("%s graded %d times: every check agreed across the repeats", out.Task, len(docs))
	if inconclusive > 0 {
		note = fmt.Sprintf("%s graded %d times: %d check(s) disagreed across the repeats and are marked inconclusive, with each repeat's values; that is the measurement's noise, not a verdict on the code", out.Task, len(docs), inconclusive)
	}
	out.Notes = append(out.Notes, note)
	out.Total()
	return out, nil
}

// combineCheck combines one check's repeats (nil where a repeat did not
// reach it) by Combine's rules.
func combineCheck(reps []*Check) Check {
	var pass, fail, errs, skips []int // repeat indexes by verdict
	var values []RepeatValue
	var verdicts []string
	for i, r := range reps {
		if r == nil {
			verdicts = append(verdicts, "not reached")
			continue
		}
		values = append(values, RepeatValue{Repeat: i + 1, Status: r.Status, Score: r.Score, Measured: r.Measured})
		verdicts = append(verdicts, verdictText(r))
		switch r.Status {
		case StatusPass:
			pass = append(pass, i)
		case StatusFail:
			fail = append(fail, i)
		case StatusError:
			errs = append(errs, i)
		default: // skip, or a status this version does not know
			skips = append(skips, i)
		}
	}
	list := strings.Join(verdicts, ", ")

	// from takes the check as repeat i recorded it, naming that repeat's run.
	from := func(i int) Check {
		c := *reps[i]
		c.Run = repeatName(c.Run, i+1)
		c.Repeats = values
		return c
	}
	lowest := func(idx []int) float64 {
		s := math.Inf(1)
		for _, i := range idx {
			s = math.Min(s, reps[i].Score)
		}
		return s
	}
	var c Check
	switch {
	case len(pass) > 0 && len(fail) > 0:
		c = from(fail[0])
		c.Status, c.Score = StatusInconclusive, 0
		c.Message = fmt.Sprintf("runs disagree: %s. Repeat %d: %s", list, fail[0]+1, reps[fail[0]].Message)
		return c
	case len(fail) > 0:
		c = from(fail[0])
		c.Score = lowest(fail)
	case len(pass) > 0:
		c = from(pass[0])
		c.Score = lowest(pass)
	case len(errs) > 0:
		c = from(errs[0])
	default:
		c = from(skips[0])
	}
	c.Message = strings.TrimSpace(c.Message + fmt.Sprintf(" [%d repeats: %s]", len(reps), list))
	return c
}

// verdictText is one repeat's verdict with its measurements, such as
// "pass (ok 812, p99_ms 130)".
func verdictText(c *Check) string {
	if len(c.Measured) == 0 {
		return string(c.Status)
	}
	keys := make([]string, 0, len(c.Measured))
	for k := range c.Measured {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + formatValue(c.Measured[k])
	}
	return fmt.Sprintf("%s (%s)", c.Status, strings.Join(parts, ", "))
}

// formatValue writes a measurement briefly: whole numbers and values of at
// least 100 without decimals, smaller ones to three significant digits.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) || math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// repeatName names a run, storm or scenario of repeat k: unchanged for the
// first repeat, else with " (repeat k)" after it. An empty name stays
// empty.
func repeatName(name string, k int) string {
	if k <= 1 || name == "" {
		return name
	}
	return fmt.Sprintf("%s (repeat %d)", name, k)
}

// repeatRun returns r as repeat k's: r itself for the first repeat, else a
// copy under its repeat's name.
func repeatRun(r *Run, k int) *Run {
	if r == nil || k <= 1 {
		return r
	}
	c := *r
	c.Name = repeatName(r.Name, k)
	return &c
}
