package grader

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/vnet"
	"ratelab/internal/vsession"
	"ratelab/results"
	"ratelab/solutions/bucket"
	"ratelab/solutions/shedding"
)

// virtualServe serves fresh fake GPUs with the reference's admission and
// limiter on n, inside the caller's synctest bubble.
func virtualServe(n *vnet.Network) harness.ServeFunc {
	return func(_ context.Context, cfg fakegpu.Config) (harness.Served, error) {
		srv, err := fakegpu.New(cfg, fakegpu.WithSettle(vsession.Settle()),
			fakegpu.WithAdmission(fakegpu.AdmissionFunc(shedding.Admit)),
			fakegpu.WithLimiter(bucket.NewKeyedLimiter(cfg.BucketRate, cfg.BucketBurst)))
		if err != nil {
			return harness.Served{}, err
		}
		l, err := n.Listen("127.0.0.1:8000")
		if err != nil {
			return harness.Served{}, err
		}
		hs := &http.Server{Handler: srv}
		go hs.Serve(l)
		return harness.Served{URL: "http://127.0.0.1:8000", Stats: harness.ServerStats(srv), Dial: n.DialContext,
			Close: func() { srv.Close(); hs.Close() }}, nil
	}
}

// The lesson's token-bucket play through the real HTTP path, in virtual
// time, with the reference bucket in front of the reference shedding:
// steady 6/s against a refill of 4/s admits burst + 4·D, and each spike
// of 30 against a burst of 10 admits exactly 10, although the spikes
// average 5/s, barely over the refill.
func TestLessonBucketPlays(t *testing.T) {
	plays := map[string]*results.BucketPlay{}
	for _, play := range harness.LessonPlays() {
		synctest.Test(t, func(t *testing.T) {
			var n vnet.Network
			p, run, err := harness.PlayBucket(context.Background(), play, harness.PlayConfig(), virtualServe(&n))
			require.NoError(t, err)
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
	assert.InDelta(t, harness.PlayBucketBurst+harness.PlayBucketRate*steady.DurationS, float64(steady.Admitted), 1, "steady: burst + 4·D, ± 1")
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
	serve := harness.InProcess(fakegpu.AdmissionFunc(shedding.Admit),
		func(rate, burst float64) fakegpu.Limiter { return bucket.NewKeyedLimiter(rate, burst) })
	p, run, err := harness.PlayBucket(context.Background(), harness.LessonPlays()[1], harness.PlayConfig(), serve)
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
	plays := []harness.Play{
		{Name: "ramp", Duration: 10 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternRamp, From: 1, To: 12}},
		{Name: "poisson", Rate: 6, Duration: 10 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternPoisson, Seed: 7}},
		{Name: "spikes", Duration: 10 * time.Second, Pattern: harness.Pattern{Kind: harness.PatternSpikes, Spike: 12, Every: 1500 * time.Millisecond}},
	}
	for _, play := range plays {
		t.Run(play.Name, func(t *testing.T) {
			var runs [2]*results.Run
			for i := range runs {
				synctest.Test(t, func(t *testing.T) {
					var n vnet.Network
					p, run, err := harness.PlayBucket(context.Background(), play, harness.PlayConfig(), virtualServe(&n))
					require.NoError(t, err)
					assert.Equal(t, p.Predicted, p.Admitted, "admitted, against the schedule replayed on the bucket")
					assert.Equal(t, run.Expected, p.Sent, "the server received the schedule")
					runs[i] = run
				})
			}
			assert.Equal(t, runs[0].Counts, runs[1].Counts, "a second run is identical")
			assert.Equal(t, runs[0].Histograms, runs[1].Histograms, "to the microsecond")
		})
	}
}
