package main

import (
	"time"

	"ratelab/grader"
	"ratelab/results"
)

// writeMeasured prints, for a measuring command's --json, a results
// document (schema ratelab.results/v1) named after the command, with what
// fill puts in it, when the command started and finished, and the tree
// whose code it ran (impl; "" when it ran none of this checkout's code).
// It has no checks: the command measures, it does not grade.
func writeMeasured(command string, impl grader.Impl, started time.Time, fill func(doc *results.Document)) error {
	doc := &results.Document{Schema: results.Schema, Task: command, Impl: string(impl), Started: started, Finished: time.Now(),
		Checks: []results.Check{}, Runs: []*results.Run{}, Env: results.CurrentEnv("")}
	fill(doc)
	return doc.Encode(stdout)
}
