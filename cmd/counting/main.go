// Command counting runs task 8's measurements of its four limiters on the
// real clock (scenario.MeasureCounting), with the limiters compiled in from a
// chosen tree, and prints them as one JSON object (results.Counting). The
// grader runs it as a child process, so a learner's panic or deadlock
// cannot take the grader down.
//
// With --counting (fixed, log, counter or bucket) and the fake GPU's other
// settings (fakegpu.Config.RegisterFlags, as the grader writes them with
// Config.Args) it serves instead: the fake GPU with that limiter in front
// of task 2's shedding, on 127.0.0.1:--port, printing "listening on URL"
// and serving until SIGINT or SIGTERM, for task 8's wall-clock floods.
//
// The build tag ratelab_ex_counting takes the limiters from
// exercises/counting instead of solutions/counting; ratelab_ex_shedding
// takes the server's admission from exercises/shedding.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"ratelab/fakegpu"
	"ratelab/internal/trees/counting"
	"ratelab/scenario"
)

func main() {
	measure := flag.String("measure", "boundary,return,memory,disagreement", "the measurements to run, comma-separated")
	seed := flag.Uint64("seed", 1, "the seed of the disagreement's random trace")
	cfg := fakegpu.DefaultConfig()
	cfg.RegisterFlags(flag.CommandLine) // --counting serves instead of measuring
	port := flag.Int("port", 0, "with --counting: TCP port on 127.0.0.1 (0 picks a free one)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Counting != "" {
		if err := serve(ctx, cfg, *port); err != nil {
			fmt.Fprintf(os.Stderr, "counting: %v\n", err)
			os.Exit(2)
		}
		return
	}
	c, err := scenario.MeasureCounting(ctx, counting.Limiters(), scenario.CountingOptions{
		Measure: strings.Split(*measure, ","), Seed: *seed,
	})
	if c != nil {
		c.Tree = counting.From
		if jerr := json.NewEncoder(os.Stdout).Encode(c); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "counting: %v\n", err)
		os.Exit(1)
	}
}
