// Command counting runs task 8's measurements of its four limiters on the
// real clock (harness.MeasureCounting), with the limiters compiled in from a
// chosen tree, and prints them as one JSON object (results.Counting). The
// grader runs it as a child process, so a learner's panic or deadlock
// cannot take the grader down.
//
// The build tag ratelab_ex_counting takes the limiters from
// exercises/counting instead of solutions/counting.
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
	"time"

	"ratelab/harness"
)

func main() {
	measure := flag.String("measure", "boundary,return,memory,disagreement", "the measurements to run, comma-separated")
	seed := flag.Uint64("seed", 1, "the seed of the disagreement's random trace")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := harness.MeasureCounting(ctx, limiters(), harness.CountingOptions{
		Measure: strings.Split(*measure, ","), Seed: *seed,
	})
	if c != nil {
		c.Tree = tree
		if jerr := json.NewEncoder(os.Stdout).Encode(c); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "counting: %v\n", err)
		os.Exit(1)
	}
}

// countingSet adapts one tree's four constructors, whatever their concrete
// types, to a harness.CountingSet.
func countingSet[F, L, C, B harness.CountingLimiter](
	fixed func(int, time.Duration) F, log func(int, time.Duration) L,
	counter func(int, time.Duration) C, bucket func(int, time.Duration, int) B,
	defaultBurst func(int) int,
) harness.CountingSet {
	return harness.CountingSet{
		Fixed:   func(limit int, window time.Duration) harness.CountingLimiter { return fixed(limit, window) },
		Log:     func(limit int, window time.Duration) harness.CountingLimiter { return log(limit, window) },
		Counter: func(limit int, window time.Duration) harness.CountingLimiter { return counter(limit, window) },
		Bucket: func(limit int, window time.Duration, burst int) harness.CountingLimiter {
			return bucket(limit, window, burst)
		},
		DefaultBurst: defaultBurst,
	}
}
