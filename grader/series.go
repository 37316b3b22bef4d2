package grader

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"ratelab/results"
)

// Series grades tasks in order, each as Grade grades it, with one overlap:
// a task's unit stage (go test -race, with its virtual-time session built
// beside it) starts while the task before it finishes, as soon as nothing
// that task has left to do can be changed by another program's load (it
// calls quiet). That is work in virtual time, which gives the same
// figures however busy the machine, and the wall-clock checks judged from
// the server's own records (idle CPU, memory) or with margins of 10x. A
// flood on the wall clock held to the model's figures (--real, task 6
// with --redis) never has a neighbour, nor has a unit stage another unit
// stage. Task 3's flood of many keys, whose generator has to keep up with
// 8,000 new keys a second but leaves most of a core idle, has one at the
// lowest CPU priority (nice 19, where the system has nice; task 3 calls
// yieldLow): the next task's unit stage then takes what the flood leaves.
//
// The task started early stops after its unit stage until the one before
// it has finished, and its log is held until then, so the log reads as if
// the tasks ran one after another. done is told of each task in order as
// soon as it is graded; when it returns true, or a grading returns an
// error, the series stops: the task started ahead is cancelled and its
// document dropped. Series returns once every grading it started has
// ended.
func Series(ctx context.Context, tasks []Task, opts Options, done func(Task, *results.Document, error) (stop bool)) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // a task started ahead of a stop ends interrupted
		wg.Wait()
	}()
	type outcome struct {
		doc *results.Document
		err error
	}
	turns := make([]*turn, len(tasks))
	outs := make([]chan outcome, len(tasks))
	for i := range tasks {
		turns[i] = newTurn(opts.Log, i > 0)
		outs[i] = make(chan outcome, 1)
	}
	start := func(i int) {
		o := opts
		o.Log, o.turn = turns[i].log, turns[i]
		wg.Go(func() {
			doc, err := Grade(ctx, tasks[i], o)
			turns[i].quietNow() // at the latest when it ends
			outs[i] <- outcome{doc, err}
		})
	}
	start(0)
	for i, task := range tasks {
		if i+1 < len(tasks) {
			// The next task starts when this one has gone quiet, or has
			// yielded (then at the lowest priority), or the series stops
			// first.
			wg.Go(func() {
				yield := turns[i].yield
				if NeedsCalibration(tasks[i+1], opts) {
					yield = nil // its wall-clock floods want a quiet machine
				}
				select {
				case <-turns[i].quiet:
				case <-yield:
					select {
					case <-turns[i].quiet:
					default:
						turns[i+1].low = true
					}
				case <-ctx.Done():
				}
				if ctx.Err() == nil {
					start(i + 1)
				} else {
					outs[i+1] <- outcome{}
				}
			})
		}
		out := <-outs[i]
		if i+1 < len(tasks) {
			turns[i+1].begin()
		}
		if done(task, out.doc, out.err) || out.err != nil {
			return
		}
	}
}

// turn is a grading's place in a Series.
type turn struct {
	// quiet is closed once the grading's remaining work leaves its
	// figures the same whatever runs beside it.
	quiet     chan struct{}
	quietOnce sync.Once
	// yield is closed once the grading's remaining work minds only a
	// neighbour at the same priority: one at the lowest CPU priority
	// (nice 19) takes the cores it leaves idle and little else.
	yield     chan struct{}
	yieldOnce sync.Once
	// low says that the grading was started on the one before it
	// yielding: the programs of its unit stage run at the lowest priority.
	low bool
	// mine is closed when the grading before this one has ended: until
	// then this one stops after its unit stage.
	mine      chan struct{}
	beginOnce sync.Once
	log       *heldLog
}

func newTurn(w io.Writer, ahead bool) *turn {
	t := &turn{quiet: make(chan struct{}), yield: make(chan struct{}), mine: make(chan struct{}), log: &heldLog{w: w, held: ahead}}
	if !ahead {
		t.begin()
	}
	return t
}

// quietNow says that the grading minds no neighbour any more.
func (t *turn) quietNow() { t.quietOnce.Do(func() { close(t.quiet) }) }

// yieldNow says that the grading minds only a neighbour at its own
// priority.
func (t *turn) yieldNow() { t.yieldOnce.Do(func() { close(t.yield) }) }

// begin gives the grading its turn: its held log comes out, and it goes on
// past its unit stage.
func (t *turn) begin() {
	t.beginOnce.Do(func() {
		t.log.release()
		close(t.mine)
	})
}

// heldLog passes writes to w, or keeps them while held, until release.
type heldLog struct {
	mu   sync.Mutex
	w    io.Writer
	held bool
	buf  bytes.Buffer
}

func (h *heldLog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		return h.buf.Write(p)
	}
	if h.w == nil {
		return len(p), nil
	}
	return h.w.Write(p)
}

// release writes what was held and passes every later write straight on.
func (h *heldLog) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held && h.w != nil {
		_, _ = h.w.Write(h.buf.Bytes())
	}
	h.held = false
	h.buf.Reset()
}

// quiet tells a Series that this grading's remaining work gives the same
// figures whatever runs beside it (see Series); alone, it does nothing.
func (g *grading) quiet() {
	if g.opts.turn != nil {
		g.opts.turn.quietNow()
	}
}

// yieldLow tells a Series that this grading's remaining work minds only
// neighbours at its own priority: the next task's unit stage may run
// beside it at the lowest (see Series); alone, it does nothing.
func (g *grading) yieldLow() {
	if g.opts.turn != nil {
		g.opts.turn.yieldNow()
	}
}

// unlowered stops a session build begun at the lowest priority that is
// still running once the grading has its turn: no process can take its
// priority back without privileges, and the next task's unit stage, at
// the usual one, would starve it. vsession builds it again (Go's build
// cache keeps what it had compiled).
func (g *grading) unlowered() {
	t, b := g.opts.turn, g.prebuilt
	if t == nil || !t.low || b == nil {
		return
	}
	select {
	case <-b.done:
	default:
		b.cancel()
		<-b.done
		g.prebuilt = nil
	}
}

// yielding returns ctx marked, for the programs of the unit stage, to run
// at the lowest CPU priority when this grading started beside one that
// owns the machine.
func (g *grading) yielding(ctx context.Context) context.Context {
	if t := g.opts.turn; t != nil && t.low {
		return withLowPriority(ctx)
	}
	return ctx
}

// awaitTurn waits, in a Series, until the grading before this one has
// ended; the time waited does not count as this task's. It returns early
// if ctx ends.
func (g *grading) awaitTurn(ctx context.Context) error {
	t := g.opts.turn
	if t == nil {
		return nil
	}
	select {
	case <-t.mine:
		return nil
	default:
	}
	began := time.Now()
	defer func() { g.waited += time.Since(began) }()
	select {
	case <-t.mine:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
