package grader

import (
	"context"
	"fmt"
	"math"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
)

// Task 3's floods: 10 s each, 1 s client timeout, bucket 70/s with burst 20
// in front of shedding.
const (
	task3Duration = 10 * time.Second
	task3Timeout  = time.Second
)

// Tolerances of task 3, each with the reason it is as wide as it is.
const (
	// A token bucket can never let more than b + r·T through in T: with b =
	// 20 and r = 70 over 10 s that is 720. It is a hard bound; the flood's
	// requests are sent over (0, 10] s, so not even a rounding error may
	// pass it. The lesson measured 719 and 717, a Go prototype 719 and 718.
	task3OKMax = 720
	// At or above the limit, a correct bucket admits nearly all of it: the
	// last token or two may drip in after the last request, and the shedder
	// may refuse one when the line is briefly full. 700 leaves 20 for that.
	task3OKMin = 700
	// One token at 70/s is at most 1/70 s away, so every 429's Retry-After
	// must be exactly 1 second (rounded up); a larger value means the wait
	// was wrong.
	task3RetryAfter = 1
	// The interactive client at 10/s has its own bucket, and the backfill
	// client's is capped at 70/s, so together they fit the capacity of 80.
	// A few interactive requests may still meet a briefly full line; the
	// prototype served 98–99% over four runs. 95% leaves room for that, and
	// is far above the third or so a shared, unkeyed limit would leave.
	task3Fair = 0.95
)

var task3Rates = []float64{100, 240}

func gradeTask3(ctx context.Context, g *grading) error {
	notReady, err := g.unit(ctx)
	if err != nil {
		return err
	}
	var floodChecks []planned
	for _, rate := range task3Rates {
		for _, c := range []string{"never more than burst + rate × time", "the limit is reached", "429s say when to come back"} {
			floodChecks = append(floodChecks, planned{fmt.Sprintf("bucket %g/s: %s", rate, c), task3Points(c)})
		}
	}
	floodChecks = append(floodChecks, planned{"fairness: the interactive client is served beside a backfill", 2})
	if g.opts.UnitOnly {
		return nil
	}
	if notReady == "" {
		bin, err := g.server(ctx)
		if err == nil {
			return floodTask3(ctx, g, bin)
		}
		notReady = fmt.Sprintf("the server with %s %v", g.file(), err)
	}
	g.skipAll(floodChecks, notReady)
	return nil
}

func task3Points(check string) float64 {
	if check == "never more than burst + rate × time" {
		return 2
	}
	return 1
}

func floodTask3(ctx context.Context, g *grading, bin string) error {
	cfg := fakegpu.DefaultConfig()
	bound := cfg.BucketBurst + cfg.BucketRate*task3Duration.Seconds()
	for _, rate := range task3Rates {
		runs, err := g.floodChild(ctx, bin, []string{"--mode", "bucket"}, harness.Options{
			Name: fmt.Sprintf("bucket %g/s", rate), Rate: rate, Duration: task3Duration, Timeout: task3Timeout,
			Header: clientHeader("flood"),
		})
		if err != nil {
			return fmt.Errorf("flood bucket %g/s: %w", rate, err)
		}
		runs[0].Predicted = map[string]float64{"ok": bound}
		checkTask3Bucket(g, runs[0])
	}
	runs, err := g.floodChild(ctx, bin, []string{"--mode", "bucket"},
		harness.Options{Name: "backfill 240/s", Rate: 240, Duration: task3Duration, Timeout: task3Timeout, Header: clientHeader("backfill")},
		harness.Options{Name: "interactive 10/s", Rate: 10, Duration: task3Duration, Timeout: task3Timeout, Header: clientHeader("interactive")},
	)
	if err != nil {
		return fmt.Errorf("flood fairness: %w", err)
	}
	checkTask3Fairness(g, runs[0], runs[1])
	return nil
}

// checkTask3Bucket judges one flood of a single client against its bucket.
func checkTask3Bucket(g *grading, run *results.Run) {
	g.check(results.Check{
		Name: run.Name + ": never more than burst + rate × time", MaxScore: 2,
		Message:  fmt.Sprintf("%d succeeded; a bucket of burst 20 refilling at 70/s lets at most 20 + 70 × 10 = %d through in 10 s, a hard bound", run.OK, task3OKMax),
		Measured: map[string]float64{"ok": float64(run.OK)}, Expected: map[string]float64{"ok_max": task3OKMax},
	}, run.OK <= task3OKMax, run)
	g.check(results.Check{
		Name: run.Name + ": the limit is reached", MaxScore: 1,
		Message:  fmt.Sprintf("%d succeeded; want ≥ %d: a client sending faster than 70/s should get nearly all of 720 (a token or two may drip in after its last request)", run.OK, task3OKMin),
		Measured: map[string]float64{"ok": float64(run.OK)}, Expected: map[string]float64{"ok_min": task3OKMin},
	}, run.OK >= task3OKMin, run)
	ra := run.RetryAfter[results.OutcomeTooMany]
	if ra == nil {
		ra = &results.RetryAfterStats{}
	}
	g.check(results.Check{
		Name: run.Name + ": 429s say when to come back", MaxScore: 1,
		Message: fmt.Sprintf("%d answers were 429: %d with a usable Retry-After (largest %d s), %d without; want some 429s, all with Retry-After %d s, since one token at 70/s is at most 14 ms away",
			run.Counts[results.OutcomeTooMany], ra.Valid, ra.MaxS, ra.Invalid, task3RetryAfter),
		Measured: map[string]float64{"n_429": float64(run.Counts[results.OutcomeTooMany]), "retry_after_valid": float64(ra.Valid), "retry_after_invalid": float64(ra.Invalid), "retry_after_max_s": float64(ra.MaxS)},
		Expected: map[string]float64{"retry_after_s": task3RetryAfter},
	}, ra.Valid > 0 && ra.Invalid == 0 && ra.MaxS == task3RetryAfter, run)
}

// checkTask3Fairness judges a backfill and an interactive client side by side.
func checkTask3Fairness(g *grading, backfill, interactive *results.Run) {
	share := 0.0
	if interactive.Issued > 0 {
		share = float64(interactive.OK) / float64(interactive.Issued)
	}
	interactive.Predicted = map[string]float64{"ok": float64(interactive.Expected)}
	backfill.Predicted = map[string]float64{"ok": 20 + 70*task3Duration.Seconds()}
	run := interactive
	if !backfill.Reliable {
		run = backfill
	}
	g.check(results.Check{
		Name: "fairness: the interactive client is served beside a backfill", MaxScore: 2,
		Message: fmt.Sprintf("the interactive client (10/s) got %d of %d served (%.1f%%) while a backfill sent 240/s and got %d; want ≥ %.0f%%: per-client buckets keep the backfill to 70/s, leaving room for everyone else",
			interactive.OK, interactive.Issued, 100*share, backfill.OK, 100*task3Fair),
		Measured: map[string]float64{"interactive_share": share, "backfill_ok": float64(backfill.OK)},
		Expected: map[string]float64{"interactive_share_min": task3Fair},
	}, interactive.Issued > 0 && share >= task3Fair && !math.IsNaN(share), run)
}
