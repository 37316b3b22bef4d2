package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"syscall"
	"time"

	"ratelab/fakegpu"
)

func init() {
	commands = append(commands, &command{
		Name:      "serve",
		UsageLine: "serve [--mode none] [--port 8000] [--slots 8] [--work 100ms] [--max-waiting 16] [--deadline 800ms]",
		Short:     "run the fake GPU server until Ctrl-C",
		Long: `Serve runs the fake GPU server on 127.0.0.1, for following the lesson by
hand: flood it with 'grade flood RATE --url http://127.0.0.1:PORT' and read
its counters with 'curl -s 127.0.0.1:PORT/stats'.

GET /generate waits for one of the slots, works for --work and answers
{"text":"hello"}. GET /stats reports finished, waiting, max_waiting,
in_flight, shed, limited, expired, dead and leaked. In mode none the server
keeps working on requests whose client has gone: that is the point of task 1.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			def := fakegpu.DefaultConfig()
			mode := fs.String("mode", string(def.Mode), "protection: none")
			port := fs.Int("port", 8000, "TCP port on 127.0.0.1 (0 picks a free one)")
			slots := fs.Int("slots", def.Slots, "requests the GPU works on at once")
			work := fs.Duration("work", def.Work, "time one request holds its slot")
			maxWaiting := fs.Int("max-waiting", def.MaxWaiting, "longest line in the protected modes")
			deadline := fs.Duration("deadline", def.Deadline, "longest wait for a slot in the protected modes (0: off)")
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("serve takes no arguments, got %q", args)
				}
				m, err := fakegpu.ParseMode(*mode)
				if err != nil {
					return usageError{err.Error()}
				}
				if m != fakegpu.ModeNone {
					return usagef("mode %s needs the admission code of task 2, which this version of ratelab does not have yet", m)
				}
				if *port < 0 || *port > 65535 {
					return usagef("--port %d: want 0 to 65535", *port)
				}
				cfg := def
				cfg.Mode, cfg.Slots, cfg.Work, cfg.MaxWaiting, cfg.Deadline = m, *slots, *work, *maxWaiting, *deadline
				srv, err := fakegpu.New(cfg)
				if err != nil {
					return usageError{err.Error()}
				}
				return serve(ctx, srv, *port)
			}
		},
	})
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
