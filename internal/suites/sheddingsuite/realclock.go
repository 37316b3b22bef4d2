package sheddingsuite

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"ratelab/fakegpu"
	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// RealClock runs the main promises once more outside any bubble: on the
// real clock, over real HTTP on a loopback port, with real client
// addresses. Code that behaves only in the tests' fake time, or only for
// httptest's requests, fails here. Every wait it relies on is long next to
// what it measures (work of tens of seconds that never finishes, or a
// deadline of a millisecond against a wait of 300 ms), so a busy machine
// can only make the margins wider.
func testRealClock(t *testing.T, impl Impl) {
	rng := suitekit.Rand(t)
	realShed(t, impl, rng)
	realLimited(t, impl, rng)
	realDeadline(t, impl, rng)
}

// realShed fills the slots with work that outlasts the test and the line up
// to MaxWaiting, then checks that newcomers get 503 at once with the line's
// drain time, and that a client that hangs up leaves the line.
func realShed(t *testing.T, impl Impl, rng *rand.Rand) {
	cfg := config(fakegpu.ModeShed, 1+rng.IntN(3), 20*time.Second+time.Duration(rng.Int64N(int64(40*time.Second))),
		1+rng.IntN(4), 0)
	s := newRealServer(t, impl, cfg, nil)
	defer s.close()
	var holders []*realCall
	for i := range cfg.Slots {
		holders = append(holders, s.send(fmt.Sprintf("request %d", i+1), ""))
	}
	s.waitFor(fmt.Sprintf("the first %d requests to take the %d slots", cfg.Slots, cfg.Slots),
		func() bool { return s.srv.Stats().InFlight == int64(cfg.Slots) })
	for i := range cfg.MaxWaiting {
		holders = append(holders, s.send(fmt.Sprintf("request %d", cfg.Slots+i+1), ""))
		s.waitFor(fmt.Sprintf("request %d to join the line (%d slots busy, %d waiting)", cfg.Slots+i+1, cfg.Slots, i),
			func() bool { return s.srv.Stats().Waiting == int64(i+1) })
	}
	lo, hi := drainRange(cfg.MaxWaiting, cfg)
	extra := 1 + rng.IntN(3)
	for i := range extra {
		c := s.send(fmt.Sprintf("newcomer %d", i+1), "")
		resp, body := s.result(c, 3*time.Second)
		if resp == nil {
			t.Fatalf("%s, with %d waiting (MaxWaiting %d) on the real clock: no answer after 3 s; want 503 at once",
				c.name, cfg.MaxWaiting, cfg.MaxWaiting)
		}
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s, with %d waiting (MaxWaiting %d) on the real clock: status %d; want 503", c.name, cfg.MaxWaiting, cfg.MaxWaiting, resp.StatusCode)
		}
		if p := refusalFormat(resp, body); p != "" {
			t.Errorf("%s: %s", c.name, p)
		}
		got, err := retryAfter(resp)
		if err != nil || got < ceilSeconds(lo) || got > ceilSeconds(hi) {
			t.Errorf("%s: Retry-After %d (%v); want %d: %d waiting on %d slots of %v drain in %v, rounded up",
				c.name, got, err, ceilSeconds(lo), cfg.MaxWaiting, cfg.Slots, cfg.Work, lo)
		}
	}
	st := s.srv.Stats()
	wantStat(t, "Shed", st.Shed, int64(extra), "a full line means 503 before the line")
	wantStat(t, "Expired", st.Expired, 0, "")
	wantStat(t, "MaxWaiting", st.MaxWaiting, int64(cfg.MaxWaiting), "")

	leaver := holders[len(holders)-1]
	leaver.cancel()
	s.waitFor(fmt.Sprintf("%s, whose client hung up, to leave the line", leaver.name),
		func() bool {
			st := s.srv.Stats()
			return st.Waiting == int64(cfg.MaxWaiting-1) && st.Shed == int64(extra+1)
		})
}

// realLimited checks the 429s of a limiter that refuses some clients with
// random waits, and that every request asks the limiter once under its own
// key.
func realLimited(t *testing.T, impl Impl, rng *rand.Rand) {
	cfg := config(fakegpu.ModeBucket, 2, time.Millisecond, 8, 0)
	waits := map[string]time.Duration{}
	pick := []func() time.Duration{
		func() time.Duration { return time.Duration(1 + rng.Int64N(int64(time.Second))) },
		func() time.Duration {
			return time.Duration(1+rng.Int64N(600))*time.Second + time.Duration(rng.Int64N(3)-1)
		},
		func() time.Duration { return time.Duration(rng.Int64N(int64(lab.InfDuration))) },
		func() time.Duration { return -time.Duration(rng.Int64N(int64(time.Minute))) },
	}
	for i := range 6 {
		waits[fmt.Sprintf("c%x-%d", rng.Uint32(), i)] = pick[i%len(pick)]()
	}
	lim := &scriptedLimiter{answer: func(key string) (bool, time.Duration) {
		w, refused := waits[key]
		return !refused, w
	}}
	s := newRealServer(t, impl, cfg, lim)
	defer s.close()
	var wantKeys []string
	for key, w := range waits {
		c := s.send("refused client "+key, key)
		resp, body := s.result(c, 3*time.Second)
		wantKeys = append(wantKeys, key)
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s, refused by the limiter with wait %v: %s; want 429 at once", c.name, w, describe(resp))
			continue
		}
		if p := refusalFormat(resp, body); p != "" {
			t.Errorf("%s: %s", c.name, p)
		}
		if got, err := retryAfter(resp); err != nil || got != ceilSeconds(w) {
			t.Errorf("%s: Retry-After %d (%v); want %d (the limiter's wait %v in whole seconds, rounded up, at least 1)",
				c.name, got, err, ceilSeconds(w), w)
		}
	}
	host, _, _ := net.SplitHostPort(s.addr)
	for _, key := range []string{fmt.Sprintf("ok%x", rng.Uint32()), ""} {
		c := s.send(fmt.Sprintf("allowed client %q", key), key)
		resp, _ := s.result(c, 3*time.Second)
		if resp == nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s, allowed by the limiter on an idle server: %s; want 200", c.name, describe(resp))
		}
		if key == "" {
			key = host
		}
		wantKeys = append(wantKeys, key)
	}
	var want []take
	for _, k := range wantKeys {
		want = append(want, take{k, 1})
	}
	if got := lim.calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("TryTake calls = %v; want %v (one token per request, keyed by job.ClientKey(): X-Client-Id, else the client's IP)", got, want)
	}
	wantStat(t, "Limited", s.srv.Stats().Limited, int64(len(waits)), "")
}

// realDeadline sends two requests to a one-slot server twice: with a
// deadline of about a millisecond the second, which waits for the first's
// 300 ms of work, must expire when it reaches the front; with a deadline of
// an hour it must be served.
func realDeadline(t *testing.T, impl Impl, rng *rand.Rand) {
	for _, deadline := range []time.Duration{time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond))), time.Hour} {
		func() {
			cfg := config(fakegpu.ModeShed, 1, 300*time.Millisecond, 4, deadline)
			s := newRealServer(t, impl, cfg, nil)
			defer s.close()
			first := s.send("the first request", "")
			s.waitFor("the first request to take the slot", func() bool { return s.srv.Stats().InFlight == 1 })
			second := s.send("the second request", "")
			sent := time.Now()
			resp, body := s.result(second, 3*time.Second)
			waited := time.Since(sent)
			if r, _ := s.result(first, 3*time.Second); r == nil || r.StatusCode != http.StatusOK {
				t.Errorf("%s, Deadline %v, on an idle server: %s; want 200", first.name, deadline, describe(r))
			}
			switch {
			case resp == nil:
				t.Errorf("%s, Deadline %v: no answer after 3 s", second.name, deadline)
			case deadline == time.Hour && resp.StatusCode != http.StatusOK:
				t.Errorf("%s waited %v with Deadline %v: %s; want 200", second.name, waited, deadline, describe(resp))
			case deadline < time.Hour && resp.StatusCode != http.StatusServiceUnavailable:
				t.Errorf("%s waited about %v for the slot with Deadline %v: %s; want 503 once it reaches the front",
					second.name, waited, deadline, describe(resp))
			case deadline < time.Hour:
				if waited < cfg.Work/2 {
					t.Errorf("%s: 503 after %v; want it when it reaches the front, after the first request's %v of work",
						second.name, waited, cfg.Work)
				}
				if p := refusalFormat(resp, body); p != "" {
					t.Errorf("%s: %s", second.name, p)
				}
				if got, err := retryAfter(resp); err != nil || got != 1 {
					t.Errorf("%s, expired with nobody left waiting: Retry-After %d (%v); want 1 (the drain time of an empty line, at least 1)",
						second.name, got, err)
				}
				st := s.srv.Stats()
				wantStat(t, "Expired", st.Expired, 1, "a request that waited past Deadline gets 503 once it holds the slot")
				wantStat(t, "Finished", st.Finished, 1, "an expired request is not worked on")
			}
			s.waitFor("the slot to be given back", func() bool { return s.srv.Stats().InFlight == 0 })
			wantStat(t, "Leaked", s.srv.Stats().Leaked, 0, "")
		}()
	}
}

// realServer is a fake GPU with the code under test as its admission
// logic, served over HTTP on a loopback port, on the real clock.
type realServer struct {
	t      *testing.T
	srv    *fakegpu.Server
	addr   string
	client *http.Client
	wg     sync.WaitGroup

	calls    []*realCall
	close    func() // stops the server and every request, and waits for them
	mu       sync.Mutex
	panicMsg string
}

func newRealServer(t *testing.T, impl Impl, cfg fakegpu.Config, lim fakegpu.Limiter) *realServer {
	t.Helper()
	s := &realServer{t: t}
	admit := func(w http.ResponseWriter, req *http.Request, job *fakegpu.Job) {
		defer func() {
			if v := recover(); v != nil {
				s.mu.Lock()
				if s.panicMsg == "" {
					s.panicMsg = panicMessage("Admit", v, debug.Stack())
				}
				s.mu.Unlock()
				http.Error(w, "Admit panicked", http.StatusInternalServerError)
			}
		}()
		impl.Admit(w, req, job)
	}
	opts := []fakegpu.Option{fakegpu.WithAdmission(fakegpu.AdmissionFunc(admit))}
	if lim != nil {
		opts = append(opts, fakegpu.WithLimiter(lim))
	}
	srv, err := fakegpu.New(cfg, opts...)
	if err != nil {
		t.Fatalf("fakegpu.New(%+v) = %v; want a server (a bug in the suite)", cfg, err)
	}
	s.srv = srv
	ts := httptest.NewServer(srv)
	u, _ := url.Parse(ts.URL)
	s.addr = u.Host
	tr := &http.Transport{}
	s.client = &http.Client{Transport: tr}
	s.close = func() {
		for _, c := range s.calls {
			c.cancel()
		}
		srv.Close()
		s.wg.Wait()
		tr.CloseIdleConnections()
		ts.Close()
	}
	return s
}

// checkPanics fails the test if the admission code has panicked.
func (s *realServer) checkPanics() {
	s.t.Helper()
	s.mu.Lock()
	msg := s.panicMsg
	s.mu.Unlock()
	if msg != "" {
		s.t.Fatal(msg)
	}
}

// realCall is one GET /generate over HTTP.
type realCall struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	resp   *http.Response
	body   string
	err    error
}

// send starts a GET /generate with X-Client-Id client ("" for none). The
// client waits until cancel or the end of the test.
func (s *realServer) send(name, client string) *realCall {
	ctx, cancel := context.WithCancel(s.t.Context())
	c := &realCall{name: name, cancel: cancel, done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/generate", nil)
	if err != nil {
		s.t.Fatalf("http.NewRequest: %v (a bug in the suite)", err)
	}
	if client != "" {
		req.Header.Set("X-Client-Id", client)
	}
	s.calls = append(s.calls, c)
	s.wg.Go(func() {
		defer close(c.done)
		defer cancel()
		c.resp, c.err = s.client.Do(req)
		if c.err == nil {
			b, _ := io.ReadAll(c.resp.Body)
			c.resp.Body.Close()
			c.body = string(b)
		}
	})
	return c
}

// result waits up to d for c's answer: nil if none came.
func (s *realServer) result(c *realCall, d time.Duration) (*http.Response, string) {
	s.t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		s.checkPanics()
		return nil, ""
	}
	s.checkPanics()
	if c.err != nil {
		return nil, ""
	}
	return c.resp, c.body
}

// waitFor polls cond for up to 3 s and fails the test if it never holds.
func (s *realServer) waitFor(what string, cond func() bool) {
	s.t.Helper()
	for end := time.Now().Add(3 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		s.checkPanics()
		if time.Now().After(end) {
			s.t.Fatalf("on the real clock, waited 3 s for %s; Stats() = %+v", what, s.srv.Stats())
		}
	}
}

// describe says what resp was, for a message.
func describe(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	return fmt.Sprintf("status %d", resp.StatusCode)
}
