package grader

import (
	"flag"
	"fmt"
	"os"
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
// notYetShown saying why not.

// shown holds the checks, as "taskN: name", that a passing test saw fail.
var shown sync.Map

// shownFailing counts c, a check of task taskID, as shown to fail if t
// passes with c failed. Tests of a check's logic call it on the check they
// fed wrong measurements.
func shownFailing(t *testing.T, taskID string, c results.Check) {
	t.Cleanup(func() {
		if !t.Failed() && c.Status == results.StatusFail {
			shown.Store(taskID+": "+c.Name, t.Name())
		}
	})
}

// notYetShown lists the checks, as "taskN: name", that neither a wrong
// variant nor a test of the check's logic has shown to fail yet, each with
// the reason. Every entry is a gap in the grader's evidence; it should be
// empty.
var notYetShown = map[string]string{}

// neverShownToFail returns the planned checks of every task with no
// evidence that they can fail, and the entries of notYetShown that now have
// some.
func neverShownToFail() (missing, stale []string, err error) {
	root, err := FindRoot(".")
	if err != nil {
		return nil, nil, err
	}
	variants, err := corpus.Load(root)
	if err != nil {
		return nil, nil, err
	}
	evidence := map[string]bool{}
	shown.Range(func(k, _ any) bool { evidence[k.(string)] = true; return true })
	for _, v := range variants {
		if v.Kind != corpus.Wrong {
			continue
		}
		task, ok := Lookup(v.Task)
		if !ok {
			return nil, nil, fmt.Errorf("%s: unknown task %s", v.Path, v.Task)
		}
		for _, sub := range v.CaughtBy {
			if c, ok := unitCheckOf(task, sub); ok {
				evidence[v.Task+": unit: "+c.Name] = true
			}
		}
		for _, name := range v.CaughtByChecks {
			evidence[v.Task+": "+name] = true
		}
	}
	for _, task := range Tasks() {
		for _, c := range expectedChecks(task, false) {
			key := task.ID + ": " + c.name
			switch {
			case !evidence[key] && notYetShown[key] == "":
				missing = append(missing, key)
			case evidence[key] && notYetShown[key] != "":
				stale = append(stale, key)
			}
		}
	}
	return missing, stale, nil
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
		missing, stale, err := neverShownToFail()
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "FAIL: the checks that can fail:", err)
			code = 1
		case len(missing) > 0:
			slices.Sort(missing)
			fmt.Fprintf(os.Stderr, "FAIL: %d checks were never shown to fail: give each a wrong variant (%s/README.md) or a test of its logic that calls shownFailing:\n\t%s\n",
				len(missing), corpus.Dir, strings.Join(missing, "\n\t"))
			code = 1
		case len(stale) > 0:
			fmt.Fprintf(os.Stderr, "FAIL: these checks are shown to fail now: take them out of notYetShown:\n\t%s\n", strings.Join(stale, "\n\t"))
			code = 1
		}
	}
	os.Exit(code)
}
