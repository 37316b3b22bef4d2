package reports

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// Brief puts checks that did not pass for the same reason on one line
// with their count and points, lists the others one a line, and leaves out
// the checks that passed.
func TestBrief(t *testing.T) {
	doc := &results.Document{Task: "task3", Impl: "exercises", Checks: []results.Check{
		{Task: "task3", Name: "unit: a", Status: results.StatusPass, Score: 1, MaxScore: 1},
		{Task: "task3", Name: "unit: b", Status: results.StatusFail, MaxScore: 2, Message: "task 3 (exercises/bucket/bucket.go): B/X: task 3: NewTokenBucket is not implemented yet; B/Y: task 3: TokenBucket.TryTake is not implemented yet"},
		{Task: "task3", Name: "unit: c", Status: results.StatusFail, MaxScore: 1, Message: "task 3 (exercises/bucket/bucket.go): C: allowed 23 where at most 20"},
		{Task: "task3", Name: "unit: d", Status: results.StatusFail, MaxScore: 3, Message: "task 3: NewTokenBucket is not implemented yet"},
		{Task: "task3", Name: "flood: e", Status: results.StatusSkip, MaxScore: 2, Message: "not run because task 3: NewKeyedLimiter is not implemented yet"},
		{Task: "task3", Name: "flood: f", Status: results.StatusSkip, MaxScore: 1, Message: "not run because task 3: NewKeyedLimiter is not implemented yet"},
		{Task: "task3", Name: "flood: g", Status: results.StatusSkip, MaxScore: 1, Message: "not run: the grading was interrupted"},
	}}
	doc.Total()
	var b strings.Builder
	require.NoError(t, Brief(&b, doc))
	want := `
checks: 1 of 7 pass
  FAIL    0/5  2 checks: not implemented yet: NewTokenBucket, TokenBucket.TryTake
  FAIL    0/1  unit: c: C: allowed 23 where at most 20
  SKIP    0/3  2 checks not run because task 3: NewKeyedLimiter is not implemented yet
  SKIP    0/1  not run: the grading was interrupted

task3 exercises: FAIL, score 1/11
`
	assert.Equal(t, want, b.String())
	assert.Equal(t, []string{"NewTokenBucket", "TokenBucket.TryTake"}, Unwritten(doc.Checks[1].Message))
	assert.Nil(t, Unwritten(doc.Checks[2].Message))
}

// A document of several tasks gets a line per task, with its checks that
// did not pass under it.
func TestBriefAll(t *testing.T) {
	f, err := os.Open("testdata/results.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, Brief(&b, doc))
	for _, task := range taskOrder(doc) {
		assert.Regexp(t, `(?m)^  `+task+`\s+(PASS|FAIL|ERROR)\s+\d`, b.String())
	}
	t.Logf("\n%s", b.String())
}
