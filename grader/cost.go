package grader

import (
	"context"
	"fmt"
	"strings"
	"time"

	"ratelab/internal/vsession"
	"ratelab/results"
)

// Computation is free in virtual time: a bubble's clock moves only when
// every goroutine in it waits, so graded code that burns a millisecond of
// CPU on every request looks perfect in the floods, and would cap a real
// server at a thousand requests a second per core. Every task whose code
// sits on a request's path (the shedding, the limiters, task 6's script on
// a miniredis, the breaker) is therefore also timed on the wall clock, on
// both clocks of grading: the session measures it outside its bubble
// (vsession.OpCost), in the command built with the graded code, where the
// code cannot tell it is measured. Task 4's retry loop and task 5's client wait between calls:
// code of theirs that spins instead of waiting stops the bubble's clock,
// and the session's watchdog fails it.

// Cost budgets, per call on the wall clock, the least of three rounds (so
// other load on the machine only ever makes the figure worse). The
// reference takes a few microseconds through the fake server's own path
// and well under one for a decision.
const (
	// serverCostBudget bounds one request through the fake GPU server
	// with its work made free, graded admission and limiter included: at
	// task 2's heaviest flood, 480 requests a second, it is an eighth of
	// one core.
	serverCostBudget = 250 * time.Microsecond
	// decisionCostBudget bounds one decision of a breaker or a limiter
	// called directly: 10,000 decisions a second, the lesson's example
	// of a large service, would take one whole core.
	decisionCostBudget = 100 * time.Microsecond
)

// checkCost measures req in the grading's session and records check name:
// every part must cost at most budget per call.
func (g *grading) checkCost(ctx context.Context, name string, req vsession.CostRequest, budget time.Duration, why string) error {
	g.logf("  timing %s on the wall clock ...", g.file())
	costs, err := g.runner().cost(ctx, req)
	if err != nil {
		return err
	}
	measured := map[string]float64{}
	var parts, over []string
	for _, c := range costs {
		us := float64(c.PerCall) / float64(time.Microsecond)
		measured["us_per_call_"+strings.ReplaceAll(c.Name, " ", "_")] = us
		parts = append(parts, fmt.Sprintf("%s %.1f µs", c.Name, us))
		if c.PerCall > budget {
			over = append(over, c.Name)
		}
	}
	g.logf("    %s per call", strings.Join(parts, ", "))
	msg := fmt.Sprintf("wall-clock time per call (the fastest of 3 rounds of up to 2,000 calls, in the program built with %s): %s; want at most %.0f µs each: %s. Computation is free in virtual time, so this is where it shows",
		g.file(), strings.Join(parts, ", "), float64(budget)/float64(time.Microsecond), why)
	if len(over) > 0 {
		msg = "too slow: " + strings.Join(over, ", ") + "; " + msg
	}
	g.checkExact(results.Check{
		Name: name, MaxScore: 1, Message: msg,
		Measured: measured, Expected: map[string]float64{"us_per_call_max": float64(budget) / float64(time.Microsecond)},
	}, len(over) == 0, nil)
	return nil
}

// costInSession measures req in the grading's session, outside its bubble
// (vsession.OpCost): the cost check on either clock.
func (g *grading) costInSession(ctx context.Context, req vsession.CostRequest) ([]vsession.Cost, error) {
	s, err := g.vsession(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := s.call(ctx, vsession.Request{Op: vsession.OpCost, Cost: &req})
	if err != nil {
		return nil, g.learnerFault("the cost measurement", err)
	}
	if len(rep.Costs) == 0 {
		return nil, fmt.Errorf("the session measured no cost")
	}
	return rep.Costs, nil
}
