// Package fakegpu is the server the lesson floods: a pretend GPU with a fixed
// number of slots, each request holding one slot for a fixed amount of work.
//
// With the defaults (8 slots, 100 ms of work) its capacity is 80 requests per
// second. In [ModeNone] it has no protection at all: requests wait for a slot
// in an unbounded FIFO line and are worked on even after their client has
// given up, which is the congestion collapse of task 1. The protected modes
// hand each request to an [Admission] (task 2's code) that decides whether it
// joins the line.
//
// A [Server] serves GET /generate and GET /stats. It runs in-process for the
// grader's tests, and as `grade serve` for a learner following the lesson by
// hand.
package fakegpu

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"time"

	"ratelab/model"
	"ratelab/results"
)

// Mode says which protection the server applies before a request joins the
// line for a slot.
type Mode string

// The server's modes.
const (
	// ModeNone is the unprotected server: every request joins an unbounded
	// line and is worked on whether or not its client still waits.
	ModeNone Mode = "none"
	// ModeShed bounds the line at MaxWaiting and answers 503 at once when it
	// is full (load shedding), and drops requests that waited past Deadline.
	ModeShed Mode = "shed"
	// ModeBucket adds a per-client token bucket in front of shedding.
	ModeBucket Mode = "bucket"
	// ModeRedis is ModeBucket with the buckets kept in Redis, shared by every
	// server process.
	ModeRedis Mode = "redis"
)

// Modes lists every mode in the order the lesson introduces them.
var Modes = []Mode{ModeNone, ModeShed, ModeBucket, ModeRedis}

// ParseMode returns the Mode named s, or an error listing the valid names.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown mode %q (want one of none, shed, bucket, redis)", s)
}

// Limited reports whether the mode applies a per-client token bucket.
func (m Mode) Limited() bool { return m == ModeBucket || m == ModeRedis }

// Defaults of a Config, as the lesson sets them.
const (
	DefaultSlots       = 8
	DefaultWork        = 100 * time.Millisecond
	DefaultMaxWaiting  = 16
	DefaultDeadline    = 800 * time.Millisecond
	DefaultBucketRate  = 70.0 // tokens per second
	DefaultBucketBurst = 20.0 // tokens
)

// Config describes one fake GPU server. The zero value is not useful; start
// from DefaultConfig.
type Config struct {
	// Slots is how many requests the GPU works on at once (default 8).
	Slots int
	// Work is how long one request holds its slot (default 100 ms).
	Work time.Duration
	// Mode selects the protection in front of the line (default ModeNone).
	Mode Mode
	// MaxWaiting bounds the line in the protected modes (default 16, which is
	// 16/80 = 200 ms of work at the default capacity). Unused in ModeNone.
	MaxWaiting int
	// Deadline is the longest a request may wait for a slot and still be
	// worked on in the protected modes (default 800 ms); 0 turns the check
	// off. Unused in ModeNone.
	Deadline time.Duration
	// BucketRate is each client's refill rate in tokens per second in the
	// bucket modes (default 70).
	BucketRate float64
	// BucketBurst is each client's bucket capacity in tokens in the bucket
	// modes (default 20).
	BucketBurst float64
	// SpreadRetryAfter makes the server replace the Retry-After of every
	// 503 it sheds with a time from a calendar that hands out comebacks at
	// the server's capacity: the first shed requests are told 1 s, the next
	// capacity's worth 2 s, and so on. A crowd told to come back then
	// returns spread out instead of all at once (off by default; the storm
	// of task 4 measures the difference).
	SpreadRetryAfter bool
	// Redis is the URL of the Redis server that keeps the buckets in
	// ModeRedis, shared by every server process, such as
	// redis://127.0.0.1:6379. Only cmd/fakegpu reads it, to build its
	// limiter; a Server is given its Limiter with WithLimiter.
	Redis string
	// Counting, in ModeBucket, names task 8's limiter the server's Limiter
	// is instead of task 3's bucket: one of CountingLimiters. Each key may
	// then have CountingLimit requests per CountingWindow; the token
	// bucket refills at that average with a capacity of BucketBurst. Only
	// cmd/counting serves it; the server uses it to judge the waits its
	// Limiter reports (see dishonestWait). Empty for task 3's bucket.
	Counting string
	// CountingLimit is the requests per CountingWindow of task 8's limiter.
	CountingLimit int
	// CountingWindow is the window of task 8's limiter.
	CountingWindow time.Duration
}

// CountingLimiters are the names Config.Counting accepts: task 8's fixed
// window, sliding log, sliding counter and token bucket.
var CountingLimiters = []string{"fixed", "log", "counter", "bucket"}

// DefaultConfig returns the lesson's server: 8 slots of 100 ms, unprotected.
func DefaultConfig() Config {
	return Config{
		Slots:       DefaultSlots,
		Work:        DefaultWork,
		Mode:        ModeNone,
		MaxWaiting:  DefaultMaxWaiting,
		Deadline:    DefaultDeadline,
		BucketRate:  DefaultBucketRate,
		BucketBurst: DefaultBucketBurst,
	}
}

// Capacity returns the most requests per second the server can finish:
// Slots / Work.
func (c Config) Capacity() float64 {
	return float64(c.Slots) / c.Work.Seconds()
}

// Sim returns the discrete-event simulation of a server configured as c,
// without clients: the slots and work, and in the protected modes the
// bounded line, the deadline and a server that notices clients who hung
// up, plus each client's bucket in the bucket modes. SpreadRetryAfter has
// no counterpart in the simulation.
func (c Config) Sim() model.Sim {
	s := model.Sim{Slots: c.Slots, Work: c.Work}
	if c.Mode == ModeNone {
		return s
	}
	s.MaxWaiting, s.Deadline, s.DropAbandoned = c.MaxWaiting, c.Deadline, true
	if c.Mode.Limited() {
		s.BucketRate, s.BucketBurst = c.BucketRate, c.BucketBurst
	}
	return s
}

// Validate reports the first setting that cannot describe a working server.
func (c Config) Validate() error {
	var errs []error
	if c.Slots < 1 || c.Slots > 10000 {
		errs = append(errs, fmt.Errorf("slots %d: want 1 to 10000", c.Slots))
	}
	if c.Work <= 0 || c.Work > time.Minute {
		errs = append(errs, fmt.Errorf("work %s: want more than 0 and at most 1m", c.Work))
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	if c.MaxWaiting < 0 {
		errs = append(errs, fmt.Errorf("max waiting %d: want 0 or more", c.MaxWaiting))
	}
	if c.Deadline < 0 {
		errs = append(errs, fmt.Errorf("deadline %s: want 0 (off) or more", c.Deadline))
	}
	if c.Mode.Limited() {
		if !(c.BucketRate > 0) || math.IsInf(c.BucketRate, 0) {
			errs = append(errs, fmt.Errorf("bucket rate %v: want a positive number of tokens per second", c.BucketRate))
		}
		if !(c.BucketBurst >= 1) || math.IsInf(c.BucketBurst, 0) {
			errs = append(errs, fmt.Errorf("bucket burst %v: want at least 1 token", c.BucketBurst))
		}
	}
	if c.Counting != "" {
		if !slices.Contains(CountingLimiters, c.Counting) {
			errs = append(errs, fmt.Errorf("counting limiter %q: want one of fixed, log, counter, bucket", c.Counting))
		}
		if c.Mode != ModeBucket {
			errs = append(errs, fmt.Errorf("counting limiter %q in mode %s: want mode bucket", c.Counting, c.Mode))
		}
		if c.CountingLimit < 1 || c.CountingWindow <= 0 {
			errs = append(errs, fmt.Errorf("counting limit %d per %s: want at least 1 per a positive window", c.CountingLimit, c.CountingWindow))
		}
	}
	return errors.Join(errs...)
}

// Record returns c as a results document records it. The Redis URL keeps
// no password.
func (c Config) Record() results.Server {
	return results.Server{
		Mode: string(c.Mode), Slots: c.Slots, WorkMS: milliseconds(c.Work),
		MaxWaiting: c.MaxWaiting, DeadlineMS: milliseconds(c.Deadline),
		BucketRatePerS: c.BucketRate, BucketBurst: c.BucketBurst,
		SpreadRetryAfter: c.SpreadRetryAfter, Redis: redactURL(c.Redis),
		Counting: c.Counting, CountingLimit: c.CountingLimit, CountingWindowMS: milliseconds(c.CountingWindow),
	}
}

// FromRecord returns the configuration a results document recorded in s.
// ok is false when s is nil or holds only an old document's description
// of its server, or a mode this version does not know.
func FromRecord(s *results.Server) (c Config, ok bool) {
	if !s.Known() {
		return Config{}, false
	}
	m, err := ParseMode(s.Mode)
	if err != nil {
		return Config{}, false
	}
	return Config{
		Slots: s.Slots, Work: fromMilliseconds(s.WorkMS), Mode: m,
		MaxWaiting: s.MaxWaiting, Deadline: fromMilliseconds(s.DeadlineMS),
		BucketRate: s.BucketRatePerS, BucketBurst: s.BucketBurst,
		SpreadRetryAfter: s.SpreadRetryAfter, Redis: s.Redis,
		Counting: s.Counting, CountingLimit: s.CountingLimit, CountingWindow: fromMilliseconds(s.CountingWindowMS),
	}, true
}

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMilliseconds(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}

// redactURL returns u with its password, if any, replaced by "xxxxx", or
// "" for a URL that does not parse.
func redactURL(u string) string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Redacted()
}
