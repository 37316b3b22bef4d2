package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"ratelab/results"
)

// Task 7's scenario checks are declared once (task7Checks): what it plans
// and what it records are the same names and points, in the same order.
func TestTask7ChecksDeclaredOnce(t *testing.T) {
	g := &grading{task: tasks[6], doc: &results.Document{}}
	checkTask7(g, task7Without(t), task7Scenario(t, true, 25, 25, 5.9, 1039, 1.8, 0.75))
	var got []planned
	for _, c := range g.doc.Checks {
		got = append(got, planned{c.Name, c.MaxScore})
		assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
	}
	assert.Equal(t, plannedOf(task7Checks), got)
	assert.Equal(t, got, task7Planned()[:len(got)], "the planned list begins with the declared checks")
	assert.Equal(t, planned{task7CheckCost, 1}, task7Planned()[len(got)], "then the cost check")
}
