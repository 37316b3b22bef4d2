package grader

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"ratelab/grader/corpus"
	"ratelab/results"
)

// Every check the grader scores must be shown to fail on something wrong: a
// check that nothing wrong fails has not shown that it can fail. Two kinds
// of evidence count:
//
//   - a wrong variant of the corpus that names the check (its Caught-By
//     subtest for a unit check, its Caught-By-Check line for a flood
//     check); the slow corpus tests prove that each such variant does fail
//     it;
//   - a test of the check's own logic that fed it the measurements of a
//     wrong server or implementation and saw it fail (shownFailing).
//
// TestMain checks, after a whole run of the package's tests, that every
// planned check of every task has one or the other, or an entry in
// notYetShown saying why not, and that the evidence table in
// docs/VALIDITY.md says what the code does.

// shown maps the checks, as "taskN: name", that a passing test saw fail to
// the top-level tests that saw it.
var shown sync.Map

// shownFailing counts c, a check of task taskID, as shown to fail if t
// passes with c failed. Tests of a check's logic call it on the check they
// fed wrong measurements. They must not depend on the machine (Redis,
// race detector), so that the evidence is the same everywhere.
func shownFailing(t *testing.T, taskID string, c results.Check) {
	t.Cleanup(func() {
		if !t.Failed() && c.Status == results.StatusFail {
			top, _, _ := strings.Cut(t.Name(), "/")
			v, _ := shown.LoadOrStore(taskID+": "+c.Name, &sync.Map{})
			v.(*sync.Map).Store(top, true)
		}
	})
}

// notYetShown lists the checks, as "taskN: name", that neither a wrong
// variant nor a test of the check's logic has shown to fail yet, each with
// the reason. Every entry is a gap in the grader's evidence; it should be
// empty.
var notYetShown = map[string]string{}

// evidenceRow is one check and what shows it can fail.
type evidenceRow struct {
	task, check string
	points      float64
	variants    []string // wrong variants that name it, as wrong/taskN/name
	tests       []string // tests of its logic that saw it fail
}

// evidence returns one row per planned check of every task, in order.
func evidence() ([]evidenceRow, error) {
	root, err := FindRoot(".")
	if err != nil {
		return nil, err
	}
	variants, err := corpus.Load(root)
	if err != nil {
		return nil, err
	}
	byCheck := map[string][]string{}
	for _, v := range variants {
		if v.Kind != corpus.Wrong {
			continue
		}
		task, ok := Lookup(v.Task)
		if !ok {
			return nil, fmt.Errorf("%s: unknown task %s", v.Path, v.Task)
		}
		id := "wrong/" + v.ID()
		for _, sub := range v.CaughtBy {
			if c, ok := unitCheckOf(task, sub); ok {
				key := v.Task + ": unit: " + c.Name
				if !slices.Contains(byCheck[key], id) {
					byCheck[key] = append(byCheck[key], id)
				}
			}
		}
		for _, name := range v.CaughtByChecks {
			byCheck[v.Task+": "+name] = append(byCheck[v.Task+": "+name], id)
		}
	}
	var rows []evidenceRow
	for _, task := range Tasks() {
		for _, c := range expectedChecks(task, false) {
			key := task.ID + ": " + c.name
			row := evidenceRow{task: task.ID, check: c.name, points: c.points, variants: byCheck[key]}
			if v, ok := shown.Load(key); ok {
				v.(*sync.Map).Range(func(k, _ any) bool { row.tests = append(row.tests, k.(string)); return true })
			}
			slices.Sort(row.variants)
			slices.Sort(row.tests)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// neverShownToFail returns the planned checks with no evidence that they
// can fail, and the entries of notYetShown that now have some.
func neverShownToFail(rows []evidenceRow) (missing, stale []string) {
	for _, r := range rows {
		key := r.task + ": " + r.check
		has := len(r.variants)+len(r.tests) > 0
		switch {
		case !has && notYetShown[key] == "":
			missing = append(missing, key)
		case has && notYetShown[key] != "":
			stale = append(stale, key)
		}
	}
	return missing, stale
}

// The evidence table's place in docs/VALIDITY.md, and the variable that
// makes TestMain rewrite it.
const (
	validityDoc     = "docs/VALIDITY.md"
	tableBegin      = "<!-- evidence table: written by the grader's tests; do not edit by hand -->"
	tableEnd        = "<!-- end of evidence table -->"
	updateTableEnv  = "RATELAB_UPDATE_VALIDITY"
	variantsPerCell = 3
)

// evidenceTable renders rows as the Markdown table of docs/VALIDITY.md.
func evidenceTable(rows []evidenceRow) string {
	var b strings.Builder
	b.WriteString("| task | check | points | wrong variants that fail it | tests of its logic |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		vs := r.variants
		more := ""
		if len(vs) > variantsPerCell {
			more = fmt.Sprintf(" and %d more", len(vs)-variantsPerCell)
			vs = vs[:variantsPerCell]
		}
		cell := func(xs []string) string {
			if len(xs) == 0 {
				return "—"
			}
			return "`" + strings.Join(xs, "`, `") + "`"
		}
		why := ""
		if w := notYetShown[r.task+": "+r.check]; w != "" {
			why = " (not yet shown: " + w + ")"
		}
		fmt.Fprintf(&b, "| %s | %s%s | %g | %s%s | %s |\n", r.task, strings.ReplaceAll(r.check, "|", "\\|"), why, r.points, cell(vs), more, cell(r.tests))
	}
	return b.String()
}

// checkValidityDoc compares the evidence table in docs/VALIDITY.md with
// rows, or rewrites it under RATELAB_UPDATE_VALIDITY=1.
func checkValidityDoc(rows []evidenceRow) error {
	root, err := FindRoot(".")
	if err != nil {
		return err
	}
	path := filepath.Join(root, validityDoc)
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(tableBegin)), bytes.Index(doc, []byte(tableEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no evidence table between %q and %q", validityDoc, tableBegin, tableEnd)
	}
	want := evidenceTable(rows)
	have := string(doc[i+len(tableBegin) : j])
	if strings.TrimSpace(have) == strings.TrimSpace(want) {
		return nil
	}
	if os.Getenv(updateTableEnv) == "1" {
		out := append(append(append([]byte{}, doc[:i+len(tableBegin)]...), "\n\n"+want+"\n"...), doc[j:]...)
		return os.WriteFile(path, out, 0o644)
	}
	return fmt.Errorf("the evidence table in %s is out of date: rewrite it with %s=1 go test ./grader/", validityDoc, updateTableEnv)
}

// wholeRun reports whether this run of the package's tests ran every test,
// so that shown is complete.
func wholeRun() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && wholeRun() {
		if err := canFail(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// canFail checks the evidence that every check can fail, and its table.
func canFail() error {
	rows, err := evidence()
	if err != nil {
		return fmt.Errorf("the checks that can fail: %w", err)
	}
	missing, stale := neverShownToFail(rows)
	if len(missing) > 0 {
		return fmt.Errorf("%d checks were never shown to fail: give each a wrong variant (%s/README.md) or a test of its logic that calls shownFailing:\n\t%s",
			len(missing), corpus.Dir, strings.Join(missing, "\n\t"))
	}
	if len(stale) > 0 {
		return fmt.Errorf("these checks are shown to fail now: take them out of notYetShown:\n\t%s", strings.Join(stale, "\n\t"))
	}
	return checkValidityDoc(rows)
}
