package grader

import (
	"context"
	"fmt"
	"strings"

	"ratelab/results"
)

// wallTries is how many times a wall-clock flood or scenario is run when
// its load generator falls behind its schedule. Such a run is not judged
// (check), and on a busy machine (a shared CI runner, a laptop compiling
// beside the grading) one try in a few can miss the 5 ms send-lag bound by
// a fraction of a millisecond; running the same fresh server again is
// cheaper for the learner than a check with no verdict. Three tries bound
// the extra time at twice the run's length. The lag can also be the graded
// code's doing (a server that spins beside the generator, a breaker whose
// garbage pauses it): then every try falls behind, and the checks stay
// unjudged with each try's reason; the idle-CPU and cost checks judge such
// code on their own.
const wallTries = 3

// untilReliable runs try, on the wall clock, until every run it returns is
// reliable, at most wallTries times, and returns the last try's runs. A try
// must start from nothing (a fresh server, fresh clients), so that trying
// again measures the same thing. The runs of a try that is given up are
// taken out of the document again (with any idle reading it missed), and
// the try that replaces it says in its warnings why it was run again, with
// what the given-up try sent and got. An error ends the tries at once.
func (g *grading) untilReliable(ctx context.Context, what string, try func() ([]*results.Run, error)) ([]*results.Run, error) {
	var earlier []string
	for n := 1; ; n++ {
		before, missing := len(g.doc.Runs), len(g.idleMissing)
		runs, err := try()
		bad := unreliable(runs)
		if len(earlier) > 0 {
			for _, r := range runs {
				if r != nil {
					r.Warnings = append(r.Warnings, earlier...)
				}
			}
		}
		if err != nil || bad == "" || n == wallTries || ctx.Err() != nil {
			return runs, err
		}
		earlier = append(earlier, fmt.Sprintf("run again (try %d of %d): try %d was unreliable: %s", n+1, wallTries, n, bad))
		g.logf("    %s was unreliable (%s); running it again on a fresh server (try %d of %d)", what, bad, n+1, wallTries)
		if len(g.doc.Runs) > before {
			g.doc.Runs = g.doc.Runs[:before]
		}
		g.idleMissing = g.idleMissing[:missing]
	}
}

// unreliable says why any of runs is unreliable, or "" if none is.
func unreliable(runs []*results.Run) string {
	var why []string
	for _, r := range runs {
		if r != nil && !r.Reliable {
			why = append(why, fmt.Sprintf("%s (sent %d, ok %d, p99 %.0f ms): %s", r.Name, r.Issued, r.OK, r.P99MS, strings.Join(r.Warnings, "; ")))
		}
	}
	return strings.Join(why, "; ")
}
