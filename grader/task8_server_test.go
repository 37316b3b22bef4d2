package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"ratelab/harness"
	"ratelab/results"
)

// task8ServerReference is the reference's server floods in virtual time:
// four clients at 20/s for 10 s, 10 per 2 s, the bucket burst 2.
func task8ServerReference() ([]results.CountingServer, []*results.Run) {
	rec := func(counting, lim string, admitted, judged int64, span float64, maxRA int64) results.CountingServer {
		s := results.CountingServer{Limiter: lim, Run: "server, " + lim, Limit: 10, WindowMS: 2000, RatePerClient: 20, DurationS: 10,
			Limited429: judged, MaxRetryAfterS: maxRA}
		for i := range uint64(4) {
			bound, _ := serverBound(counting, span)
			s.Clients = append(s.Clients, results.CountingServerClient{
				Key: harness.ClientID(task8ServerPrefix, 4, i), Admitted: admitted, Limited: 200 - admitted, SpanS: span, Bound: bound})
		}
		return s
	}
	recs := []results.CountingServer{
		rec("fixed", results.LimiterFixed, 50, 600, 8.45, 2),
		rec("log", results.LimiterLog, 50, 600, 8.45, 2),
		rec("counter", results.LimiterCounter, 47, 612, 9.80, 2),
		rec("bucket", results.LimiterBucket, 51, 596, 9.80, 1),
	}
	var runs []*results.Run
	for _, s := range recs {
		runs = append(runs, &results.Run{Name: s.Run, Reliable: true, ServerFinal: results.ServerStats{Refusals: &results.Refusals{}}})
	}
	return recs, runs
}

// The server checks on the reference's figures pass, and each fails on
// the figures of a wrong limiter.
func TestTask8ServerChecks(t *testing.T) {
	all := []string{task8CheckServerBound, task8CheckServerRetryAfter}
	tests := []struct {
		name  string
		wrong func(recs []results.CountingServer, runs []*results.Run) []results.CountingServer
		fail  []string
	}{
		{"the reference", func(recs []results.CountingServer, _ []*results.Run) []results.CountingServer { return recs }, nil},
		// wrong/task8/bucket-rate-per-second: at 10 per second instead of
		// 10 per 2 s the bucket lets about twice its bound through.
		{"a bucket at twice its rate", func(recs []results.CountingServer, _ []*results.Run) []results.CountingServer {
			recs[3].Clients[0].Admitted = 100
			return recs
		}, []string{task8CheckServerBound}},
		// A log that counts per aligned window admits 60 in 8.45 s.
		{"a log over its bound", func(recs []results.CountingServer, _ []*results.Run) []results.CountingServer {
			recs[1].Clients[2].Admitted = 60
			return recs
		}, []string{task8CheckServerBound}},
		// A limiter that never refuses shows no bound at all.
		{"a client never refused", func(recs []results.CountingServer, _ []*results.Run) []results.CountingServer {
			recs[0].Clients[1].Limited = 0
			return recs
		}, []string{task8CheckServerBound}},
		// wrong/task8/fixed-wait-whole-window: the server finds waits past
		// the boundary.
		{"a wrong Retry-After", func(recs []results.CountingServer, runs []*results.Run) []results.CountingServer {
			recs[0].BadRetryAfter = 540
			runs[0].ServerFinal.Refusals.Bad = []results.BadRefusal{{Kind: results.RefusalLimited, Status: 429, Header: "2", WantMinS: 1, WantMaxS: 1,
				Why: "the fixed window said 2s, but the next window of 2s starts in 1.35s"}}
			return recs
		}, []string{task8CheckServerRetryAfter}},
		{"no 429 to judge", func(recs []results.CountingServer, _ []*results.Run) []results.CountingServer {
			recs[2].Limited429 = 0
			return recs
		}, []string{task8CheckServerRetryAfter}},
		{"a limiter not flooded", func(recs []results.CountingServer, _ []*results.Run) []results.CountingServer {
			return recs[:3]
		}, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, runs := task8ServerReference()
			recs = tt.wrong(recs, runs)
			for _, name := range all {
				chk := judged(t, 8, name, func(g *grading) { checkTask8Server(g, recs, runs[:len(recs)]) })
				assert.Equal(t, wantStatus(name, tt.fail), chk.Status, "%s: %s", name, chk.Message)
			}
		})
	}
}

// The hard bounds over a client's span, at the reference's spans.
func TestTask8ServerBound(t *testing.T) {
	for _, tt := range []struct {
		counting string
		span     float64
		want     float64
	}{
		{"fixed", 8.45, 60}, {"fixed", 1.99, 20}, {"log", 8.45, 50}, {"log", 0, 10},
		{"counter", 9.80, 60}, {"bucket", 9.80, 51}, {"bucket", 0, 2},
	} {
		got, _ := serverBound(tt.counting, tt.span)
		assert.Equal(t, tt.want, got, "serverBound(%q, %v)", tt.counting, tt.span)
	}
}

// The plays check passes the reference's figures and a bucket that decides
// one tie the other way, and fails a bucket that hoards tokens past its
// burst, one that refills too fast, and a play that lost requests.
func TestTask8PlayCheck(t *testing.T) {
	reference := func() ([]*results.BucketPlay, []int64) {
		return []*results.BucketPlay{
			{Name: "steady", Sent: 60, Admitted: 49, Refused: 11, Predicted: 49},
			{Name: "spikes", Sent: 60, Admitted: 20, Refused: 40, Predicted: 20},
		}, []int64{60, 60}
	}
	for _, tt := range []struct {
		name  string
		wrong func(p []*results.BucketPlay, scheduled []int64) []*results.BucketPlay
		pass  bool
	}{
		{"the reference", func(p []*results.BucketPlay, _ []int64) []*results.BucketPlay { return p }, true},
		{"a tie decided the other way", func(p []*results.BucketPlay, _ []int64) []*results.BucketPlay {
			p[0].Admitted, p[0].Refused = 50, 10
			return p
		}, true},
		// wrong/task8/bucket-no-cap: 24 tokens saved up over 6 s let the
		// second spike through in full.
		{"a bucket over its burst", func(p []*results.BucketPlay, _ []int64) []*results.BucketPlay {
			p[1].Admitted, p[1].Refused = 34, 26
			return p
		}, false},
		// wrong/task8/bucket-rate-per-second: refilling 40 a second
		// admits every steady request.
		{"a bucket refilling too fast", func(p []*results.BucketPlay, _ []int64) []*results.BucketPlay {
			p[0].Admitted, p[0].Refused = 60, 0
			return p
		}, false},
		{"a play that lost requests", func(p []*results.BucketPlay, scheduled []int64) []*results.BucketPlay {
			p[1].Sent, p[1].Refused = 50, 30
			return p
		}, false},
		{"a play not run", func(p []*results.BucketPlay, _ []int64) []*results.BucketPlay { return p[:1] }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plays, scheduled := reference()
			plays = tt.wrong(plays, scheduled)
			run := &results.Run{Name: "play spikes", Reliable: true}
			chk := judged(t, 8, task8CheckServerPlays, func(g *grading) { checkTask8Plays(g, plays, scheduled[:len(plays)], run) })
			want := results.StatusFail
			if tt.pass {
				want = results.StatusPass
			}
			assert.Equal(t, want, chk.Status, chk.Message)
		})
	}
}
