package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"ratelab/fakegpu"
	"ratelab/grader"
)

var cmdServe = &command{
	Name:      "serve",
	UsageLine: "serve [--mode none|shed|bucket] [--workers 1] [--solutions] [--port 8000] [--slots 8] [--work 100ms] [--max-waiting 16] [--deadline 800ms] [--rate 70] [--burst 20]",
	Short:     "run the fake GPU server until Ctrl-C",
	Long: `Serve runs the fake GPU server on 127.0.0.1, for following the lesson by
hand: flood it with 'grade flood RATE --url http://127.0.0.1:PORT' and read
its counters with 'curl -s 127.0.0.1:PORT/stats'.

GET /generate waits for one of the slots, works for --work and answers
{"text":"hello"}. GET /stats reports finished, waiting, max_waiting,
in_flight, shed, limited, expired, dead and leaked. In mode none the server
keeps working on requests whose client has gone: that is the point of task 1.

Modes shed and bucket run your own code: task 2's admission from
exercises/shedding and task 3's limiter from exercises/bucket (with
--solutions, the reference). grade builds that server first; a stub that is
not written yet answers every request by dropping the connection.`,
	Run: withFlags(serveFlags, runServe),
}

// serveOptions are serve's flags: the server's configuration and where it
// runs.
type serveOptions struct {
	cfg       fakegpu.Config // Mode is set from mode
	mode      string
	solutions bool
	workers   int
	port      int
}

func serveFlags(fs *flag.FlagSet) *serveOptions {
	o := serveOptions{cfg: fakegpu.DefaultConfig()}
	fs.StringVar(&o.mode, "mode", string(o.cfg.Mode), "protection: none, shed or bucket")
	fs.BoolVar(&o.solutions, "solutions", false, "in modes shed and bucket, run the reference code instead of your exercises")
	fs.Float64Var(&o.cfg.BucketRate, "rate", o.cfg.BucketRate, "per-client bucket refill in mode bucket, tokens per second")
	fs.Float64Var(&o.cfg.BucketBurst, "burst", o.cfg.BucketBurst, "per-client bucket capacity in mode bucket, tokens")
	fs.IntVar(&o.workers, "workers", 1, "server processes sharing the port, each with its own slots and limiter (as uvicorn --workers)")
	fs.IntVar(&o.port, "port", 8000, "TCP port on 127.0.0.1 (0 picks a free one)")
	fs.IntVar(&o.cfg.Slots, "slots", o.cfg.Slots, "requests the GPU works on at once")
	fs.DurationVar(&o.cfg.Work, "work", o.cfg.Work, "time one request holds its slot")
	fs.IntVar(&o.cfg.MaxWaiting, "max-waiting", o.cfg.MaxWaiting, "longest line in the protected modes")
	fs.DurationVar(&o.cfg.Deadline, "deadline", o.cfg.Deadline, "longest wait for a slot in the protected modes (0: off)")
	return &o
}

func runServe(ctx context.Context, o *serveOptions, args []string) error {
	if len(args) > 0 {
		return usagef("serve takes no arguments, got %q", args)
	}
	m, err := fakegpu.ParseMode(o.mode)
	if err != nil {
		return usageError{err.Error()}
	}
	if m == fakegpu.ModeRedis {
		return usagef("mode redis is not available yet")
	}
	if o.port < 0 || o.port > 65535 {
		return usagef("--port %d: want 0 to 65535", o.port)
	}
	cfg := o.cfg
	cfg.Mode = m
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if o.workers < 1 || o.workers > 64 {
		return usagef("--workers %d: want 1 to 64", o.workers)
	}
	if m != fakegpu.ModeNone || o.workers > 1 {
		return serveChild(ctx, cfg, o.port, o.workers, o.solutions)
	}
	srv, err := fakegpu.New(cfg)
	if err != nil {
		return usageError{err.Error()}
	}
	return serve(ctx, srv, o.port)
}

// serveChild runs a protected server built from the learner's tree (or the
// reference) as a child process until ctx ends.
func serveChild(ctx context.Context, cfg fakegpu.Config, port, workers int, solutions bool) error {
	if err := portFree(port); err != nil {
		return err
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	impl := grader.Exercises
	if solutions {
		impl = grader.Solutions
	}
	fmt.Fprintf(stdout, "building the server with task 2 and task 3 code from %s/ ...\n", impl)
	bin, cleanup, err := grader.BuildTool(ctx, root, impl, "fakegpu")
	if err != nil {
		return err
	}
	defer cleanup()
	w, err := grader.StartWorkers(ctx, bin, workers, port,
		"--mode", string(cfg.Mode), "--slots", fmt.Sprint(cfg.Slots),
		"--work", cfg.Work.String(), "--max-waiting", fmt.Sprint(cfg.MaxWaiting), "--deadline", cfg.Deadline.String(),
		"--rate", fmt.Sprint(cfg.BucketRate), "--burst", fmt.Sprint(cfg.BucketBurst))
	if err != nil {
		return err
	}
	defer w.Stop()
	fmt.Fprintf(stdout, "fakegpu: %d worker(s), each mode %s, %d slots x %s (capacity %.0f req/s), line %d, deadline %s, on %s\n",
		workers, cfg.Mode, cfg.Slots, cfg.Work, cfg.Capacity(), cfg.MaxWaiting, cfg.Deadline, w.URL)
	if workers > 1 {
		fmt.Fprintf(stdout, "each worker's own /stats: %s\n", strings.Join(w.StatsURLs, " "))
	}
	fmt.Fprintf(stdout, "try: grade flood 240 --url %s    or: curl -s %s/stats\nCtrl-C stops it.\n", w.URL, w.StatsURLs[0])
	<-ctx.Done()
	if p := w.Panics(); p != "" {
		fmt.Fprintf(stdout, "\nthe server's handler panicked: %s\n", p)
	}
	return nil
}

// portFree reports a clear error if port is taken on 127.0.0.1.
func portFree(port int) error {
	if port == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if errors.Is(err, syscall.EADDRINUSE) {
		return usagef("port %d is already in use; stop what runs there or choose another --port", port)
	}
	if err != nil {
		return usagef("cannot listen on port %d: %v", port, err)
	}
	return ln.Close()
}

// serve runs srv on 127.0.0.1:port until ctx ends.
func serve(ctx context.Context, srv *fakegpu.Server, port int) error {
	in, err := fakegpu.Listen(srv, fmt.Sprintf("127.0.0.1:%d", port))
	if errors.Is(err, syscall.EADDRINUSE) {
		return usagef("port %d is already in use; stop what runs there or choose another --port", port)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return usagef("cannot listen on port %d: %v", port, opErr.Err)
	}
	if err != nil {
		return err
	}
	cfg := srv.Config()
	fmt.Fprintf(stdout, "fakegpu: mode %s, %d slots x %s (capacity %.0f req/s) on %s\n",
		cfg.Mode, cfg.Slots, cfg.Work, cfg.Capacity(), in.URL)
	fmt.Fprintf(stdout, "try: grade flood 120 --url %s    or: curl -s %s/stats\nCtrl-C stops it.\n", in.URL, in.URL)
	<-ctx.Done()
	fmt.Fprintf(stdout, "\nstopping; final stats: %+v\n", srv.Stats())
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = in.Shutdown(sctx)
	return nil
}
