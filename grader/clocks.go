package grader

import (
	"fmt"
	"math"
	"sort"

	"ratelab/results"
)

// A ClockFigure is one figure measured by the same grading in virtual time
// and on the wall clock, with the band the wall-clock one must fall in.
type ClockFigure struct {
	// Task and Name identify the flood or storm; Figure names what was
	// measured ("successes", "seconds", "attempts").
	Task, Name, Figure string
	// Virtual and Wall are the two measurements; Low and High bound Wall.
	Virtual, Wall, Low, High float64
	// Why says where the band comes from.
	Why string
}

// Within reports whether the wall-clock figure falls in its band.
func (f ClockFigure) Within() bool { return f.Wall >= f.Low && f.Wall <= f.High }

// Bands of CompareClocks. Virtual time is the model (TestVirtualGradingIsTheModel),
// so a wall-clock figure may differ from its virtual twin by what the checks
// allow between a wall-clock flood and the simulation, and no more.
const (
	// countBandShare and countBandMin bound a flood's successes: timers
	// start when a request is sent and counts are integers (task 1's
	// collapse checks use the same).
	countBandShare = 0.05
	countBandMin   = 6
	// lockstepBandShare bounds a storm without jitter, whose schedule is
	// the server's and the retry loop's, as in the simulation: only the
	// wall clock's overheads, which add up over each client's retries
	// (7% measured on a busy machine, for the storm that honours a
	// spread Retry-After).
	lockstepBandShare = 0.15
	// jitterBandShare bounds a storm with jitter, whose draws come from
	// the retry loop's own random source and so differ between any two
	// runs: the spread of the simulation over 41 seeds is about ±10%
	// around its median, doubled for two independent draws plus a slower
	// machine.
	jitterBandShare = 0.25
)

// CompareClocks matches the floods and storms that ran in virtual time in
// virtual with the same ones on the wall clock in wall (same task and
// name) and returns each figure with its band, in order. Floods compare
// their successes; storms and amplifier runs their last completion and
// attempts. Runs on the same clock in both documents (the wall-clock parts
// of a virtual grading) and runs without a twin are left out: unmatched
// lists them.
func CompareClocks(virtual, wall *results.Document) (figures []ClockFigure, unmatched []string) {
	wallRuns := map[string]*results.Run{}
	for _, r := range wall.Runs {
		if r != nil && !r.IsVirtual() {
			wallRuns[r.Task+"\x00"+r.Name] = r
		}
	}
	for _, v := range virtual.Runs {
		if v == nil || !v.IsVirtual() {
			continue
		}
		w := wallRuns[v.Task+"\x00"+v.Name]
		if w == nil {
			unmatched = append(unmatched, v.Task+": "+v.Name)
			continue
		}
		band := math.Max(countBandMin, countBandShare*float64(v.OK))
		why := fmt.Sprintf("±%.3g (±%g%% or ±%d, whichever is wider: timers start at send, counts are integers)", band, 100*countBandShare, countBandMin)
		if phase := epochPhaseBand(v); phase > band {
			band = phase
			name := map[string]string{"fixed": "fixed window", "counter": "sliding counter"}[v.Server.Counting]
			why = fmt.Sprintf("±%.3g (one window's limit per client: the %s's windows are aligned on the Unix epoch, and where the flood starts among them differs between any two runs)", band, name)
		}
		figures = append(figures, ClockFigure{
			Task: v.Task, Name: v.Name, Figure: "successes",
			Virtual: float64(v.OK), Wall: float64(w.OK), Low: float64(v.OK) - band, High: float64(v.OK) + band,
			Why: why,
		})
	}
	wallStorms := map[string]*results.Storm{}
	for _, s := range wall.Storms {
		if s != nil && s.Clock != results.ClockVirtual {
			wallStorms[s.Name] = s
		}
	}
	for _, v := range virtual.Storms {
		if v == nil || v.Clock != results.ClockVirtual {
			continue
		}
		w := wallStorms[v.Name]
		if w == nil {
			unmatched = append(unmatched, "storm: "+v.Name)
			continue
		}
		share, why := lockstepBandShare, "no jitter: the simulation times it to the slot"
		if v.Jitter {
			share, why = jitterBandShare, "jitter from the retry loop's own random source differs between any two runs"
		}
		why = fmt.Sprintf("±%g%%: %s", 100*share, why)
		for _, f := range []struct {
			name   string
			vv, wv float64
		}{
			{"seconds to the last completion", v.LastDoneS, w.LastDoneS},
			{"attempts", float64(v.Attempts), float64(w.Attempts)},
		} {
			figures = append(figures, ClockFigure{
				Task: "task4", Name: v.Name, Figure: f.name, Virtual: f.vv, Wall: f.wv,
				Low: f.vv * (1 - share), High: f.vv * (1 + share), Why: why,
			})
		}
	}
	sort.Strings(unmatched)
	return figures, unmatched
}

// epochPhaseBand is how far run's successes may move with where its flood
// starts among windows aligned on the Unix epoch: task 8's fixed window and
// sliding counter (results.Server.Counting) let each client have one
// window's limit more or less depending on how many boundaries its span
// crosses; 0 for any other server.
func epochPhaseBand(run *results.Run) float64 {
	if run.Server == nil || (run.Server.Counting != "fixed" && run.Server.Counting != "counter") {
		return 0
	}
	clients := max(run.Clients, 1)
	return float64(clients) * float64(run.Server.CountingLimit)
}
