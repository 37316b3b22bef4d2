package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"ratelab/harness"
	"ratelab/model/ties"
	"ratelab/results"
)

// Breaker is the circuit breaker a service puts in front of a dependency:
// Allow says whether to call, and done reports how the call went.
type Breaker interface {
	Allow() (done func(success bool), err error)
}

// Dependency describes the dead-dependency scenario: a service
// answers its clients at Rate per second; each request calls a dependency
// on loopback that answers in DependencyWork, except between DeadAt and
// DeadAt+DeadFor, when it accepts requests and never answers. The service's
// client timeout to the dependency is CallTimeout.
type Dependency struct {
	Name           string
	Rate           float64       // requests per second to the service
	Duration       time.Duration // how long they arrive
	ClientTimeout  time.Duration // the service's clients' timeout
	CallTimeout    time.Duration // the service's timeout to the dependency
	DependencyWork time.Duration // a healthy dependency's answer time
	DeadAt         time.Duration // when the dependency goes dead, from the start
	DeadFor        time.Duration // for how long
	// SlowCall is how long a call may take before the service reports it
	// to the breaker as failed, while still waiting for it up to
	// CallTimeout. Without it a breaker would hear of a dead dependency
	// only CallTimeout after its death, with CallTimeout × Rate requests
	// stuck by then.
	SlowCall time.Duration
	// Breaker guards the dependency; nil runs the service without one.
	Breaker Breaker `json:"-"`
	// Listen and Dial, if set, replace the operating system's network for
	// the service, its dependency and the flood (an in-memory network, for
	// a scenario in virtual time; see Options.Dial).
	Listen func(address string) (net.Listener, error) `json:"-"`
	Dial   harness.DialFunc                           `json:"-"`
}

// scenarioService is the service and its dependency, with their counters.
type scenarioService struct {
	opts     Dependency
	t0       time.Time
	client   *http.Client
	depURL   string
	inFlight atomic.Int64
	depCalls atomic.Int64
	depDead  atomic.Int64 // calls that reached the dependency while it was dead

	// With a breaker: for each call that reached the dead dependency, when
	// the breaker had let it through; and when the breaker first refused a
	// call (-1 before it did). Both from t0.
	mu           sync.Mutex
	deadAllowed  []time.Duration // guarded by mu, at most maxDeadCalls
	firstRefusal atomic.Int64
}

// maxDeadCalls bounds the calls to the dead dependency a scenario records:
// a breaker lets through a few dozen; one that never opens lets through
// Rate × DeadFor, and no check needs those past the bound.
const maxDeadCalls = 10000

// allowedHeader carries, from the service to the dependency, when the
// breaker let the call through (nanoseconds from t0), so that the
// dependency's record of the calls it got while dead says when each was
// let through, not only when it arrived.
const allowedHeader = "X-Ratelab-Allowed-Ns"

func (s *scenarioService) dead(now time.Time) bool {
	t := now.Sub(s.t0)
	return t >= s.opts.DeadAt && t < s.opts.DeadAt+s.opts.DeadFor
}

// dependency answers after DependencyWork, or never while dead.
func (s *scenarioService) dependency(w http.ResponseWriter, r *http.Request) {
	s.depCalls.Add(1)
	if s.dead(time.Now()) {
		s.depDead.Add(1)
		if ns, err := strconv.ParseInt(r.Header.Get(allowedHeader), 10, 64); err == nil {
			s.mu.Lock()
			if len(s.deadAllowed) < maxDeadCalls {
				s.deadAllowed = append(s.deadAllowed, time.Duration(ns))
			}
			s.mu.Unlock()
		}
		<-r.Context().Done() // accepted, never answered
		return
	}
	time.Sleep(s.opts.DependencyWork)
	_, _ = io.WriteString(w, "ok\n")
}

// serve is the service's handler: call the dependency, through the breaker
// if there is one.
func (s *scenarioService) serve(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	report := func(bool) {}
	allowed := ""
	if s.opts.Breaker != nil {
		done, err := s.opts.Breaker.Allow()
		allowed = strconv.FormatInt(int64(time.Since(s.t0)), 10)
		if err != nil {
			s.firstRefusal.CompareAndSwap(-1, int64(time.Since(s.t0)))
			http.Error(w, "dependency unavailable (circuit open)", http.StatusServiceUnavailable)
			return
		}
		var once sync.Once
		report = func(ok bool) { once.Do(func() { done(ok) }) }
		// ties.Restart early: SlowCall after a call is let through is
		// exactly when a later call arrives (both on the send grid), and
		// the breaker would hear of the slow call before or after letting
		// that one through by the scheduler's choice (package ties).
		// Early, as a client's timeout is: a call still unanswered at
		// exactly SlowCall is slow, and the breaker hears of it before
		// the call arriving then asks (task 7's 24 calls let through to
		// the dead dependency and 1,440 served; late gives 25 and 1,435).
		slow := time.AfterFunc(ties.Restart(s.opts.SlowCall), func() { report(false) })
		defer slow.Stop()
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, s.depURL, nil)
	if allowed != "" {
		req.Header.Set(allowedHeader, allowed)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		report(false)
		http.Error(w, "dependency failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	report(resp.StatusCode == http.StatusOK)
	_, _ = io.WriteString(w, "ok\n")
}

// RunDependency runs the scenario and returns the flood of the
// service's clients, with the service's own counts over time.
func RunDependency(ctx context.Context, o Dependency) (*results.Scenario, error) {
	if o.Rate <= 0 || o.Duration <= 0 || o.CallTimeout <= 0 || o.SlowCall <= 0 {
		return nil, fmt.Errorf("%w: dependency scenario %+v", harness.ErrBadOptions, o)
	}
	s := &scenarioService{opts: o}
	s.firstRefusal.Store(-1)
	s.client = &http.Client{Timeout: o.CallTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 100000, DialContext: o.Dial}}
	defer s.client.CloseIdleConnections()
	listen := o.Listen
	if listen == nil {
		listen = func(address string) (net.Listener, error) { return net.Listen("tcp", address) }
	}

	depLn, err := listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	dep := &http.Server{Handler: http.HandlerFunc(s.dependency)}
	go func() { _ = dep.Serve(depLn) }()
	defer dep.Close()
	s.depURL = "http://" + depLn.Addr().String() + "/"

	svcLn, err := listen("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	svc := &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = svc.Serve(svcLn) }()
	defer svc.Close()

	// Sample the service's own counters every 100 ms.
	var mu sync.Mutex
	var samples []results.ScenarioSample
	s.t0 = time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Read between the instants the service acts on, as the flood's
		// sampler does (ties.ReadPhase): the flood's calls arrive on the
		// send grid from t0, every 10 ms, so a reading at t0 + k × 100 ms
		// would count the call arriving then, or not, by the scheduler's
		// order.
		time.Sleep(ties.ReadPhase)
		tick := time.NewTicker(harness.DefaultSampleEvery)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			samples = append(samples, results.ScenarioSample{
				TS: time.Since(s.t0).Seconds(), InFlight: s.inFlight.Load(),
				HeapMB: float64(ms.HeapInuse) / (1 << 20), DependencyCalls: s.depCalls.Load(),
			})
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	run, err := harness.Flood(ctx, harness.Options{
		Name: o.Name, URL: "http://" + svcLn.Addr().String() + "/", Rate: o.Rate,
		Duration: o.Duration, Timeout: o.ClientTimeout, DrainCap: -1, Dial: o.Dial,
	})
	close(stop)
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	sc := &results.Scenario{
		Name: o.Name, Breaker: o.Breaker != nil, Run: run, Samples: samples,
		DeadAtS: o.DeadAt.Seconds(), DeadForS: o.DeadFor.Seconds(), SlowCallMS: float64(o.SlowCall) / float64(time.Millisecond),
		CallTimeoutS: o.CallTimeout.Seconds(), DependencyCalls: s.depCalls.Load(), DependencyCallsDead: s.depDead.Load(),
		FirstRefusalS: -1,
	}
	if d := s.firstRefusal.Load(); d >= 0 {
		sc.FirstRefusalS = time.Duration(d).Seconds()
	}
	s.mu.Lock()
	slices.Sort(s.deadAllowed)
	for _, d := range s.deadAllowed {
		sc.DeadCallsAllowedS = append(sc.DeadCallsAllowedS, d.Seconds())
	}
	s.mu.Unlock()
	for _, sm := range samples {
		sc.InFlightMax = max(sc.InFlightMax, sm.InFlight)
		sc.HeapMaxMB = max(sc.HeapMaxMB, sm.HeapMB)
	}
	if run != nil {
		sc.RecoveredS = Recovered(run, o.DeadAt+o.DeadFor, 0.9)
	}
	return sc, err
}

// Recovered returns how long after since the run's successes per timeline
// bin first reached share of the requests sent in that bin, in seconds, or
// -1 if they never did.
func Recovered(run *results.Run, since time.Duration, share float64) float64 {
	bin := time.Duration(run.TimelineBinMS * float64(time.Millisecond))
	if bin <= 0 {
		return -1
	}
	ok := run.Timeline[results.OutcomeOK]
	for b := int(since / bin); b < len(ok); b++ {
		var total int64
		for _, o := range results.Outcomes {
			if b < len(run.Timeline[o]) {
				total += run.Timeline[o][b]
			}
		}
		if total > 0 && float64(ok[b]) >= share*float64(total) {
			return max(0, (time.Duration(b)*bin - since).Seconds())
		}
	}
	return -1
}
