package grader

import "ratelab/results"

// checkDef is one check of a task's floods, declared once as a value: its
// name and points, and the function that judges it from what the floods
// returned (R). The task's planned list (plannedOf) and its judging
// (judgeAll) both derive from one table of these, so a check cannot be
// named or pointed differently in the two.
type checkDef[R any] struct {
	name   string
	points float64
	// judge returns the check's message and figures (its Name and
	// MaxScore are the declaration's), whether it passed, and the run it
	// read (nil for none).
	judge func(R) (c results.Check, pass bool, run *results.Run)
}

// plannedOf lists defs as the checks a grading plans, in order.
func plannedOf[R any](defs []checkDef[R]) []planned {
	out := make([]planned, len(defs))
	for i, d := range defs {
		out[i] = planned{d.name, d.points}
	}
	return out
}

// judgeAll records every check of defs, judged on r, in order.
func judgeAll[R any](g *grading, defs []checkDef[R], r R) {
	for _, d := range defs {
		c, pass, run := d.judge(r)
		c.Name, c.MaxScore = d.name, d.points
		g.check(c, pass, run)
	}
}
