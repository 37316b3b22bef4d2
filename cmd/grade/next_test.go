package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// The next step of a failing grading names the first failing check, in
// the task's order, and the TODO of the function its message says is not
// written yet, read from the learner's file as it stands.
func TestNextStep(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(root, "exercises/bucket/bucket.go"))
	require.NoError(t, err)
	lines := strings.Split(string(src), "\n")
	// lineOf returns the line of the first TODO(task3) after the line
	// that contains anchor.
	lineOf := func(anchor string) int {
		seen := false
		for i, l := range lines {
			if strings.Contains(l, anchor) {
				seen = true
			}
			if seen && strings.Contains(l, "// TODO(task3)") {
				return i + 1
			}
		}
		t.Fatalf("no TODO(task3) after %q", anchor)
		return 0
	}
	doc := func(msgs ...string) *results.Document {
		d := &results.Document{Impl: "exercises", Checks: []results.Check{{Task: "task3", Name: "passes", Status: results.StatusPass}}}
		for i, m := range msgs {
			d.Checks = append(d.Checks, results.Check{Task: "task3", Name: "check " + string(rune('a'+i)), Status: results.StatusFail, Message: m})
		}
		return d
	}
	tests := []struct {
		doc    *results.Document
		line   int
		check  string
		absent bool
	}{
		{doc: doc("task 3 (exercises/bucket/bucket.go): Refill: task 3: NewTokenBucket is not implemented yet"), line: lineOf("type TokenBucket struct"), check: "check a"},
		{doc: doc("task 3: TokenBucket.TryTake is not implemented yet", "task 3: NewKeyedLimiter is not implemented yet"), line: lineOf("func (b *TokenBucket) TryTake"), check: "check a"},
		{doc: doc("task 3: NewKeyedLimiter is not implemented yet"), line: lineOf("type KeyedLimiter struct"), check: "check a"},
		{doc: doc("allowed 23 where at most 20"), line: 0, check: "check a"},
		{doc: doc(), absent: true},
	}
	for _, tt := range tests {
		step, ok := findNextStep(root, tt.doc)
		if tt.absent {
			assert.False(t, ok)
			continue
		}
		require.True(t, ok)
		assert.Equal(t, "exercises/bucket/bucket.go", step.File)
		assert.Equal(t, tt.check, step.Check)
		assert.Equal(t, tt.line, step.Line, "for %q", tt.doc.Checks[1].Message)
		if tt.line > 0 {
			assert.True(t, strings.HasPrefix(step.TODO, "TODO(task3)"), step.TODO)
		}
	}
	solutions := doc("task 3: NewTokenBucket is not implemented yet")
	solutions.Impl = "solutions"
	_, ok := findNextStep(root, solutions)
	assert.False(t, ok, "the reference has no next step")
}
