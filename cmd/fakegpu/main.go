// Command fakegpu runs the fake GPU server with admission logic (task 2) and
// a per-client limiter (task 3) compiled in from a chosen tree. The grader
// builds it with build tags and runs it as a child process, so a learner's
// panic, deadlock or compile error cannot take the grader down; learners
// reach it through `grade serve`.
//
// Build tags choose the trees: ratelab_ex_shedding takes task 2's code from
// exercises/ instead of solutions/, ratelab_ex_bucket likewise for task 3.
//
// Once listening it prints one line, "listening on http://127.0.0.1:PORT",
// and serves until SIGINT or SIGTERM.
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

	"ratelab/fakegpu"
)

func main() {
	def := fakegpu.DefaultConfig()
	mode := flag.String("mode", string(def.Mode), "protection: none, shed, bucket or redis")
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0 picks a free one)")
	slots := flag.Int("slots", def.Slots, "requests the GPU works on at once")
	work := flag.Duration("work", def.Work, "time one request holds its slot")
	maxWaiting := flag.Int("max-waiting", def.MaxWaiting, "longest line in the protected modes")
	deadline := flag.Duration("deadline", def.Deadline, "longest wait for a slot in the protected modes (0: off)")
	rate := flag.Float64("rate", def.BucketRate, "per-client bucket refill, tokens per second")
	burst := flag.Float64("burst", def.BucketBurst, "per-client bucket capacity, tokens")
	spread := flag.Bool("spread-retry-after", false, "tell shed requests to come back spread out at the server's capacity")
	reusePort := flag.Bool("reuse-port", false, "listen on --port with SO_REUSEPORT, beside other workers (Linux)")
	listenFD := flag.Int("listen-fd", 0, "serve on this inherited listening socket instead of --port (several workers share one port this way)")
	redisURL := flag.String("redis", "", "mode redis: the Redis server every worker shares, such as redis://127.0.0.1:6379")
	statsPort := flag.Int("stats-port", -1, "also serve this worker alone on 127.0.0.1:PORT (0 picks one), for reading its own /stats")
	flag.Parse()

	m, err := fakegpu.ParseMode(*mode)
	if err != nil {
		fail(2, err)
	}
	if m == fakegpu.ModeRedis && *redisURL == "" {
		fail(2, errors.New("mode redis needs --redis URL: the server every worker shares"))
	}
	cfg := def
	cfg.Mode, cfg.Slots, cfg.Work, cfg.MaxWaiting, cfg.Deadline = m, *slots, *work, *maxWaiting, *deadline
	cfg.BucketRate, cfg.BucketBurst = *rate, *burst
	cfg.SpreadRetryAfter = *spread
	var opts []fakegpu.Option
	if m != fakegpu.ModeNone {
		opts = append(opts, fakegpu.WithAdmission(admission))
	}
	limiterDesc := limiterFrom
	switch m {
	case fakegpu.ModeBucket:
		opts = append(opts, fakegpu.WithLimiter(newLimiter(cfg.BucketRate, cfg.BucketBurst)))
	case fakegpu.ModeRedis:
		lim, cleanup, err := newRedisLimiter(context.Background(), *redisURL, cfg.BucketRate, cfg.BucketBurst)
		if err != nil {
			fail(2, fmt.Errorf("mode redis: %w", err))
		}
		defer cleanup()
		opts = append(opts, fakegpu.WithLimiter(lim))
		limiterDesc = redisFrom
	}
	srv, err := fakegpu.New(cfg, opts...)
	if err != nil {
		fail(2, err)
	}
	var in *fakegpu.Instance
	if *listenFD > 0 {
		ln, err := net.FileListener(os.NewFile(uintptr(*listenFD), "listener"))
		if err != nil {
			fail(2, fmt.Errorf("inherited listener: %w", err))
		}
		in = fakegpu.Serve(srv, ln)
	} else if *reusePort {
		ln, err := fakegpu.ListenReusePort(fmt.Sprintf("127.0.0.1:%d", *port))
		if err != nil {
			fail(2, err)
		}
		in = fakegpu.Serve(srv, ln)
	} else if in, err = fakegpu.Listen(srv, fmt.Sprintf("127.0.0.1:%d", *port)); err != nil {
		fail(2, err)
	}
	defer in.Close()
	if *statsPort >= 0 {
		own, err := fakegpu.Listen(srv, fmt.Sprintf("127.0.0.1:%d", *statsPort))
		if err != nil {
			fail(2, err)
		}
		defer own.Close()
		fmt.Printf("stats on %s\n", own.URL)
	}
	fmt.Printf("listening on %s (mode %s, admission from %s, limiter from %s)\n", in.URL, m, admissionFrom, limiterDesc)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = in.Shutdown(sctx)
}

func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "fakegpu: %v\n", err)
	os.Exit(code)
}
