package layout

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
		"internal/trees/bucket/solutions.go":         true,
		"internal/trees/bucket/exercises.go":         false,
		"grader/tasks/task4/testdata/wrong/a.patch":  true,
		"grader/tasks/task4/task4.go":                false,
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

func TestFrozenAndLearner(t *testing.T) {
	for p, want := range map[string][2]bool{ // {learner, frozen}
		"exercises/bucket/bucket.go":                {true, false},
		"exercises/redisbucket/tokenbucket.lua":     {true, false},
		"exercises/bucket/bucket_test.go":           {false, true},
		"exercises/bucket/README.md":                {false, false},
		"solutions/bucket/bucket.go":                {false, false},
		"internal/trees/bucket/solutions.go":        {false, false},
		"internal/trees/bucket/exercises.go":        {false, true},
		"reports/html.go":                           {false, true},
		"scenario/storm.go":                         {false, true},
		"cmd/grade/main_test.go":                    {false, true},
		"grader/tasks/task2/task2.go":               {false, true},
		"grader/tasks/task2/task2_test.go":          {false, false},
		"grader/tasks/task2/testdata/wrong/x.patch": {false, false},
		".github/x.go":                              {false, false},
		"ratelab-runs/x/y.go":                       {false, false},
		"docs/tasks/task2.md":                       {false, false},
	} {
		assert.Equal(t, want[0], Learner(p), "Learner(%q)", p)
		assert.Equal(t, want[1], Frozen(p), "Frozen(%q)", p)
	}
}

func TestTag(t *testing.T) {
	assert.Equal(t, "ratelab_ex_bucket", Tag("bucket"))
	pkg, ok := TagPackage(Tag("counting"))
	assert.True(t, ok)
	assert.Equal(t, "counting", pkg)
	_, ok = TagPackage("ratelab_vsession")
	assert.False(t, ok)
	_, ok = TagPackage("ratelab_ex_")
	assert.False(t, ok)
}
