package vsession

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
	"ratelab/solutions/bucket"
	"ratelab/solutions/shedding"
)

// reference is a NewServer with the references of tasks 2 and 3.
func reference(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode != fakegpu.ModeNone {
		opts = append(opts, fakegpu.WithAdmission(fakegpu.AdmissionFunc(shedding.Admit)))
	}
	if cfg.Mode == fakegpu.ModeBucket {
		opts = append(opts, fakegpu.WithLimiter(bucket.NewKeyedLimiter(cfg.BucketRate, cfg.BucketBurst)))
	}
	return fakegpu.New(cfg, opts...)
}

// converse runs a session over pipes, sends reqs one at a time (each after
// the reply to the one before) and returns the replies.
func converse(t *testing.T, reqs ...Request) []Reply {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	replies := make(chan []Reply, 1)
	go func() {
		var got []Reply
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		enc := json.NewEncoder(inW)
		for _, r := range reqs {
			if err := enc.Encode(r); err != nil {
				break
			}
			if !sc.Scan() {
				break
			}
			var rep Reply
			if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
				rep.Error = "undecodable reply: " + err.Error()
			}
			got = append(got, rep)
		}
		_ = inW.Close() // the end of the session
		replies <- got
		_, _ = io.Copy(io.Discard, outR)
	}()
	Serve(t, inR, outW, reference)
	_ = inR.Close() // a session that ended early fails the writes still to come
	_ = outW.Close()
	return <-replies
}

// A session floods in virtual time with harness.Flood itself: the lesson's
// shedding figure exactly, twice over, with a fresh server each time.
func TestSessionFloodsInVirtualTime(t *testing.T) {
	shed := fakegpu.DefaultConfig()
	shed.Mode = fakegpu.ModeShed
	flood := []harness.Options{{Name: "shed 240/s", Rate: 240, Duration: 10 * time.Second, Timeout: time.Second}}
	start := time.Now()
	reps := converse(t,
		Request{Op: OpStart, Config: &shed},
		Request{Op: OpFlood, Floods: flood},
		Request{Op: OpFinish},
		Request{Op: OpStop},
		Request{Op: OpStart, Config: &shed},
		Request{Op: OpFlood, Floods: flood},
		Request{Op: OpStop},
	)
	require.Len(t, reps, 7)
	for i, rep := range reps {
		require.Empty(t, rep.Error, "reply %d", i)
	}
	for _, i := range []int{1, 5} {
		require.Len(t, reps[i].Runs, 1)
		run := reps[i].Runs[0]
		assert.Equal(t, int64(816), run.OK, "the lesson's figure, exactly: 8 slots for 10 s and the 16 let in at the end")
		assert.Equal(t, results.ClockVirtual, run.Clock)
		assert.True(t, run.IsVirtual())
	}
	assert.Equal(t, reps[1].Runs[0].Counts, reps[5].Runs[0].Counts, "the same every time")
	require.NotNil(t, reps[2].Final)
	assert.Equal(t, reps[1].Runs[0].Counts[results.OutcomeUnavailable], reps[2].Final.Shed, "the server's own count of 503s")
	assert.Zero(t, reps[2].Final.Waiting)
	assert.GreaterOrEqual(t, reps[2].VirtualS, 10.0, "virtual time passed")
	t.Logf("two 10 s floods in %s of real time", time.Since(start).Round(time.Millisecond))
}

// Requests out of order, or not understood, get an error reply and leave
// the session usable.
func TestSessionRefusesWhatItCannotDo(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	bad := cfg
	bad.Slots = 0
	reps := converse(t,
		Request{Op: OpFlood},
		Request{Op: OpFinish},
		Request{Op: "dance"},
		Request{Op: OpStart},
		Request{Op: OpStart, Config: &bad},
		Request{Op: OpStart, Config: &cfg},
		Request{Op: OpStart, Config: &cfg},
		Request{Op: OpFlood, Floods: []harness.Options{{Rate: -1, Duration: time.Second}}},
		Request{Op: OpStop},
	)
	require.Len(t, reps, 9)
	for i, want := range []string{"flood: no server", "finish: no server", `unknown op "dance"`, "start: no config", "start: fakegpu", "", "start: a server is already running", "flood: ", ""} {
		if want == "" {
			assert.Empty(t, reps[i].Error, "reply %d", i)
			continue
		}
		assert.Contains(t, reps[i].Error, want, "reply %d", i)
	}
}
