// Command fakegpu runs the fake GPU server with admission logic (task 2), a
// per-client limiter (task 3) and a Redis-backed limiter (task 6) compiled
// in from a chosen tree. The grader builds it with build tags and runs it as
// a child process, so a learner's panic, deadlock or compile error cannot
// take the grader down; learners reach it through `grade serve`.
//
// Build tags choose the trees: ratelab_ex_shedding takes task 2's code from
// exercises/ instead of solutions/, ratelab_ex_bucket likewise for task 3
// and ratelab_ex_redisbucket for task 6.
//
// With a separate stats port it first prints "stats on URL". Once listening
// it prints "listening on http://127.0.0.1:PORT (mode M, admission from
// TREE, limiter from TREE)" and serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"ratelab/fakegpu"
	"ratelab/internal/redisenv"
	"ratelab/internal/trees/bucket"
	"ratelab/internal/trees/redisbucket"
	"ratelab/internal/trees/shedding"
)

// options are the command line: the server's settings and where it listens.
type options struct {
	cfg       fakegpu.Config
	port      int
	reusePort bool
	listenFD  int
	statsPort int
}

// parseFlags reads the command line args (without the program's name). The
// flag package has already told the user about an error it returns.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("fakegpu", flag.ContinueOnError)
	o := options{cfg: fakegpu.DefaultConfig()}
	o.cfg.RegisterFlags(fs) // --mode, --slots, ... --redis: the server's settings
	fs.IntVar(&o.port, "port", 0, "TCP port on 127.0.0.1 (0 picks a free one)")
	fs.BoolVar(&o.reusePort, "reuse-port", false, "listen on --port with SO_REUSEPORT, beside other workers (Linux)")
	fs.IntVar(&o.listenFD, "listen-fd", 0, "serve on this inherited listening socket instead of --port (several workers share one port this way)")
	fs.IntVar(&o.statsPort, "stats-port", -1, "also serve this worker alone on 127.0.0.1:PORT (0 picks one), for reading its own /stats")
	err := fs.Parse(args)
	return o, err
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // the flag package said why
	}
	cfg, m := o.cfg, o.cfg.Mode
	if m == fakegpu.ModeRedis && cfg.Redis == "" {
		fail(2, errors.New("mode redis needs --redis URL: the server every worker shares"))
	}
	srv, limiterDesc, cleanup, err := newServer(cfg)
	if err != nil {
		fail(2, err)
	}
	defer cleanup()
	var in *fakegpu.Instance
	if o.listenFD > 0 {
		ln, err := net.FileListener(os.NewFile(uintptr(o.listenFD), "listener"))
		if err != nil {
			fail(2, fmt.Errorf("inherited listener: %w", err))
		}
		in = fakegpu.Serve(srv, ln)
	} else if o.reusePort {
		ln, err := fakegpu.ListenReusePort(fmt.Sprintf("127.0.0.1:%d", o.port))
		if err != nil {
			fail(2, err)
		}
		in = fakegpu.Serve(srv, ln)
	} else if in, err = fakegpu.Listen(srv, fmt.Sprintf("127.0.0.1:%d", o.port)); err != nil {
		fail(2, err)
	}
	defer in.Close()
	if o.statsPort >= 0 {
		own, err := fakegpu.Listen(srv, fmt.Sprintf("127.0.0.1:%d", o.statsPort))
		if err != nil {
			fail(2, err)
		}
		defer own.Close()
		fmt.Printf("stats on %s\n", own.URL)
	}
	fmt.Printf("listening on %s (mode %s, admission from %s, limiter from %s)\n", in.URL, m, shedding.From, limiterDesc)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = in.Shutdown(sctx)
}

// newServer returns a server for cfg with the compiled-in admission and
// limiter, extra options added, a description of where its limiter comes
// from, and what to call once it has stopped. In mode redis it connects to
// cfg.Redis.
func newServer(cfg fakegpu.Config, extra ...fakegpu.Option) (*fakegpu.Server, string, func(), error) {
	if cfg.Mode != fakegpu.ModeRedis {
		srv, desc, err := newServerOn(cfg, nil, extra...)
		return srv, desc, func() {}, err
	}
	rdb, _, cleanup, err := redisenv.Open(context.Background(), cfg.Redis)
	if err != nil {
		return nil, "", nil, fmt.Errorf("mode redis: %w", err)
	}
	srv, desc, err := newServerOn(cfg, rdb, extra...)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return srv, desc, cleanup, nil
}

// newServerOn is newServer with the Redis client of mode redis given (rdb,
// nil in other modes): a session's workers each dial their own to the
// session's miniredis.
func newServerOn(cfg fakegpu.Config, rdb *redis.Client, extra ...fakegpu.Option) (*fakegpu.Server, string, error) {
	if cfg.Counting != "" {
		return nil, "", fmt.Errorf("--counting %s: task 8's limiters are served by cmd/counting", cfg.Counting)
	}
	opts := extra
	limiterDesc := bucket.From
	switch cfg.Mode {
	case fakegpu.ModeNone:
	case fakegpu.ModeBucket:
		opts = append(opts, fakegpu.WithLimiter(bucket.NewLimiter(cfg.BucketRate, cfg.BucketBurst)))
	case fakegpu.ModeRedis:
		if rdb == nil {
			return nil, "", errors.New("mode redis: no Redis client")
		}
		opts = append(opts, fakegpu.WithLimiter(redisbucket.NewLimiter(rdb, cfg.BucketRate, cfg.BucketBurst)))
		limiterDesc = redisbucket.From
	}
	if cfg.Mode != fakegpu.ModeNone {
		opts = append(opts, fakegpu.WithAdmission(shedding.Admission))
	}
	srv, err := fakegpu.New(cfg, opts...)
	if err != nil {
		return nil, "", err
	}
	return srv, limiterDesc, nil
}

func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "fakegpu: %v\n", err)
	os.Exit(code)
}
