package grader

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/vsession"
	"ratelab/results"
)

// Virtual time (Options.Virtual): the floods of tasks 1 to 3 against the
// fake GPU, task 4's storms and amplifier, task 5's judge against the fake
// API, task 6's four workers and the miniredis they share, task 7's
// dependency scenario and task 8's timed measurements run in a
// testing/synctest bubble over an in-memory network, in a test binary
// built with the graded code (cmd/fakegpu, cmd/storm, cmd/judge,
// cmd/breaker or cmd/counting with its session mode; see vsession.Run).
// The grader drives it with one request per server, flood, storm or
// measurement, and judges what it returns with the same checks as on the
// wall clock.
//
// What a bubble cannot see stays on the wall clock, in the same grading:
// the server's CPU while idle (a bubble makes computation free), the
// graded code's time per call (cost.go; for task 6, its script's on a
// miniredis), task 3's server memory under a flood of new keys and task
// 8's memory per client (the bubble's process holds the clients too, and
// code could tell). Task 6 given a Redis (--redis URL) runs on the wall
// clock, judged by that Redis, and says so.

// virtualBudget is how long, in real time, one request to a session may
// take before the grader gives up on it, as a backstop: a 10 s flood takes
// well under a second on 2 cores, and the session itself reports a bubble
// whose clock stands still for vsession.StallLimit (a goroutine that never
// blocks) long before this.
const virtualBudget = 5 * time.Minute

// virtualTasks maps each task with virtual time to the command whose
// session build holds its graded code: the fake GPU for tasks 1 to 3,
// the storm's clients, the judge's polite client and the fake API, the
// breaker's service and dependency, the four limiters.
var virtualTasks = map[string]string{
	"task1": "fakegpu", "task2": "fakegpu", "task3": "fakegpu", "task4": "storm",
	"task5": "judge", "task6": "fakegpu", "task7": "breaker", "task8": "counting",
}

// stuckError is a session request that took budget of real time.
func stuckError(budget time.Duration) error {
	return fmt.Errorf("a request to the virtual-time session took more than %s of real time (a 10 s flood takes under a second): the code is very slow, or something in it never blocks", budget)
}

// floodsVirtual reports whether grading task with opts floods in virtual
// time.
func floodsVirtual(task Task, opts Options) bool {
	return opts.Virtual && virtualTasks[task.ID] != "" && !(task.ID == "task6" && givenRedis(opts.RedisURL))
}

// NeedsCalibration reports whether grading task with opts sends floods on
// the wall clock whose figures are held to the model's, which holds only
// on a machine that keeps the lesson's rates (Calibrate). Virtual-time
// floods are the model's on any machine, however busy. The wall-clock
// work beside them (task 2's short flood before its idle-CPU check, task
// 3's many-keys flood, the time per call) judges the code's own use of
// the machine from the server's own records (its CPU while idle, its
// heap, its per-client counts, every refusal's wait) or with margins of
// ten times and more, none of which a busy machine turns against correct
// code, and needs no calibration.
func NeedsCalibration(task Task, opts Options) bool {
	return !opts.UnitOnly && task.grade != nil && !floodsVirtual(task, opts)
}

// session is a virtual-time session running as a child process.
type session struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc // kills the process group
	budget  time.Duration      // the real time one request may take
	stdin   io.WriteCloser
	replies *bufio.Scanner
	output  *tailBuffer // standard output and error, for panics
	done    chan struct{}
	err     error
}

// vsession returns the grading's session, building and starting it on
// first use (the build begun beside the unit stage, if prebuild did); it
// ends with the grading (g.closeSession).
func (g *grading) vsession(ctx context.Context) (*session, error) {
	if g.session != nil {
		return g.session, nil
	}
	if g.prebuilt == nil {
		g.logf("  building the virtual-time session ...")
		g.prebuilt = g.buildSession(ctx)
	}
	b := g.prebuilt
	var bin string
	var err error
	select {
	case <-b.done:
		bin, err = b.bin, b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			g.prebuilt = nil // stopped, not failed: the next call builds again
			return nil, cmp.Or(ctx.Err(), err)
		}
		return nil, g.learnerFault("the virtual-time session", err)
	}
	budget := virtualBudget
	if g.opts.virtualBudget > 0 {
		budget = g.opts.virtualBudget
	}
	s, err := startSession(bin, budget)
	if err != nil {
		return nil, err
	}
	g.session = s
	return s, nil
}

// sessionBuild is a build of the session binary, under way or done.
type sessionBuild struct {
	done   chan struct{} // closed when bin and err are set
	bin    string
	err    error
	cancel context.CancelFunc
}

// prebuild starts building the session binary in the background, so that
// it compiles while the unit stage runs: a grading in virtual time needs
// both, and each takes seconds (virtualRunner.prebuild). Nothing waits for a build nobody uses but
// the end of the grading (g.closeSession), which stops it.
func (g *grading) prebuild(ctx context.Context) {
	if !g.opts.UnitOnly && g.prebuilt == nil {
		g.logf("  building the virtual-time session, beside the unit tests ...")
		g.prebuilt = g.buildSession(ctx)
	}
}

// buildSession starts compiling the command the task's session runs, with
// the graded code and its session mode compiled in (vsession.Run), named as
// the wall clock's build of it: to the graded code the session looks like
// the program it stands for. It has a folder of its own for its overlay,
// so that it can run beside the unit stage.
func (g *grading) buildSession(ctx context.Context) *sessionBuild {
	ctx, cancel := context.WithCancel(ctx)
	b := &sessionBuild{done: make(chan struct{}), cancel: cancel}
	cmdName := virtualTasks[g.task.ID]
	var tags []string
	if g.opts.Impl == Exercises && g.task.Unit != nil {
		tags = []string{"ratelab_ex_" + g.task.Unit.Package}
	}
	tags = referenceTags(g.opts.Root, tags)
	dir := filepath.Join(g.tmp, "session")
	b.bin = filepath.Join(dir, cmdName+"-"+strings.Join(append([]string{"ref"}, tags...), "-"))
	go func() {
		defer close(b.done)
		if b.err = os.MkdirAll(dir, 0o755); b.err != nil {
			return
		}
		overlay, err := writeOverlay(dir, g.opts.Root, g.opts.Replace)
		if err != nil {
			b.err = err
			return
		}
		_, b.err = compile(ctx, g.opts.Root, dir, b.bin, []string{"build", "-o", b.bin},
			"./cmd/"+cmdName, append(tags, "ratelab_vsession"), overlay)
	}()
	return b
}

// startSession runs the session binary bin as a child process in a process
// group of its own.
func startSession(bin string, budget time.Duration) (*session, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close() // the child holds its own copy
	// Cancelled only by close: the session outlives each request's ctx.
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin) // no arguments, as a server started by hand
	cmd.Env = append(os.Environ(), vsession.EnvServe+"=1")
	cmd.ExtraFiles = []*os.File{w}
	ownProcessGroup(cmd)
	setParentDeathSignal(cmd)
	s := &session{cmd: cmd, cancel: cancel, budget: budget, output: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.output, s.output
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		r.Close()
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		cancel()
		return nil, fmt.Errorf("start the virtual-time session: %w", err)
	}
	s.replies = bufio.NewScanner(r)
	s.replies.Buffer(nil, 256<<20)
	go func() {
		s.err = cmd.Wait()
		_ = killProcessGroup(cmd)
		r.Close()
		close(s.done)
	}()
	return s, nil
}

// call sends req and waits for its reply, for at most s.budget.
func (s *session) call(ctx context.Context, req vsession.Request) (vsession.Reply, error) {
	type answer struct {
		rep vsession.Reply
		err error
	}
	got := make(chan answer, 1)
	go func() {
		if err := json.NewEncoder(s.stdin).Encode(req); err != nil {
			got <- answer{err: err}
			return
		}
		if !s.replies.Scan() {
			got <- answer{err: io.ErrUnexpectedEOF}
			return
		}
		var a answer
		a.err = json.Unmarshal(s.replies.Bytes(), &a.rep)
		got <- a
	}()
	select {
	case a := <-got:
		if errors.Is(a.err, io.ErrUnexpectedEOF) {
			<-s.done
			return a.rep, s.exited()
		}
		if a.err == nil && a.rep.Error != "" {
			a.err = errors.New(a.rep.Error)
		}
		if a.rep.Stalled {
			<-s.done // the session ends itself after a stalled reply
		}
		return a.rep, a.err
	case <-ctx.Done():
		s.close()
		return vsession.Reply{}, ctx.Err()
	case <-time.After(s.budget):
		s.close()
		return vsession.Reply{}, stuckError(s.budget)
	}
}

// exited says how the session ended before it answered.
func (s *session) exited() error {
	how := "exit status 0"
	if s.err != nil {
		how = s.err.Error()
	}
	msg := "it stopped before answering (" + how + ")"
	if p := panicLines(s.output.String()); p != "" {
		msg += ": " + p
	}
	return errors.New(msg)
}

// panicLines returns the first lines of a panic or fatal error in out, or
// of out itself.
func panicLines(out string) string {
	for _, mark := range []string{"panic: ", "fatal error: "} {
		if i := strings.Index(out, mark); i >= 0 {
			return firstLines(out[i:], 4)
		}
	}
	return firstLines(out, 4)
}

// close ends the session: end of input, then the whole process group.
func (s *session) close() {
	_ = s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
		s.cancel()
		<-s.done
	}
	s.cancel()
}

// closeSession ends the grading's session, if it started one, and stops
// a build of it nobody used.
func (g *grading) closeSession() {
	if g.session != nil {
		g.session.close()
		g.session = nil
	}
	if b := g.prebuilt; b != nil {
		b.cancel()
		<-b.done
		g.prebuilt = nil
	}
}

// floodVirtual is floodChild in virtual time: a fresh server configured as
// cfg in the grading's session, flooded with each of opts at once, then
// drained and read. A session that fails is the graded code's fault (the
// session runs nothing else of the learner's), except for cancellation.
func (g *grading) floodVirtual(ctx context.Context, cfg fakegpu.Config, opts ...harness.Options) ([]*results.Run, error) {
	s, err := g.vsession(ctx)
	if err != nil {
		return nil, err
	}
	fault := func(err error) error { return g.learnerFault("the server in virtual time", err) }
	// The bubble's clock starts in 2000; each server starts at the real
	// time or later, so that no clock reading gives the session away.
	start := vsession.Request{Op: vsession.OpStart, Config: &cfg, NotBefore: time.Now()}
	if _, err := s.call(ctx, start); err != nil {
		return nil, fault(err)
	}
	for _, o := range opts {
		g.logf("  flooding %s in virtual time: %s for %s, client timeout %s, server %s ...", o.Name, o.Arrivals(), o.Duration, o.Timeout, strings.Join(cfg.Args(), " "))
	}
	rep, err := s.call(ctx, vsession.Request{Op: vsession.OpFlood, Floods: opts})
	if err != nil {
		return nil, fault(err)
	}
	fin, err := s.call(ctx, vsession.Request{Op: vsession.OpFinish})
	if err != nil {
		return nil, fault(err)
	}
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpStop}); err != nil {
		return nil, fault(err)
	}
	runs := rep.Runs
	if len(runs) != len(opts) {
		return nil, fmt.Errorf("the virtual-time session returned %d runs for %d floods", len(runs), len(opts))
	}
	for _, run := range runs {
		if run == nil {
			continue
		}
		run.Server = record(cfg)
		run.ServerFinal = *fin.Final
		if p := panicServing(s.output.String()); p != "" {
			run.Warnings = append(run.Warnings, "the server logged: "+p)
		}
		g.doc.Runs = append(g.doc.Runs, run)
		g.logf("    %s: sent %d, ok %d, 429 %d, 503 %d, timeout %d, p99 %.0f ms, max waiting %d (virtual time)",
			run.Name, run.Issued, run.OK, run.Counts[results.OutcomeTooMany], run.Counts[results.OutcomeUnavailable],
			run.Counts[results.OutcomeTimeout], run.P99MS, run.ServerFinal.MaxWaiting)
	}
	return runs, nil
}

// stormVirtual runs req (OpStorm or OpAmplify) in the grading's session
// against a fresh server configured as cfg, and returns its result and the
// server's detailed stats once it had drained.
func (g *grading) stormVirtual(ctx context.Context, cfg fakegpu.Config, req vsession.Request) (*results.Storm, results.ServerStats, error) {
	s, err := g.vsession(ctx)
	if err != nil {
		return nil, results.ServerStats{}, err
	}
	fault := func(err error) error { return g.learnerFault("the storm's clients in virtual time", err) }
	start := vsession.Request{Op: vsession.OpStart, Config: &cfg, NotBefore: time.Now()}
	if _, err := s.call(ctx, start); err != nil {
		return nil, results.ServerStats{}, fault(err)
	}
	rep, err := s.call(ctx, req)
	if err != nil {
		return nil, results.ServerStats{}, fault(err)
	}
	fin, err := s.call(ctx, vsession.Request{Op: vsession.OpFinish})
	if err != nil {
		return nil, results.ServerStats{}, fault(err)
	}
	if _, err := s.call(ctx, vsession.Request{Op: vsession.OpStop}); err != nil {
		return nil, results.ServerStats{}, fault(err)
	}
	if rep.Storm == nil || fin.Final == nil {
		return nil, results.ServerStats{}, errors.New("the virtual-time session answered without a result")
	}
	return rep.Storm, *fin.Final, nil
}

// panicServing returns the first handler panic net/http logged in out.
func panicServing(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "panic serving"); i >= 0 {
			return strings.TrimSpace(l[i:])
		}
	}
	return ""
}
