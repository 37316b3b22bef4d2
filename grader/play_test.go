package grader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
	"ratelab/scenario"
	"ratelab/solutions/bucket"
	"ratelab/solutions/shedding"
)

// playConfig is the fake GPU of the lesson's plays: the default server in
// mode bucket with a bucket of scenario.PlayBucketRate and PlayBucketBurst.
func playConfig() fakegpu.Config {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = fakegpu.ModeBucket
	cfg.BucketRate, cfg.BucketBurst = scenario.PlayBucketRate, scenario.PlayBucketBurst
	return cfg
}

// playVirtual floods play, as the grader does (scenario.PlayOptions and
// PlayResult), at the reference's bucket in front of its shedding, in
// virtual time.
func playVirtual(t *testing.T, play scenario.Play) (*results.BucketPlay, *results.Run) {
	t.Helper()
	cfg := playConfig()
	run := virtualFloodWith(t, cfg, scenario.PlayOptions(play))
	p, err := scenario.PlayResult(play, cfg.BucketRate, cfg.BucketBurst, run)
	require.NoError(t, err)
	return p, run
}

// The lesson's token-bucket play through the real HTTP path, in virtual
// time, with the reference bucket in front of the reference shedding:
// steady 6/s against a refill of 4/s admits burst + 4·D, and each spike
// of 30 against a burst of 10 admits exactly 10, although the spikes
// average 5/s, barely over the refill.
func TestLessonBucketPlays(t *testing.T) {
	plays := map[string]*results.BucketPlay{}
	for _, play := range scenario.LessonPlays() {
		t.Run(play.Name, func(t *testing.T) {
			p, run := playVirtual(t, play)
			require.True(t, run.Reliable, "%s: %v", play.Name, run.Warnings)
			p.Clock = results.ClockVirtual
			plays[play.Name] = p
			t.Logf("%s: sent %d, admitted %d, refused %d, ok %d (predicted %d, bound %.2f); admitted per %gs %v, refused %v",
				p.Name, p.Sent, p.Admitted, p.Refused, p.OK, p.Predicted, p.Bound, p.BinS, p.AdmittedOverTime, p.RefusedOverTime)
			assert.Equal(t, p.Predicted, p.Admitted, "%s: admitted, against the schedule replayed on the bucket", play.Name)
			assert.Equal(t, p.Admitted, p.OK, "%s: every admitted request served in time", play.Name)
			assert.LessOrEqual(t, float64(p.Admitted), p.Bound, "%s: burst + rate × span", play.Name)
			assert.Equal(t, p.Sent, p.Admitted+p.Refused)
		})
	}
	steady, spikes := plays["steady"], plays["spikes"]
	require.NotNil(t, steady)
	require.NotNil(t, spikes)
	assert.Equal(t, int64(60), steady.Sent)
	assert.InDelta(t, scenario.PlayBucketBurst+scenario.PlayBucketRate*steady.DurationS, float64(steady.Admitted), 1, "steady: burst + 4·D, ± 1")
	assert.Equal(t, int64(49), steady.Admitted, "steady: 10 + 4 × (10 − 1/6) s, rounded down")
	assert.Equal(t, int64(60), spikes.Sent, "two spikes of 30")
	assert.Equal(t, int64(20), spikes.Admitted, "10 of each spike")
	assert.Equal(t, int64(40), spikes.Refused, "20 of each spike")
	assert.Equal(t, 5.0, spikes.OfferedRPS, "an average barely over the refill")
	// Each spike falls in one bin: 10 admitted, 20 refused there.
	var peaks []int64
	for i, a := range spikes.AdmittedOverTime {
		if a+spikes.RefusedOverTime[i] > 0 {
			assert.Equal(t, []int64{10, 20}, []int64{a, spikes.RefusedOverTime[i]}, "spikes: bin %d", i)
			peaks = append(peaks, a)
		}
	}
	assert.Len(t, peaks, 2, "two spikes")
}

// On the wall clock over loopback, the spike play admits the same 10 of
// each 30: a spike leaves within a few milliseconds even on a busy
// machine, in which the bucket refills a hundredth of a token.
func TestLessonSpikePlayOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for 12 s")
	}
	cfg, play := playConfig(), scenario.LessonPlays()[1]
	srv, err := fakegpu.New(cfg, fakegpu.WithAdmission(fakegpu.AdmissionFunc(shedding.Admit)),
		fakegpu.WithLimiter(bucket.NewKeyedLimiter(cfg.BucketRate, cfg.BucketBurst)))
	require.NoError(t, err)
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	opts := scenario.PlayOptions(play)
	opts.URL, opts.Stats = in.URL+"/generate", harness.ServerStats(srv)
	run, err := harness.Flood(context.Background(), opts)
	require.NoError(t, err)
	p, err := scenario.PlayResult(play, cfg.BucketRate, cfg.BucketBurst, run)
	require.NoError(t, err)
	t.Logf("spikes on loopback: sent %d, admitted %d, refused %d; send lag p99 %.2f ms", p.Sent, p.Admitted, p.Refused, run.SendLagP99MS)
	assert.Equal(t, int64(60), p.Sent)
	assert.Equal(t, int64(20), p.Admitted, "10 of each spike")
	assert.Equal(t, p.Predicted, p.Admitted)
}

// Every pattern keeps one order in virtual time: a ramp, a Poisson process
// and spikes against the play's bucket admit exactly what the schedule
// replayed on the bucket admits, and a second flood is identical to the
// microsecond.
func TestVirtualPatternsAreDeterministic(t *testing.T) {
	plays := []scenario.Play{
		{Name: "ramp", Duration: 10 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternRamp, From: 1, To: 12}},
		{Name: "poisson", Rate: 6, Duration: 10 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternPoisson, Seed: 7}},
		{Name: "spikes", Duration: 10 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternSpikes, Spike: 12, Every: 1500 * time.Millisecond}},
	}
	for _, play := range plays {
		t.Run(play.Name, func(t *testing.T) {
			var runs [2]*results.Run
			for i := range runs {
				p, run := playVirtual(t, play)
				assert.Equal(t, p.Predicted, p.Admitted, "admitted, against the schedule replayed on the bucket")
				assert.Equal(t, run.Expected, p.Sent, "the server received the schedule")
				runs[i] = run
			}
			assert.Equal(t, runs[0].Counts, runs[1].Counts, "a second run is identical")
			assert.Equal(t, runs[0].Histograms, runs[1].Histograms, "to the microsecond")
		})
	}
}
