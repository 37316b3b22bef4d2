package vsession

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
	"ratelab/scenario"
)

// unprotected is a NewServer for the unprotected server only, which needs
// no graded code: this package's tests must build in a learner's template,
// which has no solutions/. The grader's own tests flood the references.
func unprotected(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode != fakegpu.ModeNone {
		return nil, fmt.Errorf("mode %s needs graded code", cfg.Mode)
	}
	return fakegpu.New(cfg, opts...)
}

// converse runs a session over pipes, sends reqs one at a time (each after
// the reply to the one before) and returns the replies.
func converse(t *testing.T, reqs ...Request) []Reply {
	t.Helper()
	return converseWith(t, Host{NewServer: unprotected}, reqs...)
}

// converseWith is converse with a session serving host.
func converseWith(t *testing.T, host Host, reqs ...Request) []Reply {
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
	Serve(t, inR, outW, host)
	_ = inR.Close() // a session that ended early fails the writes still to come
	_ = outW.Close()
	return <-replies
}

// A session floods in virtual time with harness.Flood itself: the lesson's
// collapse figure exactly, twice over, with a fresh server each time, and
// the clock moved to the instant asked for.
func TestSessionFloodsInVirtualTime(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	flood := []harness.Options{{Name: "120/s", Rate: 120, Duration: 10 * time.Second, Timeout: time.Second}}
	now := time.Now()
	start := time.Now()
	reps := converse(t,
		Request{Op: OpStart, Config: &cfg, NotBefore: now},
		Request{Op: OpFlood, Floods: flood},
		Request{Op: OpFinish},
		Request{Op: OpStop},
		Request{Op: OpStart, Config: &cfg},
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
		assert.Equal(t, int64(216), run.OK, "the lesson's collapse at 120/s, exactly")
		assert.Equal(t, results.ClockVirtual, run.Clock)
		assert.True(t, run.IsVirtual())
	}
	assert.Equal(t, reps[1].Runs[0].Counts, reps[5].Runs[0].Counts, "the same every time")
	require.NotNil(t, reps[2].Final)
	assert.Equal(t, reps[1].Runs[0].Counts[results.OutcomeTimeout], reps[2].Final.Dead, "every request that timed out was worked on anyway: the server's own count")
	assert.Zero(t, reps[2].Final.Waiting)
	assert.False(t, reps[0].Now.Before(now), "the bubble's clock was moved to the real time: %s", reps[0].Now)
	// 1,200 requests at 80 a second: 15 s until the line has drained.
	assert.Equal(t, 15*time.Second, reps[5].Now.Sub(reps[4].Now).Truncate(time.Second), "a flood takes its virtual 10 s, and the drain after it")
	t.Logf("two 10 s floods in %s of real time", time.Since(start).Round(time.Millisecond))
}

// Requests out of order, or not understood, get an error reply and leave
// the session usable.
func TestSessionRefusesWhatItCannotDo(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	shed := cfg
	shed.Mode = fakegpu.ModeShed
	bad := cfg
	bad.Slots = 0
	reps := converse(t,
		Request{Op: OpFlood},
		Request{Op: OpFinish},
		Request{Op: "dance"},
		Request{Op: OpStart},
		Request{Op: OpStart, Config: &bad},
		Request{Op: OpStart, Config: &shed},
		Request{Op: OpStart, Config: &cfg},
		Request{Op: OpStart, Config: &cfg},
		Request{Op: OpFlood, Floods: []harness.Options{{Rate: -1, Duration: time.Second}}},
		Request{Op: OpStop},
	)
	require.Len(t, reps, 10)
	for i, want := range []string{"flood: no server", "finish: no server", `unknown op "dance"`, "start: no config", "start: fakegpu", "start: mode shed needs graded code", "", "start: a server is already running", "flood: ", ""} {
		if want == "" {
			assert.Empty(t, reps[i].Error, "reply %d", i)
			continue
		}
		assert.Contains(t, reps[i].Error, want, "reply %d", i)
	}
}

// The watchdog gives up on a request only while the bubble's clock stands
// still: not between requests, and not while the clock moves, however
// long the request takes in real time.
func TestWatchdogSeesAStillClock(t *testing.T) {
	const limit = 200 * time.Millisecond
	run := func(busy, moving bool) bool {
		var p progress
		p.busy.Store(busy)
		stop := make(chan struct{})
		defer close(stop)
		if moving {
			go func() {
				for i := int64(1); ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(limit / 10):
						p.now.Store(i)
					}
				}
			}()
		}
		stalled := make(chan struct{}, 1)
		go p.watch(stop, limit, func() { stalled <- struct{}{} })
		select {
		case <-stalled:
			return true
		case <-time.After(5 * limit):
			return false
		}
	}
	assert.True(t, run(true, false), "a request with a still clock")
	assert.False(t, run(false, false), "no request: the clock waits for the grader")
	assert.False(t, run(true, true), "a request with a moving clock")
}

// TestRunHidesTheTest builds a session the grader's way (go build, the
// command's init calling Run) and starts a server in it whose constructor
// refuses if the program shows testing.Testing(), a -test. argument or a
// test flag. It also fails if a Go release changes testing.MainStart,
// which Run relies on, before a learner's grading does.
func TestRunHidesTheTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	bin := filepath.Join(t.TempDir(), "session")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/session").CombinedOutput()
	require.NoError(t, err, "%s", out)

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), EnvServe+"=1")
	cmd.ExtraFiles = []*os.File{w}
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w.Close()

	enc, dec := json.NewEncoder(stdin), json.NewDecoder(r)
	cfg := fakegpu.Config{Mode: fakegpu.ModeNone, Slots: 8, Work: 100 * time.Millisecond}
	require.NoError(t, enc.Encode(Request{Op: OpStart, Config: &cfg}))
	var rep Reply
	require.NoError(t, dec.Decode(&rep))
	assert.Empty(t, rep.Error, "the graded code could tell it was tested")
	require.NoError(t, enc.Encode(Request{Op: OpStop}))
	require.NoError(t, dec.Decode(&rep))
	stdin.Close()
	require.NoError(t, cmd.Wait(), "%s", output.String())

	// Started without the variable, the same binary is the command.
	out, err = exec.Command(bin).CombinedOutput()
	require.NoError(t, err)
	assert.Equal(t, "not a session\n", string(out))
}

// burner is a breaker that spends wall-clock time per call without ever
// waiting: in virtual time it would cost nothing.
type burner struct{ per time.Duration }

func (b burner) Allow() (func(bool), error) {
	for start := time.Now(); time.Since(start) < b.per; {
	}
	return func(bool) {}, nil
}

// OpCost measures on the wall clock, outside the bubble, and the bubble's
// clock does not move meanwhile: a breaker that burns 1 ms per call costs
// at least that, the unprotected server's path and a free breaker far
// less.
func TestCostIsMeasuredOnTheWallClock(t *testing.T) {
	cfg := fakegpu.DefaultConfig()
	for _, tt := range []struct {
		per         time.Duration
		least, most time.Duration
	}{
		{0, 0, 100 * time.Microsecond},
		{time.Millisecond, time.Millisecond, time.Second},
	} {
		host := Host{NewServer: unprotected, NewBreaker: func(Breaker) scenario.Breaker { return burner{tt.per} }}
		reps := converseWith(t, host,
			Request{Op: OpStop},
			Request{Op: OpCost, Cost: &CostRequest{Server: &cfg, Keys: 10, Breaker: &Breaker{}}},
			Request{Op: OpCost},
		)
		require.Len(t, reps, 3)
		require.Empty(t, reps[1].Error)
		require.Len(t, reps[1].Costs, 2)
		server, breaker := reps[1].Costs[0], reps[1].Costs[1]
		assert.Equal(t, "server none", server.Name)
		assert.Positive(t, server.PerCall)
		assert.Less(t, server.PerCall, time.Millisecond, "the unprotected server's own path")
		assert.Equal(t, "breaker", breaker.Name)
		assert.GreaterOrEqual(t, breaker.PerCall, tt.least)
		assert.Less(t, breaker.PerCall, tt.most)
		assert.Positive(t, breaker.Calls)
		assert.Equal(t, reps[0].Now, reps[1].Now, "the bubble's clock stood still")
		assert.Contains(t, reps[2].Error, "nothing to measure")
		t.Logf("server %s per request, breaker %s per call (%d calls)", server.PerCall, breaker.PerCall, breaker.Calls)
	}
}
