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
)

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
}

// DefaultConfig returns the scaled limits described at DefaultRequestsPerMinute,
// with no overload and no spend limit.
func DefaultConfig() Config {
	return Config{
		RequestsPerMinute:     DefaultRequestsPerMinute,
		InputTokensPerMinute:  DefaultInputTokensPerMinute,
		OutputTokensPerMinute: DefaultOutputTokensPerMinute,
		Burst:                 DefaultBurst,
		BaseLatency:           DefaultBaseLatency,
		PerTokenLatency:       DefaultPerTokenLatency,
		CacheMinTokens:        DefaultCacheMinTokens,
		CacheTTL:              DefaultCacheTTL,
		CacheTTL1h:            DefaultCacheTTL1h,
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
	return errors.Join(errs...)
}

// Limits returns c's rate limits.
func (c Config) Limits() results.APILimits {
	return results.APILimits{
		RequestsPerMinute:     c.RequestsPerMinute,
		InputTokensPerMinute:  c.InputTokensPerMinute,
		OutputTokensPerMinute: c.OutputTokensPerMinute,
		BurstMS:               float64(c.Burst) / float64(time.Millisecond),
		RequestBurst:          c.capacity(c.RequestsPerMinute),
		InputTokenBurst:       c.capacity(c.InputTokensPerMinute),
		OutputTokenBurst:      c.capacity(c.OutputTokensPerMinute),
	}
}

// capacity is what a bucket refilling at perMinute holds when full.
func (c Config) capacity(perMinute float64) float64 {
	return max(1, perMinute/60*c.Burst.Seconds())
}
