// Package vsession runs fake GPU servers, and the floods against them, in
// virtual time: inside one testing/synctest bubble, over an in-memory
// network (internal/vnet), on behalf of a grader in another process.
//
// A session lives in the command that holds the code under grading
// (cmd/fakegpu, cmd/storm, ..., built with the same build tags as on the
// wall clock and the tag ratelab_vsession), which Run turns into a session
// when the grader starts it as one; a bubble needs a *testing.T, which Run
// gets from the testing package without making the binary a test. The
// grader writes one Request per line of JSON to the binary's standard input
// and reads one Reply per line from the file it handed over as descriptor 3;
// standard output and standard error stay free for whatever the graded code
// prints.
//
// The floods are harness.Flood itself, vegeta and the HDR recording
// included, with only the dialer changed: the same code path as on the wall
// clock. While a session waits for the grader's next request, virtual time
// stands still (the waiting goroutine is blocked on a channel from outside
// the bubble, which synctest does not count as durably blocked), so no reply
// depends on how long the grader took to ask. Every run comes back with
// Run.Clock set to results.ClockVirtual.
package vsession

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/redisenv"
	"ratelab/internal/vnet"
	"ratelab/model/ties"
	"ratelab/provider"
	"ratelab/results"
	"ratelab/scenario"
)

// EnvServe is the environment variable that makes a command's session
// build serve the grader that started it (Run); Run unsets it.
const EnvServe = "RATELAB_VSESSION"

// DrainCap bounds OpFinish's wait for the server to empty, in virtual time.
const DrainCap = 5 * time.Minute

// Addr is where a session's server listens on its in-memory network, and
// the host of every flood's URL.
const Addr = "127.0.0.1:8000"

// NewServer returns a fake GPU server configured as cfg, with the code under
// grading as its admission and limiter, and opts added (the session's
// settle hook, see fakegpu.WithSettle).
type NewServer func(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error)

// Host is what the command that serves a session brings to it: the
// graded code.
type Host struct {
	// NewServer makes the fake GPU servers.
	NewServer NewServer
	// NewRedisServer makes a fake GPU server in mode redis whose graded
	// limiter uses the client rdb; nil in a session without one.
	NewRedisServer func(cfg fakegpu.Config, rdb *redis.Client, opts ...fakegpu.Option) (*fakegpu.Server, error)
	// NewCall returns the graded retry loop configured as r, for OpStorm
	// and OpAmplify; nil in a session without one.
	NewCall func(r Retry) scenario.CallFunc
	// NewBreaker returns the graded circuit breaker configured as b, for
	// OpScenario; nil in a session without one.
	NewBreaker func(b Breaker) scenario.Breaker
	// NewPolite returns the graded polite client, for OpJudge, and Client
	// names its tree; nil in a session without one.
	NewPolite func(scenario.PoliteOptions) scenario.Creator
	Client    string
	// Stalled is called once the session has sent a stalled reply; nil
	// ends the process with status 3 (a stalled bubble cannot be stopped).
	Stalled func()
	// Counting is the graded set of limiters, for OpCounting, and
	// CountingTree names its tree; nil in a session without them.
	Counting     *scenario.CountingSet
	CountingTree string
}

// item is one decoded request, or why there is none.
type item struct {
	req Request
	err error
}

// Serve runs a session in t until the end of in: it reads each Request
// from in and writes its Reply to out, one JSON value per line. A
// malformed request ends the session with an error reply.
func Serve(t *testing.T, in io.Reader, out io.Writer, host Host) {
	// Made outside the bubble, so that waiting on it holds virtual time
	// still; read by a goroutine outside the bubble for the same reason.
	reqs := make(chan item)
	go func() {
		dec := json.NewDecoder(in)
		for {
			var r Request
			err := dec.Decode(&r)
			reqs <- item{r, err}
			if err != nil {
				return
			}
		}
	}()
	w := &replyWriter{enc: json.NewEncoder(out)}
	var p progress
	stalled := host.Stalled
	if stalled == nil {
		stalled = func() { os.Exit(3) }
	}
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go p.watch(stopWatch, StallLimit, func() {
		_ = w.write(Reply{Error: StallMessage, Stalled: true})
		stalled()
	})
	// OpCost runs here, outside the bubble, on the wall clock; the bubble
	// waits for it on channels from outside, so its clock stands still.
	costs, costed := make(chan CostRequest), make(chan Reply)
	defer close(costs)
	go func() {
		for req := range costs {
			c, err := measureCost(host, req)
			rep := Reply{Costs: c}
			if err != nil {
				rep.Error = fmt.Sprintf("cost: %v", err)
			}
			costed <- rep
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		s := &session{host: host}
		defer s.closeRedis()
		defer s.stop()
		beating := make(chan bool)
		defer close(beating)
		go p.beat(beating)
		for it := range reqs {
			if it.err != nil {
				if !errors.Is(it.err, io.EOF) {
					_ = w.write(Reply{Error: fmt.Sprintf("malformed request: %v", it.err)})
				}
				return
			}
			// Before the beat starts: beats every 10 ms over decades
			// would take hours.
			if d := time.Until(it.req.NotBefore); d > 0 {
				time.Sleep(d)
			}
			var rep Reply
			if it.req.Op == OpCost {
				if it.req.Cost == nil {
					rep.Error = "cost: nothing to measure"
				} else {
					costs <- *it.req.Cost
					rep = <-costed
				}
			} else {
				p.busy.Store(true)
				beating <- true
				rep = s.do(it.req)
				beating <- false
				p.busy.Store(false)
			}
			rep.Now = time.Now()
			if err := w.write(rep); err != nil {
				t.Errorf("vsession: write reply: %v", err)
				return
			}
		}
	})
}

// session is the state of one bubble: at most one server (or one set of
// workers) at a time, and a Redis once one is needed.
type session struct {
	host Host

	net     *vnet.Network
	ln      net.Listener
	srv     *fakegpu.Server   // the first worker
	srvs    []*fakegpu.Server // every worker
	hss     []*http.Server
	clients []*redis.Client // the workers' clients of mr

	mr  *miniredis.Miniredis // the session's Redis (redis.go)
	rdb *redis.Client        // the session's own client of mr
}

// do carries out one request.
func (s *session) do(r Request) Reply {
	fail := func(format string, args ...any) Reply { return Reply{Error: fmt.Sprintf(format, args...)} }
	switch r.Op {
	case OpStart:
		if s.srv != nil {
			return fail("start: a server is already running")
		}
		if r.Config == nil {
			return fail("start: no config")
		}
		if err := s.startWorkers(*r.Config, r.Workers); err != nil {
			return fail("start: %v", err)
		}
		return Reply{}
	case OpFlood:
		if s.srv == nil {
			return fail("flood: no server")
		}
		runs, keys, err := s.flood(r.Floods, r.ScanEvery)
		rep := Reply{Runs: runs, Keys: keys}
		if err != nil {
			rep.Error = fmt.Sprintf("flood: %v", err)
		}
		return rep
	case OpFinish:
		if s.srv == nil {
			return fail("finish: no server")
		}
		final, each := s.finish()
		return Reply{Final: &final, Workers: each}
	case OpBurst:
		if s.srv == nil || r.Burst == nil {
			return fail("burst: no server, or no burst")
		}
		o := *r.Burst
		o.URL, o.Dial = "http://"+Addr+"/generate", s.net.DialContext
		if err := harness.Burst(context.Background(), o); err != nil {
			return fail("burst: %v", err)
		}
		return Reply{}
	case OpFlush:
		if err := s.flushRedis(); err != nil {
			return fail("flush: %v", err)
		}
		return Reply{}
	case OpKeyspace:
		time.Sleep(r.Wait)
		keys, err := s.keyspace()
		if err != nil {
			return fail("keyspace: %v", err)
		}
		return Reply{Keys: keys}
	case OpStorm, OpAmplify:
		if s.srv == nil || len(s.srvs) > 1 {
			return fail("%s: no server, or several", r.Op)
		}
		if s.host.NewCall == nil || r.Retry == nil {
			return fail("%s: no retry loop in this session, or no settings for it", r.Op)
		}
		st, err := s.storm(r)
		rep := Reply{Storm: st}
		if err != nil {
			rep.Error = fmt.Sprintf("%s: %v", r.Op, err)
		}
		return rep
	case OpScenario:
		if r.Scenario == nil {
			return fail("scenario: no scenario")
		}
		if r.Breaker != nil && s.host.NewBreaker == nil {
			return fail("scenario: no breaker in this session")
		}
		sc, err := s.scenario(*r.Scenario, r.Breaker)
		rep := Reply{Scenario: sc}
		if err != nil {
			rep.Error = fmt.Sprintf("scenario: %v", err)
		}
		return rep
	case OpJudge:
		if r.Judge == nil || r.API == nil {
			return fail("judge: no judge or no API")
		}
		if s.host.NewPolite == nil {
			return fail("judge: no polite client in this session")
		}
		rep, err := s.judge(*r.Judge, *r.API)
		out := Reply{Judge: rep}
		if err != nil {
			out.Error = fmt.Sprintf("judge: %v", err)
		}
		return out
	case OpCounting:
		if r.Counting == nil || s.host.Counting == nil {
			return fail("counting: no measurements, or no limiters in this session")
		}
		c, err := scenario.MeasureCounting(context.Background(), *s.host.Counting, *r.Counting)
		if c != nil {
			c.Tree, c.Clock = s.host.CountingTree, results.ClockVirtual
		}
		out := Reply{Counting: c}
		if err != nil {
			out.Error = fmt.Sprintf("counting: %v", err)
		}
		return out
	case OpStop:
		s.stop()
		return Reply{}
	}
	return fail("unknown op %q", r.Op)
}

// flood runs every flood of opts at once and returns their runs (nil where
// one could not start), every key read of the session's Redis every
// scanEvery while they ran (none if 0), and the first error. With several
// workers each run's server figures are their sum, and Run.Workers holds
// each one's at the end.
func (s *session) flood(opts []harness.Options, scanEvery time.Duration) ([]*results.Run, []redisenv.KeyTTL, error) {
	var keys []redisenv.KeyTTL
	var scanErr error
	stopScan, scanned := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(scanned)
		if scanEvery <= 0 {
			return
		}
		tick := time.NewTicker(scanEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopScan:
				return
			case <-tick.C:
			}
			k, err := s.keyspace()
			if err != nil && scanErr == nil {
				scanErr = fmt.Errorf("read Redis during the flood: %w", err)
			}
			keys = append(keys, k...)
		}
	}()
	runs := make([]*results.Run, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		o.URL = "http://" + Addr + "/generate"
		o.Dial = s.net.DialContext
		o.Progress = nil
		o.Stats = nil
		if i == 0 { // one sampler is enough
			o.Stats = harness.ServerStats(s.srv)
			if len(s.srvs) > 1 {
				o.Stats = func(context.Context) (results.ServerStats, error) {
					sum, _ := s.stats()
					return sum, nil
				}
			}
		}
		wg.Go(func() {
			time.Sleep(ties.Schedule(i)) // ties between floods as the simulation breaks them
			runs[i], errs[i] = harness.Flood(context.Background(), o)
			if runs[i] != nil {
				runs[i].Clock = results.ClockVirtual
			}
		})
	}
	wg.Wait()
	close(stopScan)
	<-scanned
	if _, each := s.stats(); each != nil {
		for _, run := range runs {
			if run != nil {
				run.Workers = each
			}
		}
	}
	return runs, keys, errors.Join(append(errs, scanErr)...)
}

// storm runs r's storm or amplifier against the server.
func (s *session) storm(r Request) (*results.Storm, error) {
	call := s.host.NewCall(*r.Retry)
	base := "http://" + Addr
	var st *results.Storm
	var err error
	if r.Op == OpStorm {
		if r.Storm == nil {
			return nil, errors.New("no storm")
		}
		o := *r.Storm
		o.BaseURL, o.Call, o.Dial = base, call, s.net.DialContext
		st, err = scenario.Storm(context.Background(), o)
	} else {
		if r.Amplify == nil {
			return nil, errors.New("no amplifier")
		}
		o := *r.Amplify
		o.BaseURL, o.Call, o.Dial, o.Stats = base, call, s.net.DialContext, harness.ServerStats(s.srv)
		st, err = scenario.Amplify(context.Background(), o)
	}
	if st != nil {
		rt := *r.Retry
		st.Clock = results.ClockVirtual
		st.Jitter, st.HonorRetryAfter, st.Budget, st.MaxTries = rt.Jitter, rt.HonorRetryAfter, rt.Budget, rt.Tries
		st.BaseMS, st.CapMS = float64(rt.Base)/float64(time.Millisecond), float64(rt.Cap)/float64(time.Millisecond)
	}
	return st, err
}

// scenario runs o on a fresh in-memory network, with the graded breaker
// configured as b (none if nil).
func (s *session) scenario(o scenario.Dependency, b *Breaker) (*results.Scenario, error) {
	n := &vnet.Network{}
	o.Listen = func(address string) (net.Listener, error) { return n.Listen(address) }
	o.Dial = n.DialContext
	o.Breaker = nil
	if b != nil {
		o.Breaker = s.host.NewBreaker(*b)
	}
	sc, err := scenario.RunDependency(context.Background(), o)
	if sc != nil && sc.Run != nil {
		sc.Run.Clock = results.ClockVirtual
	}
	return sc, err
}

// apiAddr is where OpJudge's fake API listens on its in-memory network:
// a port nothing listens on for real, so a client that ignores the
// HTTPClient it was given is refused at once, not sent elsewhere.
const apiAddr = "127.0.0.1:1"

// judge runs o against a fresh fake API configured as api.
func (s *session) judge(o scenario.JudgeOptions, api provider.Config) (*results.JudgeReport, error) {
	srv, err := provider.New(api)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	n := &vnet.Network{}
	l, err := n.Listen(apiAddr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()
	o.URL, o.InProcess, o.Dial = "http://"+apiAddr, true, n.DialContext
	o.NewPolite, o.Client, o.Log = s.host.NewPolite, s.host.Client, nil
	rep, err := scenario.Judge(context.Background(), o)
	if rep != nil {
		rep.Clock = results.ClockVirtual
	}
	return rep, err
}

// finish waits until the server holds no request, or DrainCap, and reads
// its detailed stats; with several workers, the sum of their counters and
// each one's.
func (s *session) finish() (results.ServerStats, []results.ServerStats) {
	for deadline := time.Now().Add(DrainCap); time.Now().Before(deadline); {
		st, _ := s.stats()
		if st.Waiting == 0 && st.InFlight == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(s.srvs) > 1 {
		return s.stats()
	}
	return s.srv.StatsDetail(), nil
}

// stop closes the server or workers, and their Redis clients.
func (s *session) stop() {
	if s.srv == nil {
		return
	}
	for _, srv := range s.srvs {
		srv.Close()
	}
	for _, hs := range s.hss {
		_ = hs.Close()
	}
	_ = s.ln.Close()
	s.closeClients()
	s.net, s.ln, s.srv, s.srvs, s.hss = nil, nil, nil, nil, nil
}

// Settle returns a settle hook for fakegpu.WithSettle in a synctest
// bubble: synctest.Wait, one caller at a time (synctest.Wait allows no more
// than one), waiting on a channel, on which a bubble's goroutines block
// durably.
func Settle() func() {
	sem := make(chan struct{}, 1)
	return func() {
		sem <- struct{}{}
		synctest.Wait()
		<-sem
	}
}
