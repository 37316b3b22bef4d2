// Command testcount reads go test -json (test2json events) on stdin and
// prints one line per top-level test: how many times it ran, how many of
// those runs failed, and the seconds they took in all, worst first. It is
// how .ci/stress counts the failures of a test run N times with -count=N.
//
//	go test -race -count=20 -json ./grader/ | go run ./internal/cmd/testcount
//
// A package whose binary failed without any test failing (a crash, a
// TestMain check, a timeout) is printed as a line of its own, since no
// test carries that failure.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is the part of a test2json event that is counted.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
}

// count is one test's runs, failures and seconds over every run.
type count struct {
	pkg, test     string
	runs, failed  int
	skipped       int
	seconds       float64
	packageFailed bool
}

func main() {
	counts, err := tally(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcount:", err)
		os.Exit(1)
	}
	write(os.Stdout, counts)
}

// tally counts the top-level tests' end events of r.
func tally(r io.Reader) ([]*count, error) {
	byName := map[string]*count{}
	var order []*count
	get := func(pkg, test string) *count {
		k := pkg + "\x00" + test
		c := byName[k]
		if c == nil {
			c = &count{pkg: pkg, test: test}
			byName[k] = c
			order = append(order, c)
		}
		return c
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // build output, or the text of a crashed binary
		}
		var e event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		switch {
		case e.Test == "" && e.Action == "fail":
			get(e.Package, "").packageFailed = true
		case e.Test == "" || strings.Contains(e.Test, "/"):
		case e.Action == "pass" || e.Action == "fail":
			c := get(e.Package, e.Test)
			c.runs++
			c.seconds += e.Elapsed
			if e.Action == "fail" {
				c.failed++
			}
		case e.Action == "skip":
			get(e.Package, e.Test).skipped++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(order, func(a, b *count) int {
		if a.failed != b.failed {
			return b.failed - a.failed
		}
		switch {
		case a.seconds > b.seconds:
			return -1
		case a.seconds < b.seconds:
			return 1
		}
		return 0
	})
	return order, nil
}

// write prints counts, a line each, and the totals.
func write(w io.Writer, counts []*count) {
	runs, failed, tests := 0, 0, 0
	for _, c := range counts {
		if c.test == "" {
			if c.packageFailed && !slices.ContainsFunc(counts, func(o *count) bool { return o.pkg == c.pkg && o.failed > 0 }) {
				fmt.Fprintf(w, "FAIL %s: the test binary failed with no test failing (a crash, TestMain, or the timeout)\n", c.pkg)
			}
			continue
		}
		if c.runs == 0 {
			fmt.Fprintf(w, "skip %s %s: skipped %d times\n", c.pkg, c.test, c.skipped)
			continue
		}
		mark := "ok  "
		if c.failed > 0 {
			mark = "FAIL"
		}
		tests++
		runs += c.runs
		failed += c.failed
		fmt.Fprintf(w, "%s %s %s: %d runs, %d failed, %.1f s\n", mark, c.pkg, c.test, c.runs, c.failed, c.seconds)
	}
	fmt.Fprintf(w, "%d tests, %d runs, %d failed\n", tests, runs, failed)
}
