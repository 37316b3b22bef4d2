package reports

import (
	"fmt"
	"strings"

	"ratelab/results"
)

// task2Page is the page of task 2.
var task2Page = &taskPage{
	ID:    "task2",
	Title: "say no early: load shedding and deadlines",
	Lead: "The same server with a line of at most 16 (200 ms of work) that answers 503 at once when full, and a deadline that drops requests which waited past 800 ms. " +
		"Goodput stays at capacity however much is offered; the blue line is a simulation of that server, the ink line the unprotected model for comparison.",
	Build: buildTask2,
}

func buildTask2(s *site, runs []*results.Run) []block {
	var blocks []block
	blocks = append(blocks, s.goodputBlock("t2_goodput", runs, task2GoodputCaption(runs)))
	blocks = append(blocks, outcomesBlock("t2_outcomes", runs,
		"Shedding turns timeouts into fast 503s: the server refuses what it cannot finish in time, and never a timeout, while the line of 2000 without a deadline times out like the unprotected server."))
	blocks = append(blocks, latencyBlock("t2_latency", runs, []results.Outcome{results.OutcomeOK, results.OutcomeUnavailable},
		"Successes (solid) of the shedding floods stay under 300 ms, 200 ms in line plus 100 ms of work, and their 503s (dashed) come back in about a millisecond: a fast no is cheap. The long line's 503s come only after its 800 ms deadline."))
	blocks = append(blocks, queueBlocks("t2", runs, task2QueueCaptions)...)
	return blocks
}

func task2GoodputCaption(runs []*results.Run) string {
	var parts []string
	for _, r := range runs {
		if strings.HasPrefix(r.Name, "shed ") {
			parts = append(parts, fmt.Sprintf("%.1f/s at %s", r.GoodputRPS, fmtRate(r.OfferedRPS)))
		}
	}
	if len(parts) == 0 {
		return "Shedding pins goodput at capacity, where the unprotected server collapses."
	}
	return fmt.Sprintf("Shedding pins goodput at capacity, 80/s: %s, where the unprotected model gives about 11/s at 240/s.", strings.Join(parts, " and "))
}

// task2QueueCaptions compare the bounded lines with the long one.
func task2QueueCaptions(runs []*results.Run) (string, string) {
	var parts, dead []string
	for _, r := range runs {
		parts = append(parts, fmt.Sprintf("%s %d", r.Name, r.ServerFinal.MaxWaiting))
		dead = append(dead, fmt.Sprintf("%s %d", r.Name, r.ServerFinal.Dead))
	}
	return "The longest each line grew: " + strings.Join(parts, ", ") + ". Clients that give up leave a protected line, so even the line of 2000 holds only about λ·T. Dotted: the simulation.",
		"Dead work: " + strings.Join(dead, ", ") + ". A line without a deadline still serves requests whose clients leave during the work; the deadline drops them first. Dotted: the simulation."
}
