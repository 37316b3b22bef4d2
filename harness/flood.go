// Package harness floods a server with open-loop load and records what
// happened, honestly: every latency is measured from when the request was
// due, not from when the load generator got round to it, and a generator
// that fell behind its schedule says so.
//
// [Flood] is the one entry point for a flood, described by [Options]: at a
// constant rate, or in one of the open-loop arrival patterns of [Pattern]
// (spikes, a ramp, a Poisson process), each a [Schedule] fixed before it
// starts. It uses vegeta's
// attack library with no cap on workers or connections (a capped client pool
// is an unbounded queue of its own), records latencies into HdrHistograms per
// outcome, and samples the server's /stats until its line has drained.
//
// The experiments built from floods and clients of their own (storms, the
// judge, the dependency scenario, the counting limiters) are package
// [ratelab/scenario]'s. A flood returns a [results.Run].
package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"ratelab/model/ties"
	"ratelab/results"
)

// Defaults and limits of a flood.
const (
	DefaultTimeout     = time.Second            // the client's timeout, as in the lesson
	DefaultSampleEvery = 100 * time.Millisecond // how often /stats is read
	DefaultDrainCap    = 60 * time.Second       // longest wait for the line to drain after a flood
	DefaultTimelineBin = 250 * time.Millisecond // outcome timeline resolution

	// MaxRate is the highest rate Flood accepts, in requests per second.
	// On two cores vegeta's library stays on schedule up to a few thousand
	// per second (docs/BENCHMARKS.md); far beyond that a flood measures the
	// generator, not the server.
	MaxRate = 20000.0
	// MaxDuration is the longest flood Flood accepts.
	MaxDuration = 10 * time.Minute
	// MaxTimeout is the longest client timeout Flood accepts.
	MaxTimeout = 5 * time.Minute

	// A run is unreliable if it issued fewer than ReliableIssued of the
	// requests its schedule held, or its send lag p99 exceeded ReliableLag.
	ReliableIssued = 0.995
	ReliableLag    = 5 * time.Millisecond
)

// Histogram bounds, in microseconds: 1 µs to 60 s at 3 significant figures.
const (
	histMinUS  = 1
	histMaxUS  = 60_000_000
	histDigits = 3
)

// StatsFunc reads the flooded server's stats.
type StatsFunc func(ctx context.Context) (results.ServerStats, error)

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Options describes one flood. Zero fields take the defaults above. Its
// plain fields travel as JSON (a virtual-time session receives floods this
// way); the functions do not, and are set where the flood runs.
type Options struct {
	// Name labels the run in results, such as "120/s".
	Name string
	// URL is the full URL to send GET requests to. Its host must be a
	// loopback address: floods never leave the machine.
	URL string
	// Header is sent with every request (for example X-Client-Id).
	Header http.Header
	// Clients, if above 0, spreads the requests over that many clients:
	// request i carries X-Client-Id ClientPrefix + "-" + (i mod Clients),
	// in the order the load generator sends them, so each client sends
	// Rate/Clients per second. Clients of at least Rate·Duration gives
	// every request a client of its own. It overrides an X-Client-Id in
	// Header.
	Clients uint64
	// ClientPrefix begins every client's X-Client-Id when Clients is set.
	ClientPrefix string
	// Rate is the offered load λ in requests per second: the constant rate,
	// or the Poisson process's mean. Spikes and ramps set their own rates;
	// leave it 0 for them and the flood records their mean here.
	Rate float64
	// Duration is how long to send for; the schedule holds floor(Rate·Duration)
	// requests at a constant rate (see Pattern for the others).
	Duration time.Duration
	// Pattern shapes the arrivals over time; the zero value is the
	// constant rate, with the same schedule and figures as before
	// patterns. Latencies are measured from each request's due time in it.
	Pattern Pattern
	// Timeout is the client's timeout for each request.
	Timeout time.Duration
	// Stats reads the server's /stats; nil samples nothing.
	Stats StatsFunc `json:"-"`
	// SampleEvery is the /stats sampling interval.
	SampleEvery time.Duration
	// DrainCap bounds the wait for the server's line to empty after the
	// flood; a negative value does not wait at all.
	DrainCap time.Duration
	// MaxSendLag is the send-lag p99 above which the run is marked
	// unreliable (default ReliableLag, 5 ms). Floods judged only on counts
	// over many seconds may allow more; say why where you set it.
	MaxSendLag time.Duration
	// NewConnections opens a new connection for every request, as many
	// separate clients would, instead of reusing idle ones. Servers with
	// several workers on one port spread connections, not requests.
	NewConnections bool
	// Progress, if set, is called about once a second while sending, with
	// the elapsed time and the requests sent so far.
	Progress func(elapsed time.Duration, sent int64) `json:"-"`
	// Dial, if set, opens the flood's connections instead of the
	// operating system's network: an in-memory network (internal/vnet)
	// for a flood in virtual time. The URL's host must still be loopback.
	Dial DialFunc `json:"-"`
	// ServerElsewhere says the server runs in another process, so only the
	// client's own sockets count against this process's open-file limit;
	// otherwise both ends of every connection may be here.
	ServerElsewhere bool

	// maxWorkers caps vegeta's workers. Only tests set it, to show what a
	// capped client pool hides; floods never cap.
	maxWorkers uint64
}

// ErrBadOptions is wrapped by every error about invalid Options.
var ErrBadOptions = errors.New("invalid flood")

func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadOptions, fmt.Sprintf(format, args...))
	}
	if k := o.Pattern.kind(); k == PatternSpikes || k == PatternRamp {
		mean := o.Pattern.MeanRate(o.Rate)
		if o.Rate != 0 && o.Rate != mean {
			return bad("rate %v: pattern %s sets its own rates (mean %v/s); leave the rate 0", o.Rate, k, mean)
		}
		if err := o.Pattern.check(0); err != nil {
			return bad("%v", err)
		}
		o.Rate = mean
	}
	if math.IsNaN(o.Rate) || o.Rate <= 0 || o.Rate > MaxRate {
		return bad("rate %v: want more than 0 and at most %v requests per second", o.Rate, MaxRate)
	}
	if o.Duration <= 0 || o.Duration > MaxDuration {
		return bad("duration %s: want more than 0 and at most %s", o.Duration, MaxDuration)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 || o.Timeout > MaxTimeout {
		return bad("timeout %s: want more than 0 and at most %s", o.Timeout, MaxTimeout)
	}
	if o.Pattern.IsConstant() && math.Floor(o.Rate*o.Duration.Seconds()) < 1 {
		return bad("rate %v for %s sends no request at all", o.Rate, o.Duration)
	}
	if k := o.Pattern.kind(); k == PatternSpikes || k == PatternRamp {
		// Cheap to make (a Poisson schedule is drawn once, by Flood).
		if _, err := NewSchedule(o.Pattern, o.Rate, o.Duration); err != nil {
			return bad("%v", err)
		}
	} else if err := o.Pattern.check(o.Rate); err != nil {
		return bad("%v", err)
	}
	if err := CheckLoopback(o.URL); err != nil {
		return fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = DefaultSampleEvery
	}
	if o.MaxSendLag <= 0 {
		o.MaxSendLag = ReliableLag
	}
	if o.DrainCap == 0 {
		o.DrainCap = DefaultDrainCap
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("%g/s", o.Rate)
		if !o.Pattern.IsConstant() {
			o.Name = o.Pattern.String()
		}
	}
	return nil
}

// CheckLoopback returns an error unless rawURL is an http URL whose host is
// a loopback address (127.0.0.0/8, ::1 or localhost).
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url %q: %w", rawURL, err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("url %q: want an http:// URL", rawURL)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("url %q: floods only target loopback (127.0.0.1, ::1 or localhost), not %q", rawURL, host)
	}
	return nil
}

// fileNeed is how many files a flood of opts may hold open at once: a
// socket for every request that may be in flight (rate × timeout at a
// constant rate; for a pattern the most due within one timeout, such as
// whole spikes, or for poisson a bound from its mean: see
// Schedule.InFlight), twice when the server may be in this process too,
// and room for the rest.
func fileNeed(opts Options) uint64 {
	inFlight := inFlight(opts.Pattern, opts.Rate, opts.Timeout, nil)
	if !opts.ServerElsewhere {
		inFlight *= 2
	}
	return inFlight + 256
}

// Flood sends opts.Rate requests per second for opts.Duration, open-loop,
// or follows opts.Pattern, and returns what happened. When ctx ends it
// stops sending, cancels the requests in flight and returns the partial
// run marked Interrupted, with ctx's error.
func Flood(ctx context.Context, opts Options) (*results.Run, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	sched, err := NewSchedule(opts.Pattern, opts.Rate, opts.Duration)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if opts.Dial == nil {
		if _, err := RaiseFileLimit(fileNeed(opts)); err != nil {
			return nil, err
		}
	}

	// Requests carry reqCtx, so Ctrl-C cancels the ones in flight at once
	// instead of waiting out their timeouts.
	reqCtx, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	transport := &http.Transport{
		DialContext:         dialer(opts),
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: 100000,
		MaxConnsPerHost:     0, // no limit: a capped pool would queue requests out of sight
		IdleConnTimeout:     30 * time.Second,
		DisableKeepAlives:   opts.NewConnections,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{
		// ties.GiveUp: a few microseconds short, so an answer due at
		// exactly the timeout is late on both clocks (package ties).
		Timeout:   ties.GiveUp(opts.Timeout),
		Transport: ctxTransport{ctx: reqCtx, rt: transport},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	workers := uint64(vegeta.DefaultWorkers)
	maxWorkers := uint64(vegeta.DefaultMaxWorkers)
	if opts.maxWorkers > 0 {
		workers, maxWorkers = min(workers, opts.maxWorkers), opts.maxWorkers
	}
	attacker := vegeta.NewAttacker(
		vegeta.Client(client),
		vegeta.Workers(workers),
		vegeta.MaxWorkers(maxWorkers),
	)
	target := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: opts.URL, Header: opts.Header})
	if opts.Clients > 0 {
		target = clientsTargeter(opts)
	}
	p := &pacer{sched: sched}

	rec := newRecorder(opts, sched)
	smp := startSampler(opts, time.Now())
	defer smp.stop()

	res := attacker.Attack(target, p, 0, opts.Name)
	interrupted := false
	progressAt := time.Now().Add(time.Second)
loop:
	for {
		select {
		case r, ok := <-res:
			if !ok {
				break loop
			}
			rec.add(p.began, r)
			if opts.Progress != nil && time.Now().After(progressAt) {
				progressAt = progressAt.Add(time.Second)
				opts.Progress(time.Since(p.began), rec.issued)
			}
		case <-ctx.Done():
			if !interrupted {
				interrupted = true
				attacker.Stop()
				cancelReqs()
			}
		}
	}
	floodEnd := time.Since(smp.t0)

	run := rec.finish()
	run.Interrupted = interrupted
	run.NoServerStats = opts.Stats == nil
	if opts.Stats != nil {
		// Read once more right now: "still waiting" is the line the moment
		// the last client has its answer or has given up.
		offGrid(smp.t0)
		if st, err := opts.Stats(ctx); err == nil {
			run.ServerAfterFlood = st
		}
	}
	if !interrupted {
		smp.drain(ctx, opts.DrainCap)
	}
	smp.stop()
	smp.fill(run, floodEnd)
	if interrupted {
		run.Reliable = false
		run.Warnings = append(run.Warnings, "interrupted before the schedule ended")
		return run, ctx.Err()
	}
	return run, nil
}

// ClientID returns the X-Client-Id of request i of a flood spread over
// clients with prefix (see Options.Clients).
func ClientID(prefix string, clients, i uint64) string {
	return prefix + "-" + strconv.FormatUint(i%clients, 10)
}

// clientsTargeter returns a targeter that sends each request as the next
// client of opts.Clients, in turn. vegeta's workers call it concurrently.
func clientsTargeter(opts Options) vegeta.Targeter {
	var next atomic.Uint64
	return func(t *vegeta.Target) error {
		if t == nil {
			return vegeta.ErrNilTarget
		}
		h := opts.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("X-Client-Id", ClientID(opts.ClientPrefix, opts.Clients, next.Add(1)-1))
		*t = vegeta.Target{Method: http.MethodGet, URL: opts.URL, Header: h}
		return nil
	}
}

// dialer returns opts.Dial, or the operating system's dialer with the
// flood's timeout.
func dialer(opts Options) func(ctx context.Context, network, address string) (net.Conn, error) {
	if opts.Dial != nil {
		return opts.Dial
	}
	return (&net.Dialer{Timeout: opts.Timeout, KeepAlive: 30 * time.Second}).DialContext
}

// ctxTransport attaches ctx to every request, so cancelling ctx aborts them.
type ctxTransport struct {
	ctx context.Context
	rt  http.RoundTripper
}

func (t ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.rt.RoundTrip(r.WithContext(t.ctx))
}

// Classify maps a vegeta result to its outcome. A response is classified by
// its status code; a request with no response by its error, where any kind
// of client timeout counts as a timeout.
func Classify(code uint16, errText string) results.Outcome {
	switch code {
	case 200:
		return results.OutcomeOK
	case 429:
		return results.OutcomeTooMany
	case 503:
		return results.OutcomeUnavailable
	case 0:
		if strings.Contains(errText, "Client.Timeout") || strings.Contains(errText, "deadline exceeded") ||
			strings.Contains(errText, "timeout") {
			return results.OutcomeTimeout
		}
	}
	return results.OutcomeOther
}

// recorder accumulates one flood's results.
type recorder struct {
	opts     Options
	sched    *Schedule
	count    uint64
	issued   int64
	hists    map[results.Outcome]*hdr.Histogram
	lag      *hdr.Histogram
	pickup   *hdr.Histogram // successes' latency as vegeta measures it, from pickup
	counts   map[results.Outcome]int64
	timeline map[results.Outcome][]int64
	retry    map[results.Outcome]*results.RetryAfterStats
}

func newRecorder(opts Options, sched *Schedule) *recorder {
	bins := int(math.Ceil(float64(opts.Duration)/float64(DefaultTimelineBin))) + 1
	r := &recorder{
		opts:     opts,
		sched:    sched,
		count:    sched.Count(),
		hists:    map[results.Outcome]*hdr.Histogram{},
		lag:      hdr.New(histMinUS, histMaxUS, histDigits),
		pickup:   hdr.New(histMinUS, histMaxUS, histDigits),
		counts:   map[results.Outcome]int64{},
		timeline: map[results.Outcome][]int64{},
		retry: map[results.Outcome]*results.RetryAfterStats{
			results.OutcomeTooMany:     {},
			results.OutcomeUnavailable: {},
		},
	}
	for _, o := range results.Outcomes {
		r.hists[o] = hdr.New(histMinUS, histMaxUS, histDigits)
		r.counts[o] = 0
		r.timeline[o] = make([]int64, bins)
	}
	return r
}

// clampUS converts d to whole microseconds within the histograms' range.
func clampUS(d time.Duration) int64 {
	return min(max(d.Microseconds(), histMinUS), histMaxUS)
}

func (r *recorder) add(began time.Time, res *vegeta.Result) {
	r.issued++
	due := r.sched.Due(res.Seq)
	intended := began.Add(due)
	o := Classify(res.Code, res.Error)
	r.counts[o]++
	_ = r.hists[o].RecordValue(clampUS(res.End().Sub(intended)))
	if o == results.OutcomeOK {
		_ = r.pickup.RecordValue(clampUS(res.Latency))
	}
	_ = r.lag.RecordValue(clampUS(res.Timestamp.Sub(intended)))
	bin := min(int(due/DefaultTimelineBin), len(r.timeline[o])-1)
	r.timeline[o][bin]++
	if ra := r.retry[o]; ra != nil {
		countRetryAfter(ra, res.Headers.Get("Retry-After"))
	}
}

// countRetryAfter adds one Retry-After header value to ra. Only whole
// seconds of at least 1 count as valid: the fake GPU never sends a date.
func countRetryAfter(ra *results.RetryAfterStats, v string) {
	s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || s < 1 {
		ra.Invalid++
		return
	}
	if ra.Valid == 0 || s < ra.MinS {
		ra.MinS = s
	}
	ra.MaxS = max(ra.MaxS, s)
	ra.Valid++
}

func ms(us int64) float64 { return float64(us) / 1000 }

func (r *recorder) finish() *results.Run {
	ok := r.counts[results.OutcomeOK]
	okh := r.hists[results.OutcomeOK]
	run := &results.Run{
		Name:          r.opts.Name,
		Target:        r.opts.URL,
		OfferedRPS:    r.opts.Rate,
		DurationS:     r.opts.Duration.Seconds(),
		TimeoutS:      r.opts.Timeout.Seconds(),
		Expected:      int64(r.count),
		Issued:        r.issued,
		Counts:        r.counts,
		OK:            ok,
		GoodputRPS:    float64(ok) / r.opts.Duration.Seconds(),
		SendLagP99MS:  ms(r.lag.ValueAtQuantile(99)),
		SendLagMaxMS:  ms(r.lag.Max()),
		Reliable:      true,
		TimelineBinMS: float64(DefaultTimelineBin) / float64(time.Millisecond),
		Timeline:      r.timeline,
		Histograms:    map[results.Outcome]string{},
		RetryAfter:    r.retry,
		Pattern:       r.opts.Pattern.Record(),
	}
	if r.opts.Clients > 0 {
		run.Clients = int64(min(r.opts.Clients, uint64(r.issued)))
	}
	if ok > 0 {
		run.P50MS = ms(okh.ValueAtQuantile(50))
		run.P99MS = ms(okh.ValueAtQuantile(99))
		run.MaxMS = ms(okh.Max())
		run.PickupP99MS = ms(r.pickup.ValueAtQuantile(99))
	}
	if float64(r.issued) < ReliableIssued*float64(r.count) {
		run.Reliable = false
		run.Warnings = append(run.Warnings, fmt.Sprintf(
			"the load generator fell behind: it sent %d of the %d requests the schedule held (%.1f%%, want at least %.1f%%)",
			r.issued, r.count, 100*float64(r.issued)/float64(r.count), 100*ReliableIssued))
	}
	if lag := time.Duration(r.lag.ValueAtQuantile(99)) * time.Microsecond; lag > r.opts.MaxSendLag {
		run.Reliable = false
		run.Warnings = append(run.Warnings, fmt.Sprintf(
			"the load generator fell behind: send lag p99 %s, want at most %s", lag, r.opts.MaxSendLag))
	}
	for o, h := range r.hists {
		b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
		if err == nil {
			run.Histograms[o] = string(b)
		}
	}
	return run
}
