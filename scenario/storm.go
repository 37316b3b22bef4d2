package scenario

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/model/ties"
	"ratelab/results"
)

// CallFunc is one client's whole call, retries included: the retry loop
// under test. It must call onAttempt just before each attempt it sends.
type CallFunc func(ctx context.Context, c *http.Client, req *http.Request, onAttempt func()) (*http.Response, error)

// Defaults of storms and amplifiers.
const (
	DefaultStormTimeout = 30 * time.Second           // per attempt, as the lesson's storm client
	DefaultStormLimit   = 120 * time.Second          // the longest a storm may run
	DefaultStormBin     = 250 * time.Millisecond     // sends are counted per bin
	stormOpenSpacing    = 2 * time.Millisecond       // between clients opening their connections
	stormOpenTimeout    = 5 * time.Second            // to open one connection before the start
	maxStormErrors      = 3                          // distinct final errors kept
	maxStormClients     = 5000                       // each holds a connection
	maxAmplifyRate      = 2000.0                     // calls per second
	amplifyDrainCap     = 30 * time.Second           // wait for calls in flight after the last arrival
	minStormBins        = 1                          // bins before the first are never empty
	stormStatsPath      = "/stats"                   // read to open each client's connection
	stormGeneratePath   = "/generate"                // what the storm calls
	stormSampleEvery    = harness.DefaultSampleEvery // server stats interval during an amplifier
	stormMaxBins        = 4 * 60 * 10                // 10 minutes of 250 ms bins at most
)

// StormOptions describe a retry storm: Clients callers, each with its own
// connection opened beforehand, all calling at the same instant. Client i's
// request carries the header X-Call-Id: StormCallID(i), so that a fake GPU
// server records the attempts of each call (results.CallStats).
type StormOptions struct {
	Name string
	// BaseURL is the server's base URL, such as http://127.0.0.1:8000;
	// clients call BaseURL/generate. It must be loopback.
	BaseURL string
	Clients int
	Call    CallFunc `json:"-"`
	// Timeout is each attempt's client timeout (default 30 s).
	Timeout time.Duration
	// Limit ends the storm if it runs this long (default 120 s).
	Limit time.Duration
	// Bin is the width of the sends histogram (default 250 ms).
	Bin time.Duration
	// Dial, if set, opens the clients' connections instead of the
	// operating system's network (see Options.Dial).
	Dial harness.DialFunc `json:"-"`
}

// attemptLog records when attempts were sent, from any goroutine.
type attemptLog struct {
	t0 time.Time
	mu sync.Mutex
	at []time.Duration
}

func (l *attemptLog) record() {
	d := time.Since(l.t0)
	l.mu.Lock()
	l.at = append(l.at, d)
	l.mu.Unlock()
}

// outcomeLog records how calls ended.
type outcomeLog struct {
	mu        sync.Mutex
	succeeded int64
	failed    int64
	lastDone  time.Duration
	errs      []string
}

func (o *outcomeLog) done(d time.Duration, resp *http.Response, err error) {
	ok := err == nil && resp != nil && resp.StatusCode == http.StatusOK
	if resp != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastDone = max(o.lastDone, d)
	if ok {
		o.succeeded++
		return
	}
	o.failed++
	msg := "status " + statusText(resp)
	if err != nil {
		msg = err.Error()
	}
	if len(o.errs) < maxStormErrors && !contains(o.errs, msg) {
		o.errs = append(o.errs, msg)
	}
}

func statusText(resp *http.Response) string {
	if resp == nil {
		return "none"
	}
	return resp.Status
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// StormCallID is the X-Call-Id (fakegpu.CallIDHeader) of storm client i's
// call: c0, c1, ...
func StormCallID(i int) string { return "c" + strconv.Itoa(i) }

// Storm runs a retry storm and returns what happened. The clients' calls
// are bounded by opts.Limit; a storm that hits it is marked TimedOut.
func Storm(ctx context.Context, opts StormOptions) (*results.Storm, error) {
	if err := harness.CheckLoopback(opts.BaseURL); err != nil {
		return nil, fmt.Errorf("%w: %w", harness.ErrBadOptions, err)
	}
	if opts.Clients < 1 || opts.Clients > maxStormClients {
		return nil, fmt.Errorf("%w: %d clients, want 1 to %d", harness.ErrBadOptions, opts.Clients, maxStormClients)
	}
	if opts.Call == nil {
		return nil, fmt.Errorf("%w: no call function", harness.ErrBadOptions)
	}
	opts.Timeout = orDefault(opts.Timeout, DefaultStormTimeout)
	opts.Limit = orDefault(opts.Limit, DefaultStormLimit)
	opts.Bin = orDefault(opts.Bin, DefaultStormBin)
	if opts.Dial == nil {
		if _, err := harness.RaiseFileLimit(uint64(2*opts.Clients) + 256); err != nil {
			return nil, err
		}
	}
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: stormOpenTimeout}).DialContext
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")

	// Every client opens its own connection before the start, as the
	// lesson's storm does, so the start is a true simultaneous burst.
	clients := make([]*http.Client, opts.Clients)
	var transports []*http.Transport
	defer func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	}()
	for i := range clients {
		tr := &http.Transport{
			DialContext:         dial,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     opts.Limit,
		}
		transports = append(transports, tr)
		clients[i] = &http.Client{Transport: tr, Timeout: opts.Timeout}
	}
	var open sync.WaitGroup
	openErrs := make(chan error, opts.Clients)
	for i, c := range clients {
		open.Add(1)
		go func() {
			defer open.Done()
			time.Sleep(time.Duration(i) * stormOpenSpacing)
			octx, cancel := context.WithTimeout(ctx, stormOpenTimeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(octx, http.MethodGet, base+stormStatsPath, nil)
			resp, err := c.Do(req)
			if err != nil {
				openErrs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	open.Wait()
	close(openErrs)
	if err := <-openErrs; err != nil {
		return nil, fmt.Errorf("open the storm's connections: %w", err)
	}

	sctx, cancel := context.WithTimeout(ctx, opts.Limit)
	defer cancel()
	log := &attemptLog{}
	out := &outcomeLog{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Client i starts i × ties.Start(1) after client 0, so
			// that which clients the server admits first is theirs, not
			// the scheduler's (package ties).
			if d := ties.Start(i); d > 0 {
				time.Sleep(d)
			}
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+stormGeneratePath, nil)
			// The server records each call's attempts by this id: the retry
			// loop resends req (req.Clone), so every retry carries it.
			req.Header.Set(fakegpu.CallIDHeader, StormCallID(i))
			resp, err := opts.Call(sctx, c, req, log.record)
			out.done(time.Since(log.t0), resp, err)
		}()
	}
	log.t0 = time.Now()
	close(start)
	wg.Wait()

	st := &results.Storm{
		Name: opts.Name, Kind: "storm", Clients: opts.Clients,
		Succeeded: out.succeeded, Failed: out.failed, LastDoneS: out.lastDone.Seconds(),
		TimedOut: sctx.Err() != nil && ctx.Err() == nil, Errors: out.errs,
	}
	fillSends(st, log, opts.Bin, out.lastDone)
	return st, ctx.Err()
}

// AmplifyOptions describe the retry amplifier: calls arriving open-loop at
// Rate per second for Duration, each retrying as Call does.
type AmplifyOptions struct {
	Name     string
	BaseURL  string // loopback base URL; calls go to BaseURL/generate
	Rate     float64
	Duration time.Duration
	// Timeout is each attempt's client timeout (default 1 s).
	Timeout time.Duration
	Call    CallFunc `json:"-"`
	// Stats reads the server's /stats during the run; nil reads none.
	Stats harness.StatsFunc `json:"-"`
	// Limit bounds the whole run, arrivals and retries (default
	// Duration + 30 s).
	Limit time.Duration
	// Dial, if set, opens the calls' connections instead of the operating
	// system's network (see Options.Dial).
	Dial harness.DialFunc `json:"-"`
}

// Amplify runs the retry amplifier and returns what happened, with the
// server's stats sampled every 100 ms so the attempts it received per
// second can be read from its own counters.
func Amplify(ctx context.Context, opts AmplifyOptions) (*results.Storm, error) {
	if err := harness.CheckLoopback(opts.BaseURL); err != nil {
		return nil, fmt.Errorf("%w: %w", harness.ErrBadOptions, err)
	}
	if !(opts.Rate > 0 && opts.Rate <= maxAmplifyRate) || opts.Duration <= 0 || opts.Duration > harness.MaxDuration {
		return nil, fmt.Errorf("%w: amplify at %v/s for %s", harness.ErrBadOptions, opts.Rate, opts.Duration)
	}
	if opts.Call == nil {
		return nil, fmt.Errorf("%w: no call function", harness.ErrBadOptions)
	}
	opts.Timeout = orDefault(opts.Timeout, harness.DefaultTimeout)
	opts.Limit = orDefault(opts.Limit, opts.Duration+amplifyDrainCap)
	count := int(math.Floor(opts.Rate * opts.Duration.Seconds()))
	if opts.Dial == nil {
		if _, err := harness.RaiseFileLimit(uint64(2*opts.Rate*opts.Timeout.Seconds()*4) + 256); err != nil {
			return nil, err
		}
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")
	tr := &http.Transport{MaxIdleConnsPerHost: 100000, IdleConnTimeout: 30 * time.Second, DialContext: opts.Dial}
	defer tr.CloseIdleConnections()
	// ties.Restart early: an attempt retried the instant the last one
	// timed out would otherwise arrive with the next call, on the send
	// grid, and its timeout share an instant with a slot's work ending
	// (package ties), generation after generation.
	client := &http.Client{Transport: tr, Timeout: ties.Restart(opts.Timeout)}

	sctx, cancel := context.WithTimeout(ctx, opts.Limit)
	defer cancel()
	log := &attemptLog{t0: time.Now()}
	smp := harness.StartSampler(opts.Stats, stormSampleEvery, log.t0)
	defer smp.Stop()
	out := &outcomeLog{}
	var wg sync.WaitGroup
	for seq := 0; seq < count; seq++ {
		due := log.t0.Add(harness.Intended(opts.Rate, uint64(seq)))
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-sctx.Done():
			}
		}
		if sctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+stormGeneratePath, nil)
			resp, err := opts.Call(sctx, client, req, log.record)
			out.done(time.Since(log.t0), resp, err)
		}()
	}
	wg.Wait()
	smp.Stop()

	st := &results.Storm{
		Name: opts.Name, Kind: "amplify", Clients: count, OfferedRPS: opts.Rate, DurationS: opts.Duration.Seconds(),
		Succeeded: out.succeeded, Failed: out.failed, LastDoneS: out.lastDone.Seconds(),
		TimedOut: sctx.Err() != nil && ctx.Err() == nil, Errors: out.errs,
		SampleEveryMS: float64(stormSampleEvery) / float64(time.Millisecond),
	}
	st.ServerSamples = smp.Samples()
	fillSends(st, log, time.Second, out.lastDone)
	return st, ctx.Err()
}

// fillSends bins the attempt times and computes the peak-to-mean ratio.
func fillSends(st *results.Storm, log *attemptLog, bin time.Duration, lastDone time.Duration) {
	log.mu.Lock()
	at := append([]time.Duration(nil), log.at...)
	log.mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
	st.Attempts = int64(len(at))
	st.BinMS = float64(bin) / float64(time.Millisecond)
	n := 0
	if len(at) > 0 {
		n = min(int(at[len(at)-1]/bin)+1, stormMaxBins)
	}
	st.SendsPerBin = make([]int64, n)
	for _, a := range at {
		st.SendsPerBin[min(int(a/bin), n-1)]++
	}
	st.PeakToMean = PeakToMean(st.SendsPerBin, int(lastDone/bin)+1)
	st.EmptyShare = EmptyShare(st.SendsPerBin, int(time.Second/bin), int(lastDone/bin)+1)
}

// EmptyShare returns the share of bins[from:upto] that are zero, or 0 if
// that range is empty. Retries spread by jitter leave few bins empty once
// the opening burst is over; lockstep waves leave most of them empty.
func EmptyShare(bins []int64, from, upto int) float64 {
	upto = min(upto, len(bins))
	if from >= upto {
		return 0
	}
	empty := 0
	for _, b := range bins[from:upto] {
		if b == 0 {
			empty++
		}
	}
	return float64(empty) / float64(upto-from)
}

// PeakToMean returns the largest bin over the mean bin, among bins 1 to
// upto−1: the first bin is left out, because every client fires in it by
// design. Retries spread by jitter give a ratio of about 1 to 3; lockstep
// waves, where whole cohorts retry in the same bin and leave the bins
// between them empty, give far more. It returns 0 with fewer than two bins.
func PeakToMean(bins []int64, upto int) float64 {
	upto = min(upto, len(bins))
	if upto < minStormBins+1 {
		return 0
	}
	var peak, sum int64
	for _, b := range bins[minStormBins:upto] {
		peak = max(peak, b)
		sum += b
	}
	if sum == 0 {
		return 0
	}
	mean := float64(sum) / float64(upto-minStormBins)
	return float64(peak) / mean
}

// orDefault returns v, or def when v is zero or negative.
func orDefault(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}
