package scenario

import (
	"fmt"
	"net/http"
	"time"

	"ratelab/harness"
	"ratelab/model"
	"ratelab/results"
)

// The lesson's token-bucket play: a client's bucket refills PlayBucketRate
// tokens per second and holds at most PlayBucketBurst.
const (
	PlayBucketRate  = 4.0
	PlayBucketBurst = 10.0
)

// Play is one client's traffic in the lesson's token-bucket play.
type Play struct {
	// Name names the play in results, such as "steady".
	Name string
	// Rate, Duration and Pattern are the client's flood (Options).
	Rate     float64
	Duration time.Duration
	Pattern  harness.Pattern
}

// LessonPlays returns the lesson's two plays against a bucket of
// PlayBucketRate and PlayBucketBurst:
//
//   - steady: 6 per second for 10 s against a refill of 4. The bucket
//     admits its burst and then the refill, burst + 4 × 9.83 s = 49 of 60
//     (the first request comes at 1/6 s).
//   - spikes: 30 at once every 6 s for 12 s, an average of 5 per second,
//     barely over the refill. Each spike's 30 leave 10 µs apart, within
//     0.29 ms, in which the bucket refills 0.00116 of a token: exactly 10
//     of each spike are admitted, 20 refused, and 6 s later the bucket is
//     full again (24 tokens' worth, capped at 10). 20 of 60 in all.
func LessonPlays() []Play {
	return []Play{
		{Name: "steady", Rate: 6, Duration: 10 * time.Second},
		{Name: "spikes", Duration: 12 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternSpikes, Spike: 30, Every: 6 * time.Second}},
	}
}

// PlayOptions returns the flood of play: one client, "play", sending as
// the play says. The URL, Stats and Dial are the caller's to set.
func PlayOptions(play Play) harness.Options {
	return harness.Options{
		Name: "play " + play.Name, Rate: play.Rate, Duration: play.Duration, Pattern: play.Pattern,
		Timeout: harness.DefaultTimeout, Header: http.Header{"X-Client-Id": {"play"}},
	}
}

// PlayResult is what run, the flood of play (PlayOptions) against a server
// whose client bucket refills rate tokens per second and holds burst, says
// of the bucket: its decisions as the server counted them, beside the
// schedule replayed against the bucket (model.BucketAdmits).
func PlayResult(play Play, rate, burst float64, run *results.Run) (*results.BucketPlay, error) {
	opts := PlayOptions(play)
	sched, err := harness.NewSchedule(opts.Pattern, opts.Rate, opts.Duration)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", harness.ErrBadOptions, err)
	}
	due := make([]time.Duration, sched.Count())
	for i := range due {
		due[i] = sched.Due(uint64(i))
	}
	final := run.ServerFinal
	p := &results.BucketPlay{
		Name: play.Name, Clock: run.Clock, Pattern: run.Pattern, OfferedRPS: run.OfferedRPS, DurationS: run.DurationS,
		BucketRate: rate, BucketBurst: burst,
		Sent: final.Received, Admitted: final.Received - final.Limited, Refused: final.Limited, OK: run.OK,
		Predicted: int64(model.BucketAdmits(due, rate, burst)),
		Bound:     burst + rate*(due[len(due)-1]-due[0]).Seconds(),
		BinS:      run.TimelineBinMS / 1000,
	}
	bins := len(run.Timeline[results.OutcomeOK])
	p.AdmittedOverTime, p.RefusedOverTime = make([]int64, bins), make([]int64, bins)
	for o, counts := range run.Timeline {
		for i, n := range counts {
			if o == results.OutcomeTooMany {
				p.RefusedOverTime[i] += n
			} else {
				p.AdmittedOverTime[i] += n
			}
		}
	}
	return p, nil
}
