package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"ratelab/fakegpu"
	"ratelab/grader"
	"ratelab/harness"
	"ratelab/reports"
	"ratelab/results"
)

var cmdFlood = &command{
	Name:      "flood",
	UsageLine: "flood RATE|--rates R1,R2,...|--pattern spikes|ramp [--pattern constant|poisson] [--spike N --every 5s] [--from R --to R] [--seed N] [--seconds 10] [--timeout 1s] [--mode none] [--url http://127.0.0.1:8000] [--client-id ID] [--out DIR] [--json]",
	Short:     "send an open-loop flood and print one line of results",
	Long: `Flood sends RATE requests per second to /generate for --seconds, each client
giving up after --timeout, and prints one line: offered load, goodput,
outcome counts, the p99 of successes and the server's own counts.

Without --url it floods a fresh in-process server in --mode; with --url it
floods a server already running on this machine: a ratelab server (start
one with 'grade serve') at its /generate, with its own counts, or any
other HTTP server at the URL as given, whose counts are then shown as not
available. Floods only ever target loopback addresses.

Latency is measured from each request's scheduled send time, so queueing
inside the load generator is not hidden. If the generator fell behind its
schedule the line says so.

--pattern shapes the arrivals over time, open-loop (k6's arrival-rate
executors): every request's send time is fixed before the flood starts.
  constant  RATE per second, evenly spaced (the default)
  spikes    --spike N requests at once every --every (such as 5s), the first
            one --every in; "at once" is one request every 10 µs, in order,
            so a spike of 30 leaves within 0.29 ms; no RATE
  ramp      from --from to --to requests per second, linearly over
            --seconds; no RATE
  poisson   RATE per second on average, at random exponential gaps drawn
            from --seed (default: a seed from the clock, printed and
            recorded); the count itself is random
For example: 'grade flood --pattern spikes --spike 30 --every 5s --mode
bucket', 'grade flood --pattern ramp --from 10 --to 200', 'grade flood 60
--pattern poisson --seed 7'. The line and the document name the pattern;
with spikes and ramps the offered rate is its mean.

--rates 80,120,160,240 sweeps instead of one RATE: a fresh server in --mode
for each rate, one line each, then results.json and an HTML page with
goodput against offered load beside the model's curve, written to --out
(default: a new folder under ratelab-runs/).`,
	Run: withFlags(floodFlags, runFlood),
}

// floodOptions are flood's flags.
type floodOptions struct {
	seconds   float64
	timeout   time.Duration
	mode      string
	solutions bool
	url       string
	clientID  string
	rates     string
	out       string
	json      bool

	pattern string
	spike   uint64
	every   time.Duration
	from    float64
	to      float64
	seed    seedFlag
}

// seedFlag is --seed: a uint64 that remembers whether it was given, since
// 0 is a seed like any other.
type seedFlag struct {
	v   uint64
	set bool
}

func (f *seedFlag) String() string { return strconv.FormatUint(f.v, 10) }

func (f *seedFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want a whole number from 0 to 2^64-1")
	}
	f.v, f.set = v, true
	return nil
}

func floodFlags(fs *flag.FlagSet) *floodOptions {
	var o floodOptions
	fs.Float64Var(&o.seconds, "seconds", 10, "how long to send, in seconds")
	fs.DurationVar(&o.timeout, "timeout", harness.DefaultTimeout, "the client's timeout for each request")
	fs.StringVar(&o.mode, "mode", "none", "mode of the fresh server: none, shed or bucket (shed and bucket run your exercises' code)")
	fs.BoolVar(&o.solutions, "solutions", false, "in modes shed and bucket, run the reference code instead of your exercises")
	fs.StringVar(&o.url, "url", "", "a running server on loopback: a ratelab server's base URL, such as http://127.0.0.1:8000, or any URL to flood as given")
	fs.StringVar(&o.clientID, "client-id", "", "send this X-Client-Id header with every request")
	fs.StringVar(&o.rates, "rates", "", "sweep these rates, comma-separated, such as 80,120,160,240, each against a fresh server")
	fs.StringVar(&o.out, "out", "", "with --rates: write results.json and the report into this folder (default: a new folder under ratelab-runs/)")
	fs.BoolVar(&o.json, "json", false, "print the run as JSON instead of one line")
	fs.StringVar(&o.pattern, "pattern", string(harness.PatternConstant), "arrivals over time: constant, spikes, ramp or poisson")
	fs.Uint64Var(&o.spike, "spike", 0, "with --pattern spikes: requests in each spike")
	fs.DurationVar(&o.every, "every", 0, "with --pattern spikes: time from one spike to the next, such as 5s")
	fs.Float64Var(&o.from, "from", 0, "with --pattern ramp: the rate at the start, requests per second")
	fs.Float64Var(&o.to, "to", 0, "with --pattern ramp: the rate at the end, requests per second")
	fs.Var(&o.seed, "seed", "with --pattern poisson: the seed of the random gaps (default: from the clock)")
	return &o
}

func runFlood(ctx context.Context, o *floodOptions, args []string) error {
	pattern, err := floodPattern(o)
	if err != nil {
		return err
	}
	if o.rates != "" {
		if !pattern.IsConstant() {
			return usagef("--rates sweeps constant rates; flood --pattern %s on its own", pattern.Kind)
		}
		return runSweep(ctx, o, args)
	}
	if o.out != "" {
		return usagef("--out goes with --rates; one flood prints its run (--json for the document)")
	}
	var rate float64
	switch k := pattern.Kind; {
	case k == harness.PatternSpikes || k == harness.PatternRamp:
		if len(args) != 0 {
			return usagef("--pattern %s sets its own rates: give no RATE", k)
		}
	case len(args) != 1:
		return usagef("want exactly one RATE in requests per second, such as 'grade flood 120', or --rates")
	default:
		if rate, err = parseRate(args[0]); err != nil {
			return err
		}
	}
	if err := checkFloodFlags(o); err != nil {
		return err
	}
	opts := harness.Options{
		Rate:     rate,
		Duration: time.Duration(o.seconds * float64(time.Second)),
		Timeout:  o.timeout,
		Pattern:  pattern,
	}
	if pattern.Kind == harness.PatternPoisson && !o.seed.set {
		fmt.Fprintf(stderr, "poisson arrivals with seed %d (--seed %d replays them)\n", pattern.Seed, pattern.Seed)
	}
	if o.clientID != "" {
		opts.Header = http.Header{"X-Client-Id": []string{o.clientID}}
	}
	var run *results.Run
	started := time.Now()
	impl := grader.Exercises
	if o.solutions {
		impl = grader.Solutions
	}
	if o.url != "" {
		run, err = floodURL(ctx, o.url, opts)
		impl = "" // whatever the server runs, this command did not build it
	} else {
		run, err = floodFresh(ctx, o.mode, o.solutions, opts)
	}
	if run != nil {
		if o.json {
			if jerr := writeMeasured("flood", impl, started, func(doc *results.Document) { doc.Runs = []*results.Run{run} }); jerr != nil {
				return jerr
			}
		} else if perr := reports.FloodLine(stdout, run); perr != nil {
			return perr
		}
	}
	if errors.Is(err, harness.ErrBadOptions) {
		return usageError{err.Error()}
	}
	return err
}

// floodPattern maps --pattern and its flags to a harness.Pattern, refusing
// a flag that belongs to another pattern. The values themselves are
// checked by harness.Flood, whose errors are usage errors too.
func floodPattern(o *floodOptions) (harness.Pattern, error) {
	kind, err := harness.ParsePatternKind(o.pattern)
	if err != nil {
		return harness.Pattern{}, usageError{"--pattern: " + err.Error()}
	}
	owners := []struct {
		flag  string
		set   bool
		owner harness.PatternKind
	}{
		{"--spike", o.spike != 0, harness.PatternSpikes},
		{"--every", o.every != 0, harness.PatternSpikes},
		{"--from", o.from != 0, harness.PatternRamp},
		{"--to", o.to != 0, harness.PatternRamp},
		{"--seed", o.seed.set, harness.PatternPoisson},
	}
	for _, f := range owners {
		if f.set && kind != f.owner {
			return harness.Pattern{}, usagef("%s goes with --pattern %s", f.flag, f.owner)
		}
	}
	p := harness.Pattern{Kind: kind}
	switch kind {
	case harness.PatternConstant:
		p.Kind = "" // the default, recorded as no pattern at all
	case harness.PatternSpikes:
		if o.spike == 0 || o.every == 0 {
			return p, usagef("--pattern spikes wants --spike N and --every DURATION, such as --spike 30 --every 5s")
		}
		p.Spike, p.Every = o.spike, o.every
	case harness.PatternRamp:
		if o.from == 0 && o.to == 0 {
			return p, usagef("--pattern ramp wants --from and --to in requests per second, such as --from 10 --to 200")
		}
		p.From, p.To = o.from, o.to
	case harness.PatternPoisson:
		p.Seed = o.seed.v
		if !o.seed.set {
			p.Seed = uint64(time.Now().UnixNano())
		}
	}
	return p, nil
}

// checkFloodFlags refuses a flood's out-of-range --seconds and --timeout.
func checkFloodFlags(o *floodOptions) error {
	if math.IsNaN(o.seconds) || o.seconds <= 0 || o.seconds > harness.MaxDuration.Seconds() {
		return usagef("--seconds %v: want more than 0 and at most %v", o.seconds, harness.MaxDuration.Seconds())
	}
	if o.timeout <= 0 || o.timeout > harness.MaxTimeout {
		return usagef("--timeout %s: want more than 0 and at most %s", o.timeout, harness.MaxTimeout)
	}
	return nil
}

// parseRate reads a request rate, refusing zero, negative, NaN and absurd
// values with one clear line.
func parseRate(s string) (float64, error) {
	rate, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return 0, usagef("rate %q: want a number of requests per second, such as 120", s)
	}
	if rate <= 0 || rate > harness.MaxRate {
		return 0, usagef("rate %v: want more than 0 and at most %v requests per second", rate, harness.MaxRate)
	}
	return rate, nil
}

// floodURL floods a server already running on loopback. A fake GPU (one
// whose /stats answers as ratelab's) is flooded at /generate with its own
// counts beside the client's; any other HTTP server is flooded at target
// as given, and its server counts are marked not available.
func floodURL(ctx context.Context, target string, opts harness.Options) (*results.Run, error) {
	if err := harness.CheckLoopback(target); err != nil {
		return nil, usageError{err.Error()}
	}
	base := strings.TrimSuffix(target, "/")
	stats := harness.HTTPStats(base)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, serr := stats(pctx)
	cancel()
	opts.ServerElsewhere = true // whatever it is, this command did not start it here
	if serr == nil {
		opts.URL = base + "/generate"
		opts.Stats = stats
		return harness.Flood(ctx, opts)
	}
	if err := reachable(ctx, target); err != nil {
		return nil, usagef("cannot reach %s (%v); start a server there first, such as 'grade serve'", target, err)
	}
	fmt.Fprintf(stderr, "%s has no ratelab /stats: flooding %s as given; the server's own counts are not available\n", base, target)
	opts.URL = target
	return harness.Flood(ctx, opts)
}

// ratelabServer checks that target is a ratelab server on loopback (its
// /stats answers as a fake GPU's) and returns its base URL, without a
// trailing slash. The storms need one: they read each call's attempts
// from the server's own records.
func ratelabServer(ctx context.Context, target string) (string, error) {
	if err := harness.CheckLoopback(target); err != nil {
		return "", usageError{err.Error()}
	}
	base := strings.TrimSuffix(target, "/")
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := harness.HTTPStats(base)(pctx); err != nil {
		return "", usagef("no ratelab server at %s (%v); start one with 'grade serve', such as 'grade serve --mode shed --port 8000'", base, err)
	}
	return base, nil
}

// reachable reports whether an HTTP server answers GET target at all,
// whatever its status.
func reachable(ctx context.Context, target string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// floodFresh floods a fresh server: in-process for mode none, or a child
// process built from the learner's tree (or the reference) otherwise.
func floodFresh(ctx context.Context, modeName string, solutions bool, opts harness.Options) (*results.Run, error) {
	mode, err := fakegpu.ParseMode(modeName)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	switch mode {
	case fakegpu.ModeNone:
	case fakegpu.ModeRedis:
		return nil, usagef("mode redis is not available yet")
	default:
		root, err := grader.FindRoot(".")
		if err != nil {
			return nil, usageError{err.Error()}
		}
		impl := grader.Exercises
		if solutions {
			impl = grader.Solutions
		}
		fmt.Fprintf(stderr, "building a %s server with task 2 and task 3 code from %s/ ...\n", mode, impl)
		srv, err := grader.StartServer(ctx, root, impl, "--mode", string(mode), "--port", "0")
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		opts.URL = srv.URL + "/generate"
		opts.Stats = harness.HTTPStats(srv.URL)
		opts.ServerElsewhere = true // a child process
		fmt.Fprintf(stderr, "flooding it at %s for %s ...\n", offered(opts), opts.Duration)
		run, err := harness.Flood(ctx, opts)
		if run != nil {
			run.Server = serverRecord(mode)
			if p := srv.Panics(); p != "" {
				run.Warnings = append(run.Warnings, "the server's handler panicked: "+p)
			}
		}
		return run, err
	}
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = mode
	srv, err := fakegpu.New(cfg)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer in.Close()
	opts.URL = in.URL + "/generate"
	opts.Stats = harness.ServerStats(srv)
	fmt.Fprintf(stderr, "flooding an in-process server (%s, capacity %.0f req/s) at %s for %s ...\n",
		mode, cfg.Capacity(), offered(opts), opts.Duration)
	run, err := harness.Flood(ctx, opts)
	if run != nil {
		run.Server = serverRecord(mode)
	}
	return run, err
}

// offered describes a flood's load for a progress line: "120 req/s", or
// its pattern.
func offered(opts harness.Options) string {
	if opts.Pattern.IsConstant() {
		return fmt.Sprintf("%g req/s", opts.Rate)
	}
	if opts.Pattern.Kind == harness.PatternPoisson {
		return fmt.Sprintf("%g req/s on average (%s)", opts.Rate, opts.Pattern)
	}
	return opts.Pattern.String()
}

// serverRecord is how a run records a fresh server in mode, which flood
// starts with the defaults.
func serverRecord(mode fakegpu.Mode) *results.Server {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = mode
	r := cfg.Record()
	return &r
}
