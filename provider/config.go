package provider

import (
	"errors"
	"fmt"
	"math"
	"time"

	"ratelab/results"
)

// Defaults of a Config. The limits have the shape of Anthropic's (requests,
// input tokens and output tokens per minute, each a token bucket) at a
// scale that lets a job of 2000 prompts of 3000 tokens finish in seconds:
// 400 requests and 400,000 input tokens a second. Uncached, such a job needs
// 2000 × 3000 / 400,000 = 15 s; with the prompt's shared prefix cached it
// needs 2000 / 400 = 5 s, bound by requests.
const (
	DefaultRequestsPerMinute     = 24_000     // 400 a second
	DefaultInputTokensPerMinute  = 24_000_000 // 400,000 a second
	DefaultOutputTokensPerMinute = 3_000_000  // 50,000 a second
	// DefaultBurst is how much of its refill each bucket holds: a tenth of
	// a second, so 40 requests and 40,000 input tokens by default. The per
	// minute number is a rate, not an allowance to spend at once.
	DefaultBurst           = 100 * time.Millisecond
	DefaultBaseLatency     = 50 * time.Millisecond // per request
	DefaultPerTokenLatency = 2 * time.Millisecond  // per output token
	// DefaultCacheMinTokens is the smallest prefix the fake caches, as for
	// Anthropic's larger models; a shorter marked prefix is not cached.
	DefaultCacheMinTokens = 1024
	// DefaultCacheTTL is how long a cached prefix lives after its last use,
	// Anthropic's default of five minutes.
	DefaultCacheTTL = 5 * time.Minute
	// DefaultCacheTTL1h is how long a prefix marked with a ttl of "1h"
	// lives after its last use: an hour, as Anthropic's.
	DefaultCacheTTL1h = time.Hour

	// DefaultBatchRequestsPerSecond is how many batched requests the fake
	// processes a second for one key, ours: 100, so the judge's 2,000
	// judgments take 20 s as a batch, slower than the polite client's 15 s
	// but with no 429 at all. (The real API promises only "within 24 hours",
	// most batches ending within the hour.)
	DefaultBatchRequestsPerSecond = 100
	// DefaultMaxBatchRequests is the most requests one batch may hold: the
	// real API's 100,000 (its other per-batch limit, 256 MB, is the fake's
	// limit on a batch's body too).
	DefaultMaxBatchRequests = 100_000
	// DefaultMaxBatchQueue is the most batched requests one key may have
	// waiting or being processed: 100,000, the real API's value for its
	// lowest usage tier, where it applies per organization.
	DefaultMaxBatchQueue = 100_000
)

// DefaultPrices are illustrative (the list prices of a mid-sized Anthropic
// model when this was written), not a quote: $3 input, $15 output, $3.75
// cache writes, $0.30 cache reads per million tokens.
var DefaultPrices = results.APIPrices{InputUSDPerMTok: 3, OutputUSDPerMTok: 15, CacheWriteUSDPerMTok: 3.75, CacheReadUSDPerMTok: 0.30}

// An Episode is a stretch of time, measured from the server's creation,
// during which every request gets 529 overloaded_error.
type Episode struct {
	Start  time.Duration
	Length time.Duration
}

// Config describes one fake API. The zero value is not useful; start from
// DefaultConfig. All limits are per API key.
type Config struct {
	// RequestsPerMinute is the RPM limit: the request bucket refills at
	// RequestsPerMinute/60 requests a second (default 24,000).
	RequestsPerMinute float64
	// InputTokensPerMinute is the ITPM limit. Only uncached input counts:
	// input_tokens + cache_creation_input_tokens, never cache reads
	// (default 24,000,000).
	InputTokensPerMinute float64
	// OutputTokensPerMinute is the OTPM limit. A request is charged its
	// max_tokens when it is admitted, and the unused part is given back
	// when its reply is finished (default 3,000,000).
	OutputTokensPerMinute float64
	// Burst is how much of its refill each bucket holds when full, as a
	// time: RequestsPerMinute/60 × Burst requests and so on, but at least
	// 1 (default 100 ms). With 60 RPM and a Burst of 1 s the request bucket
	// holds one request: a 60 RPM limit is one request a second.
	Burst time.Duration
	// BaseLatency is how long every admitted request takes before its first
	// output token (default 50 ms).
	BaseLatency time.Duration
	// PerTokenLatency is how long each output token takes (default 2 ms),
	// so a 40-token reply takes 50 + 80 = 130 ms by default.
	PerTokenLatency time.Duration
	// Overloaded lists the episodes, counted from New, during which every
	// request is answered 529 overloaded_error without being charged
	// (default none).
	Overloaded []Episode
	// SpendLimit, when above 0, is how many requests a key may have
	// admitted; every later request gets the spend-limit 429, which has no
	// retry-after (default 0: no spend limit).
	SpendLimit int
	// CacheMinTokens is the smallest prefix that is cached (default 1024).
	CacheMinTokens int
	// CacheTTL is how long a cached prefix lives after its last use
	// (default 5 minutes).
	CacheTTL time.Duration
	// CacheTTL1h is how long a prefix written with cache_control
	// {"ttl": "1h"} lives after its last use (default 1 hour).
	CacheTTL1h time.Duration
	// Prices are what tokens cost (default DefaultPrices); /stats reports
	// each key's cost.
	Prices results.APIPrices
	// BatchRequestsPerSecond is how many batched requests of one key are
	// processed a second, one after another in the order the batches were
	// created (default 100).
	BatchRequestsPerSecond float64
	// MaxBatchRequests is the most requests one batch may hold (default
	// 100,000).
	MaxBatchRequests int
	// MaxBatchQueue is the most batched requests a key may have not yet
	// processed; a batch that would go over is refused with a 429
	// (default 100,000).
	MaxBatchQueue int
}

// DefaultConfig returns the scaled limits described at DefaultRequestsPerMinute,
// with no overload and no spend limit.
func DefaultConfig() Config {
	return Config{
		RequestsPerMinute:      DefaultRequestsPerMinute,
		InputTokensPerMinute:   DefaultInputTokensPerMinute,
		OutputTokensPerMinute:  DefaultOutputTokensPerMinute,
		Burst:                  DefaultBurst,
		BaseLatency:            DefaultBaseLatency,
		PerTokenLatency:        DefaultPerTokenLatency,
		CacheMinTokens:         DefaultCacheMinTokens,
		CacheTTL:               DefaultCacheTTL,
		CacheTTL1h:             DefaultCacheTTL1h,
		Prices:                 DefaultPrices,
		BatchRequestsPerSecond: DefaultBatchRequestsPerSecond,
		MaxBatchRequests:       DefaultMaxBatchRequests,
		MaxBatchQueue:          DefaultMaxBatchQueue,
	}
}

// Validate reports every setting that cannot describe a working API.
func (c Config) Validate() error {
	var errs []error
	for _, l := range []struct {
		name string
		v    float64
	}{
		{"requests per minute", c.RequestsPerMinute},
		{"input tokens per minute", c.InputTokensPerMinute},
		{"output tokens per minute", c.OutputTokensPerMinute},
	} {
		if !(l.v > 0) || math.IsInf(l.v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a positive number", l.name, l.v))
		}
	}
	if c.Burst <= 0 {
		errs = append(errs, fmt.Errorf("burst %s: want more than 0", c.Burst))
	}
	if c.BaseLatency < 0 || c.PerTokenLatency < 0 {
		errs = append(errs, fmt.Errorf("latency %s + %s per token: want 0 or more", c.BaseLatency, c.PerTokenLatency))
	}
	for i, e := range c.Overloaded {
		if e.Start < 0 || e.Length <= 0 {
			errs = append(errs, fmt.Errorf("overload episode %d (start %s, length %s): want a start of 0 or more and a positive length", i, e.Start, e.Length))
		}
	}
	if c.SpendLimit < 0 {
		errs = append(errs, fmt.Errorf("spend limit %d: want 0 (none) or more", c.SpendLimit))
	}
	if c.CacheMinTokens < 0 || c.CacheTTL < 0 || c.CacheTTL1h < 0 {
		errs = append(errs, fmt.Errorf("cache minimum %d tokens, TTLs %s and %s: want 0 or more", c.CacheMinTokens, c.CacheTTL, c.CacheTTL1h))
	}
	if p := c.Prices; p.InputUSDPerMTok < 0 || p.OutputUSDPerMTok < 0 || p.CacheWriteUSDPerMTok < 0 || p.CacheReadUSDPerMTok < 0 {
		errs = append(errs, fmt.Errorf("prices %+v: want 0 or more", p))
	}
	if !(c.BatchRequestsPerSecond > 0) || math.IsInf(c.BatchRequestsPerSecond, 0) {
		errs = append(errs, fmt.Errorf("batch requests per second %v: want a positive number", c.BatchRequestsPerSecond))
	}
	if c.MaxBatchRequests < 1 || c.MaxBatchQueue < 1 {
		errs = append(errs, fmt.Errorf("batch limits %d requests a batch, %d queued: want 1 or more", c.MaxBatchRequests, c.MaxBatchQueue))
	}
	return errors.Join(errs...)
}

// Limits returns c's rate limits.
func (c Config) Limits() results.APILimits {
	return results.APILimits{
		RequestsPerMinute:      c.RequestsPerMinute,
		InputTokensPerMinute:   c.InputTokensPerMinute,
		OutputTokensPerMinute:  c.OutputTokensPerMinute,
		BurstMS:                float64(c.Burst) / float64(time.Millisecond),
		RequestBurst:           c.capacity(c.RequestsPerMinute),
		InputTokenBurst:        c.capacity(c.InputTokensPerMinute),
		OutputTokenBurst:       c.capacity(c.OutputTokensPerMinute),
		BatchRequestsPerSecond: c.BatchRequestsPerSecond,
		MaxBatchRequests:       c.MaxBatchRequests,
		MaxBatchQueue:          c.MaxBatchQueue,
		Prices:                 c.Prices,
	}
}

// capacity is what a bucket refilling at perMinute holds when full.
func (c Config) capacity(perMinute float64) float64 {
	return max(1, perMinute/60*c.Burst.Seconds())
}
