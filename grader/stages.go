package grader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
)

// skipCheck records a check that could not run, scoring 0, with the reason.
func (g *grading) skipCheck(name string, points float64, why string) {
	g.doc.Checks = append(g.doc.Checks, results.Check{
		Task: g.task.ID, Name: name, Status: results.StatusSkip, MaxScore: points,
		Message: "not run because " + why,
	})
}

// planned is a check a stage would record, for skipping it by name.
type planned struct {
	name   string
	points float64
}

// skipRest records every expected check not recorded yet as skipped for
// why: the floods cannot run, because the code does not compile or is not
// written yet.
func (g *grading) skipRest(why string) {
	for _, c := range g.expect {
		if !g.recorded(c.name) {
			g.skipCheck(c.name, c.points, why)
		}
	}
}

// file returns the repository path of the task's learner file in the graded tree.
func (g *grading) file() string {
	u := g.task.Unit
	return path.Join(string(g.opts.Impl), u.Package, u.File)
}

// unit runs the task's frozen tests on the graded tree and records one check
// per UnitCheck. It returns "" if the code is ready for floods, or the
// reason it is not (it does not compile, or is not written yet).
func (g *grading) unit(ctx context.Context) (notReady string, err error) {
	notReady, err = g.unitStage(g.yielding(ctx))
	// In a Series, what follows the unit stage waits for its turn; a task
	// whose remaining work minds no neighbour lets the next one start (one
	// that owns the machine does so later, see Task.ownsMachine).
	if terr := g.awaitTurn(ctx); err == nil {
		err = terr
	}
	g.unlowered()
	if !g.task.ownsMachine && !NeedsCalibration(g.task, g.opts) {
		g.quiet()
	}
	return notReady, err
}

// unitStage runs the unit stage itself.
func (g *grading) unitStage(ctx context.Context) (notReady string, err error) {
	u := g.task.Unit
	file := g.file()
	prefix := fmt.Sprintf("task %d (%s)", g.task.Number, file)
	g.runner().prebuild(ctx)
	g.doc.Seed = g.opts.Seed
	if g.opts.floodsOnly {
		for _, c := range u.Checks {
			g.skipCheck("unit: "+c.Name, c.Points, "this grading judges the floods only")
		}
		return "", nil
	}
	g.logf("  unit tests: go test -race ./%s/%s", g.opts.Impl, u.Package)
	overlay, err := writeOverlay(g.tmp, g.opts.Root, g.opts.Replace)
	if err != nil {
		return "", err
	}
	var tags []string
	if g.opts.Impl == Exercises {
		tags = []string{"exercises"}
	}
	// Task 6's Redis/ checks run on the Redis the grading opened (see
	// openRedis), and are off when that is miniredis.
	env := []string{"REDIS_URL=off"}
	if u := g.redis.unitURL(); u != "" {
		env = []string{"REDIS_URL=" + u}
	}
	seed := g.opts.Seed
	env = append(env, fmt.Sprintf("%s=%d", SeedEnv, seed))
	// The same seed for rapid's property tests; no failure files written
	// into the learner's tree.
	shrink := 10 * time.Second
	if g.opts.shrinkTime > 0 {
		shrink = g.opts.shrinkTime
	}
	testArgs := []string{fmt.Sprintf("-rapid.seed=%d", seed), "-rapid.nofailfile", "-rapid.shrinktime=" + shrink.String()}
	replay := fmt.Sprintf("random inputs from seed %d (replay them: grade %s --seed %d)", seed, g.task.ID, seed)
	res := runUnit(ctx, unitRun{
		root: g.opts.Root, pkgDir: path.Join(string(g.opts.Impl), u.Package), tags: tags, overlay: overlay,
		timeout: g.opts.UnitTimeout, env: env, testArgs: testArgs, scratch: g.tmp, logf: g.logf,
		only: prefixed(u.Test, g.opts.onlySubtests), noRace: g.opts.noRace,
	})
	if res.err != nil {
		return "", res.err
	}
	if res.noRace {
		g.doc.Notes = append(g.doc.Notes, "the race detector is not available here (it needs cgo and a C compiler); unit tests ran without it")
	}
	if res.buildFailed {
		msg := fmt.Sprintf("%s does not compile: %s", prefix, strings.Join(res.buildOutput[:min(len(res.buildOutput), 4)], " / "))
		for _, c := range u.Checks {
			g.check(results.Check{Name: "unit: " + c.Name, MaxScore: c.Points, Message: msg}, false, nil)
		}
		return file + " does not compile", nil
	}
	crash := res.crash()
	for _, c := range u.Checks {
		pass := true
		var why []string
		for _, st := range c.Subtests {
			name := u.Test + "/" + st
			switch res.status[name] {
			case "pass":
			case "skip":
				if !g.maySkip(st) {
					pass = false
					skip := st + " was skipped"
					if told := res.failure(name, 2); told != "" {
						skip += ": " + told // the test's own reason
					}
					why = append(why, skip)
				}
			case "fail":
				pass = false
				why = append(why, fmt.Sprintf("%s: %s", st, res.failure(name, 3)))
			default:
				if stuck, ok := res.stuck[name]; ok {
					pass = false
					what := "never finished"
					if !strings.Contains(stuck, "a test never finished") {
						what = "crashed the test binary"
					}
					why = append(why, fmt.Sprintf("%s %s, and the other tests ran again without it: %s", st, what, stuck))
					continue
				}
				pass = false
				reason := "did not run"
				if crash != "" {
					reason = "did not finish: " + crash
				}
				why = append(why, fmt.Sprintf("%s %s", st, reason))
			}
		}
		msg := fmt.Sprintf("%s: %s passed", prefix, strings.Join(c.Subtests, ", "))
		if !pass {
			msg = fmt.Sprintf("%s: %s; %s", prefix, strings.Join(why, "; "), replay)
		}
		g.check(results.Check{Name: "unit: " + c.Name, MaxScore: c.Points, Message: msg}, pass, nil)
	}
	if ni := res.notImplemented(); ni != "" {
		return ni, nil
	}
	if crash != "" {
		g.doc.Notes = append(g.doc.Notes, fmt.Sprintf("%s: %s", prefix, crash))
	}
	return "", nil
}

// maySkip reports whether subtest st may be skipped without failing: task
// 6's Redis/ checks, except on a Redis that --redis asked for.
func (g *grading) maySkip(st string) bool {
	for _, p := range g.task.Unit.MaySkip {
		if strings.HasPrefix(st, p) && (g.redis == nil || g.redis.kind != results.RedisGiven) {
			return true
		}
	}
	return false
}

// server builds cmd/fakegpu with the graded tree's code for this task's
// package (the reference for everything else, or the learner's code where
// the tree has no reference) and returns the binary.
func (g *grading) server(ctx context.Context) (string, error) {
	var tags []string
	if g.opts.Impl == Exercises {
		tags = []string{"ratelab_ex_" + g.task.Unit.Package}
	}
	tags = referenceTags(g.opts.Root, tags) // no solutions/: the learner's code for every task
	overlay, err := writeOverlay(g.tmp, g.opts.Root, g.opts.Replace)
	if err != nil {
		return "", err
	}
	return buildServer(ctx, g.opts.Root, g.tmp, tags, overlay)
}

// floodChild starts a fresh server from bin configured as cfg, floods it
// with each of opts at once (one flood per client), stops it and records
// the runs. Once the floods drained it reads the server's detailed stats
// into every run, and its CPU while idle into the first (observe.go). In
// virtual time the server is the session's instead (floodVirtual), and
// idle CPU is not measured.
func (g *grading) floodChild(ctx context.Context, bin string, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error) {
	return g.runner().flood(ctx, bin, cfg, opts...)
}

// floodWall is floodChild on the wall clock, whatever the grading's clock,
// run again on a fresh server while the load generator falls behind
// (untilReliable).
func (g *grading) floodWall(ctx context.Context, bin string, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error) {
	return g.untilReliable(ctx, "flood "+opts[0].Name, func() ([]*results.Run, error) {
		return g.floodWallOnce(ctx, bin, cfg, opts...)
	})
}

// floodWallOnce is floodWall's one try.
func (g *grading) floodWallOnce(ctx context.Context, bin string, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error) {
	s, err := g.startChild(ctx, bin, cfg)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	runs, err := s.flood(ctx, opts...)
	if ferr := s.finish(ctx, runs, runs[0], false); err == nil {
		err = ferr
	}
	return runs, err
}

// childServer is a fake GPU server started by the grader from the graded
// code, flooded in one or more phases before it stops.
type childServer struct {
	g    *grading
	c    *child
	cfg  fakegpu.Config
	args []string
}

// startChild starts a fresh server from bin configured as cfg. The caller
// must stop it.
func (g *grading) startChild(ctx context.Context, bin string, cfg fakegpu.Config) (*childServer, error) {
	args := cfg.Args()
	c, err := startServer(ctx, bin, append([]string{"--port", "0"}, args...)...)
	if err != nil {
		return nil, g.learnerFault("the server", err)
	}
	return &childServer{g: g, c: c, cfg: cfg, args: args}, nil
}

func (s *childServer) stop() { s.c.stop() }

// flood floods the server with each of opts at once and returns their
// runs (nil where a flood could not start), with the first error.
func (s *childServer) flood(ctx context.Context, opts ...harness.Options) ([]*results.Run, error) {
	g := s.g
	stats := harness.HTTPStats(s.c.URL)
	runs := make([]*results.Run, len(opts))
	errs := make([]error, len(opts))
	done := make(chan int, len(opts))
	for i := range opts {
		o := opts[i]
		o.URL = s.c.URL + "/generate"
		if i == 0 {
			o.Stats = stats // one sampler is enough
			o.Progress = g.progress(o)
		}
		g.logf("  flooding %s: %s for %s, client timeout %s, server %s ...", o.Name, o.Arrivals(), o.Duration, o.Timeout, strings.Join(s.args, " "))
		go func() {
			runs[i], errs[i] = harness.Flood(ctx, o)
			done <- i
		}()
	}
	for range opts {
		<-done
	}
	for _, run := range runs {
		if run != nil {
			run.Server = record(s.cfg)
		}
	}
	return runs, firstErr(errs...)
}

// finish reads, once every flood of the server drained, its detailed
// stats into each of runs, its CPU while idle (and its memory, with
// memory) into main, and records the runs in the document.
func (s *childServer) finish(ctx context.Context, runs []*results.Run, main *results.Run, memory bool) error {
	g := s.g
	final, idle, after, warnings, ferr := observeAfter(ctx, s.c.URL, measured{memory: memory})
	if main != nil {
		main.Idle, main.Warnings = idle, append(main.Warnings, warnings...)
		if memory {
			main.MemoryAfter = after
		}
		if idle == nil {
			g.idleMissing = append(g.idleMissing, main.Name)
		}
	}
	for _, run := range runs {
		if run == nil {
			continue
		}
		if ferr == nil {
			run.ServerFinal = final
		}
		if p := s.c.panics(); p != "" {
			run.Warnings = append(run.Warnings, "the server logged: "+p)
		}
		g.doc.Runs = append(g.doc.Runs, run)
		g.logf("    %s: sent %d, ok %d, 429 %d, 503 %d, timeout %d, p99 %.0f ms, max waiting %d",
			run.Name, run.Issued, run.OK, run.Counts[results.OutcomeTooMany], run.Counts[results.OutcomeUnavailable],
			run.Counts[results.OutcomeTimeout], run.P99MS, run.ServerFinal.MaxWaiting)
	}
	if errors.Is(ferr, context.Canceled) || errors.Is(ferr, context.DeadlineExceeded) {
		return ferr
	}
	return nil
}

// clientHeader returns a header naming the client for per-client limits.
func clientHeader(id string) http.Header {
	return http.Header{"X-Client-Id": []string{id}}
}
