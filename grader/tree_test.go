package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReferenceOnly(t *testing.T) {
	for p, want := range map[string]bool{
		"solutions/bucket/bucket.go":                 true,
		"solutions":                                  true,
		"grader/testdata/wrong/task2/x/shedding.go":  true,
		"grader/testdata/wrong/task2/x/fix.patch":    true,
		"grader/testdata/broken/task2/panics/README": true,
		"grader/corpus_test.go":                      true,
		"cmd/fakegpu/bucket_solutions.go":            true,
		"cmd/fakegpu/bucket_exercises.go":            false,
		"grader/stages.go":                           false,
		"grader/manifest.json":                       false,
		"solutionsmore/x.go":                         false,
		"exercises/bucket/bucket_test.go":            false,
		"internal/suites/bucketsuite/suite.go":       false,
		"reports/testdata/cohort/alice/results.json": false,
		"docs/tasks/task2.md":                        false,
		"cmd/grade/main_test.go":                     false,
		"cmd/grade/solutions.go":                     false,
		"internal/suites/suitekit/grader/x_test.go":  false,
	} {
		assert.Equal(t, want, ReferenceOnly(p), "ReferenceOnly(%q) = %v; want %v", p, !want, want)
	}
}
