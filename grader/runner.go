package grader

import (
	"context"
	"fmt"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/vsession"
	"ratelab/provider"
	"ratelab/results"
	"ratelab/scenario"
)

// runner runs a grading's traffic on the clock the grading was given,
// chosen once (grading.runner): virtualRunner in the grading's
// virtual-time session (virtual.go, internal/vsession), wallRunner with
// child processes built from the graded code on the wall clock
// (stages.go). A task asks its runner for floods, storms and the other
// runs it judges, and judges what comes back the same way on either clock.
type runner interface {
	// prepare builds what this clock needs for the task's traffic beyond
	// what the task builds itself: on the wall clock the task's command
	// with the graded code, in virtual time nothing (the session builds
	// its own). An error is the graded code's: it does not compile.
	prepare(ctx context.Context) error
	// clock is what a log line adds to say which clock ran it.
	clock() string
	// flood floods a fresh server configured as cfg with each of opts at
	// once and records the runs (floodChild); bin is the server built
	// from the graded code, which virtual time does not need.
	flood(ctx context.Context, bin string, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error)
	// floodInProcess floods a fresh server of the grader's own configured
	// as cfg with opts and records the run (task 1's floods).
	floodInProcess(ctx context.Context, cfg fakegpu.Config, opts harness.Options) (*results.Run, error)
	// storm runs req's storm or amplifier (task 4: its Retry and its Storm
	// or Amplify options, within limit) against a fresh server configured
	// as cfg, the shedding server for a storm, an unprotected one for the
	// amplifier, and returns the result and the server's detailed stats
	// once it drained.
	storm(ctx context.Context, cfg fakegpu.Config, req vsession.Request, limit time.Duration) (*results.Storm, results.ServerStats, error)
	// judge runs task 5's judge, every strategy against the fake API with
	// the judge's defaults (cmd/judge --in-process --strategy all), and
	// returns its report.
	judge(ctx context.Context) (*results.JudgeReport, error)
	// judgeTakes says, for the log, how long judge takes on this clock.
	judgeTakes() string
	// scenario runs task 7's dependency scenario o with the breaker b
	// (none if nil).
	scenario(ctx context.Context, o scenario.Dependency, b *vsession.Breaker) (*results.Scenario, error)
	// counting measures task 8's four limiters (boundary burst,
	// synchronised return, memory per client, disagreement) with bin,
	// cmd/counting built from the graded code, which the memory needs on
	// either clock: a bubble's process holds the clients too.
	counting(ctx context.Context, bin string) (*results.Counting, error)
	// workerFloods runs task 6's floods of four workers, a limiter each
	// and then one bucket in Redis shared by all, and the burst of
	// distinct clients, and judges them; on the wall clock the workers
	// share r, in virtual time the session's miniredis.
	workerFloods(ctx context.Context, r *judgeRedis) error
	// floodsRedis names the Redis task 6's floods run on, where it is not
	// the unit suite's r ("" on the wall clock).
	floodsRedis(r *judgeRedis) string
	// idleFlood runs o against a fresh server from bin on the wall clock
	// where the floods before it could not measure the server's CPU while
	// idle (a bubble makes computation free), and nothing where they did.
	idleFlood(ctx context.Context, bin string, cfg fakegpu.Config, o harness.Options) error
	// cost times the graded code per call on the wall clock, on either
	// clock of grading (cost.go).
	cost(ctx context.Context, req vsession.CostRequest) ([]vsession.Cost, error)
	// prebuild starts building what the traffic needs beside the unit
	// stage, where that saves time.
	prebuild(ctx context.Context)
	// note is the document's note on the clock the task's traffic ran on,
	// "" if there is nothing to say.
	note() string
}

// runner returns the grading's runner, choosing it on first use from the
// grading's options: the one place a grading asks which clock it runs on.
func (g *grading) runner() runner {
	if g.run == nil {
		if floodsVirtual(g.task, g.opts) {
			g.run = virtualRunner{g}
		} else {
			g.run = &wallRunner{g: g}
		}
	}
	return g.run
}

// virtualRunner runs a grading's traffic in its virtual-time session.
type virtualRunner struct{ g *grading }

// wallRunner runs a grading's traffic on the wall clock, each flood or
// scenario run again while the load generator falls behind (untilReliable).
type wallRunner struct {
	g *grading
	// The commands prepare built: cmd is the task's own command with the
	// graded code (cmd/storm, cmd/judge, cmd/breaker, cmd/fakegpu for
	// task 6), server task 4's reference shedding server.
	cmd, server string
}

func (virtualRunner) prepare(context.Context) error { return nil }

func (r *wallRunner) prepare(ctx context.Context) error {
	g := r.g
	overlay, err := writeOverlay(g.tmp, g.opts.Root, g.opts.Replace)
	if err != nil {
		return err
	}
	var tags []string
	if g.opts.Impl == Exercises {
		tags = []string{"ratelab_ex_" + g.task.Unit.Package}
	}
	if r.cmd, err = buildCmd(ctx, g.opts.Root, g.tmp, virtualTasks[g.task.ID], referenceTags(g.opts.Root, tags), overlay); err != nil {
		return err
	}
	if g.task.ID == "task4" {
		// The storms' server is the reference's (the learner's, in a tree
		// without solutions/), built without the graded retry loop.
		r.server, err = buildServer(ctx, g.opts.Root, g.tmp, referenceTags(g.opts.Root, nil), "")
	}
	return err
}

func (virtualRunner) clock() string { return ", in virtual time" }

func (*wallRunner) clock() string { return "" }

func (r virtualRunner) flood(ctx context.Context, _ string, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error) {
	return r.g.floodVirtual(ctx, cfg, opts...)
}

func (r *wallRunner) flood(ctx context.Context, bin string, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error) {
	return r.g.floodWall(ctx, bin, cfg, opts...)
}

func (r virtualRunner) floodInProcess(ctx context.Context, cfg fakegpu.Config, opts harness.Options) (*results.Run, error) {
	runs, err := r.g.floodVirtual(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	return runs[0], nil
}

func (r *wallRunner) floodInProcess(ctx context.Context, cfg fakegpu.Config, opts harness.Options) (*results.Run, error) {
	g := r.g
	runs, err := g.untilReliable(ctx, "flood "+opts.Name, func() ([]*results.Run, error) {
		run, err := g.floodInProcess(ctx, cfg, opts)
		return []*results.Run{run}, err
	})
	return runs[0], err
}

func (r virtualRunner) judge(ctx context.Context) (*results.JudgeReport, error) {
	g := r.g
	s, err := g.vsession(ctx)
	if err != nil {
		return nil, err
	}
	// The judge's defaults, as cmd/judge --in-process --strategy all.
	api := provider.DefaultConfig()
	out, err := s.call(ctx, vsession.Request{Op: vsession.OpJudge, API: &api,
		Judge: &scenario.JudgeOptions{Workload: scenario.DefaultJudgeWorkload()}})
	if err != nil {
		return nil, g.learnerFault("the judge in virtual time", err)
	}
	if out.Judge == nil {
		return nil, fmt.Errorf("the virtual-time judge returned no report")
	}
	return out.Judge, nil
}

func (r *wallRunner) judge(ctx context.Context) (*results.JudgeReport, error) {
	var rep results.JudgeReport
	if err := RunJSON(ctx, task5Limit, &rep, r.cmd, "--in-process", "--strategy", "all"); err != nil {
		return nil, r.g.learnerFault("the judge", err)
	}
	return &rep, nil
}

// The wall clock sends at the API's limits for real; in a bubble the same
// minutes pass in a few seconds.
func (virtualRunner) judgeTakes() string { return "virtual time, a few seconds" }
func (*wallRunner) judgeTakes() string   { return "about a minute and a half" }

func (r virtualRunner) scenario(ctx context.Context, o scenario.Dependency, b *vsession.Breaker) (*results.Scenario, error) {
	g := r.g
	s, err := g.vsession(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := s.call(ctx, vsession.Request{Op: vsession.OpScenario, Scenario: &o, Breaker: b})
	if err != nil {
		return nil, g.learnerFault("the dependency scenario in virtual time", err)
	}
	if rep.Scenario == nil || rep.Scenario.Run == nil {
		return nil, fmt.Errorf("the virtual-time scenario returned no run")
	}
	return rep.Scenario, nil
}

// scenario on the wall clock runs the breaker binary, again on a fresh
// service while the load generator falls behind (untilReliable).
func (r *wallRunner) scenario(ctx context.Context, o scenario.Dependency, b *vsession.Breaker) (*results.Scenario, error) {
	g := r.g
	var sc *results.Scenario
	_, err := g.untilReliable(ctx, "the scenario "+o.Name, func() ([]*results.Run, error) {
		sc = new(results.Scenario)
		if err := RunJSON(ctx, 2*time.Minute, sc, r.cmd, scenarioArgs(o, b)...); err != nil {
			return nil, g.learnerFault("the dependency scenario", err)
		}
		if sc.Run == nil {
			return nil, fmt.Errorf("the scenario printed no run")
		}
		return []*results.Run{sc.Run}, nil
	})
	if err != nil {
		return nil, err
	}
	return sc, nil
}

func (r virtualRunner) counting(ctx context.Context, bin string) (*results.Counting, error) {
	g := r.g
	// In virtual time the measurements that take time; memory, which a
	// bubble could hide, on the real clock.
	g.logf("  measuring the four limiters in virtual time: boundary burst, synchronised return, disagreement ...")
	s, err := g.vsession(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.call(ctx, vsession.Request{Op: vsession.OpCounting, NotBefore: time.Now(), Counting: &scenario.CountingOptions{
		Measure: []string{"boundary", "return", "disagreement"}, Seed: g.opts.Seed,
	}})
	if err != nil {
		return nil, g.learnerFault("the measurements in virtual time", err)
	}
	if out.Counting == nil {
		return nil, fmt.Errorf("the virtual-time session returned no measurements")
	}
	c := out.Counting
	g.logf("  measuring the four limiters' memory on the real clock ...")
	var mem results.Counting
	if err := RunJSON(ctx, task8MeasureLimit, &mem, bin, "--measure", "memory"); err != nil {
		return nil, g.learnerFault("the memory measurement", err)
	}
	c.Memory, c.Warnings = mem.Memory, append(c.Warnings, mem.Warnings...)
	return c, nil
}

func (r *wallRunner) counting(ctx context.Context, bin string) (*results.Counting, error) {
	g := r.g
	g.logf("  measuring the four limiters on the real clock: boundary burst, synchronised return, memory, disagreement (about 15 s) ...")
	var c results.Counting
	if err := RunJSON(ctx, task8MeasureLimit, &c, bin, "--seed", fmt.Sprint(g.opts.Seed)); err != nil {
		return nil, g.learnerFault("the measurements", err)
	}
	return &c, nil
}

func (r virtualRunner) workerFloods(ctx context.Context, _ *judgeRedis) error {
	return floodTask6Virtual(ctx, r.g)
}

func (r *wallRunner) workerFloods(ctx context.Context, redis *judgeRedis) error {
	return floodTask6(ctx, r.g, r.cmd, redis)
}

func (virtualRunner) floodsRedis(*judgeRedis) string { return task6SessionRedis }
func (*wallRunner) floodsRedis(*judgeRedis) string   { return "" }

func (r virtualRunner) idleFlood(ctx context.Context, bin string, cfg fakegpu.Config, o harness.Options) error {
	_, err := r.g.floodWall(ctx, bin, cfg, o)
	return err
}

func (*wallRunner) idleFlood(context.Context, string, fakegpu.Config, harness.Options) error {
	return nil
}

func (r virtualRunner) cost(ctx context.Context, req vsession.CostRequest) ([]vsession.Cost, error) {
	return r.g.costInSession(ctx, req)
}

func (r *wallRunner) cost(ctx context.Context, req vsession.CostRequest) ([]vsession.Cost, error) {
	return r.g.costInSession(ctx, req)
}

func (r virtualRunner) prebuild(ctx context.Context) { r.g.prebuild(ctx) }

// prebuild on the wall clock builds nothing ahead: the commands are built
// once the unit stage passed (prepare), and the session the cost check
// needs on first use.
func (*wallRunner) prebuild(context.Context) {}

func (virtualRunner) note() string {
	return "virtual time: this task's traffic ran in a testing/synctest bubble over an in-memory network, the same on every machine; what a bubble cannot judge (idle CPU, memory) ran on the wall clock"
}

func (r *wallRunner) note() string {
	g := r.g
	switch {
	case g.opts.Virtual && virtualTasks[g.task.ID] != "":
		return g.task.ID + " ran on the wall clock: it was judged by the Redis given with --redis, which keeps real time"
	case g.opts.Virtual:
		return g.task.ID + " has no virtual-time floods yet: it ran on the wall clock"
	}
	return ""
}
