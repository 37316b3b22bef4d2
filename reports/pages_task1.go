package reports

import (
	"fmt"

	"ratelab/results"
)

// task1Page is the page of task 1.
var task1Page = &taskPage{
	ID:    "task1",
	Title: "watch an unprotected server collapse",
	Lead: "An unbounded line in front of 8 slots of 100 ms (80 requests/s), and clients that give up after their timeout. " +
		"Past capacity the line grows without end, every answer comes too late, and the server keeps working for nobody. " +
		"The ink line is the lesson's one-line model, λ·C·(T−S)/(λ−C) successes; the dots are your floods.",
	Build: buildTask1,
}

func buildTask1(s *site, runs []*results.Run) []block {
	var blocks []block
	blocks = append(blocks, s.goodputBlock("t1_goodput", runs, task1GoodputCaption(runs)))
	blocks = append(blocks, outcomesBlock("t1_outcomes", runs,
		"Past capacity almost every request ends as a timeout: only the first seconds of arrivals are answered in time, the rest wait in a line that never stops growing."))
	blocks = append(blocks, latencyBlock("t1_latency", runs, []results.Outcome{results.OutcomeOK}, latencyCaption(runs)))
	blocks = append(blocks, queueBlocks("t1", runs, task1QueueCaptions)...)
	return blocks
}

func task1GoodputCaption(runs []*results.Run) string {
	var worst *results.Run
	for _, r := range runs {
		if r.TimeoutS <= 1 && (worst == nil || r.OfferedRPS > worst.OfferedRPS) {
			worst = r
		}
	}
	if worst == nil {
		return "Goodput against offered load: the model's line, the floods as dots."
	}
	pred := ""
	if ok, has := worst.Predicted["ok"]; has && worst.DurationS > 0 {
		pred = fmt.Sprintf(" against the model's %.1f/s", ok/worst.DurationS)
	}
	return fmt.Sprintf("Past capacity, more offered means less done: at %s only %.1f successes/s%s. That falling curve is congestion collapse.",
		fmtRate(worst.OfferedRPS), worst.GoodputRPS, pred)
}

func latencyCaption(runs []*results.Run) string {
	var patient *results.Run
	for _, r := range runs {
		if r.TimeoutS > 5 && r.OK > 0 {
			patient = r
		}
	}
	if patient == nil {
		return "The successes of a collapsed server look fast: only requests that beat the timeout count as successes. Always graph timeouts beside latency."
	}
	return fmt.Sprintf("Successes of the collapsed floods stay under their 1 s timeout and look fine; the patient client (%s) shows the truth: a p99 of %s that grows for as long as the overload lasts.",
		patient.Name, fmtMS(patient.P99MS))
}

// task1QueueCaptions speak of the flood that left the most dead work.
func task1QueueCaptions(runs []*results.Run) (string, string) {
	var worst *results.Run
	for _, r := range runs {
		if worst == nil || r.ServerFinal.Dead > worst.ServerFinal.Dead {
			worst = r
		}
	}
	if worst == nil || worst.ServerFinal.Dead == 0 {
		return "The line grows by λ − C every second of overload, then drains at C once sending stops. Dotted: the simulation.",
			"Dead work keeps climbing after the flood: the server finishes every abandoned request. Dotted: the simulation."
	}
	drain := "had not drained by the cap"
	if worst.DrainedS >= 0 {
		drain = fmt.Sprintf("took another %.1f s to drain", worst.DrainedS)
	}
	return fmt.Sprintf("At %s the line still held %d when the last client gave up, and %s: the overload outlives the flood. Dotted: the simulation.",
			worst.Name, worst.ServerAfterFlood.Waiting, drain),
		fmt.Sprintf("At %s the server did %d requests of work for clients who had already gone, most of it after sending stopped. Dotted: the simulation.",
			worst.Name, worst.ServerFinal.Dead)
}
