package main

import (
	"strings"
	"testing"

	"ratelab/harness"
)

// FuzzParseLine feeds the command-line parser any arguments: it never
// panics, and every command line it accepts names a command.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"task3", "--out x all", "flood 120 --seconds 5", "-h", "flood -h", "--quick", "cohort a b --csv", "task1 --seed", "nosuch"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := parseLine(strings.Fields(s))
		if err == nil && (l == nil || l.cmd == nil || l.run == nil) {
			t.Fatalf("parseLine(%q) accepted a line without a command", s)
		}
	})
}

// FuzzParseRate feeds parseRate any string: a rate it accepts is above 0
// and at most harness.MaxRate, and a refusal is a usage error.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "NaN", "Inf", "1e9", "0x1p4", "80.5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRate(s)
		if err != nil {
			if _, ok := err.(usageError); !ok {
				t.Fatalf("parseRate(%q): %T, want a usage error", s, err)
			}
			return
		}
		if !(r > 0 && r <= harness.MaxRate) {
			t.Fatalf("parseRate(%q) = %v, outside (0, %v]", s, r, harness.MaxRate)
		}
	})
}
