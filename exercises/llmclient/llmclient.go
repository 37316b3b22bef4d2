// Package llmclient is a polite client for an LLM API with rate limits
// (Anthropic's Messages API, or the fake in package provider). It paces
// itself with its own token buckets so the API rarely has to refuse it, caps
// how many requests it has in flight, retries what is worth retrying and
// slows down when the API's headers say a limit is close.
package llmclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"ratelab/lab"
	"ratelab/provider"
)

// Task 5 goal: the client the lesson's Problem needed. Thousands of
// relevance judgments should finish in about the time the limits allow,
// with almost no 429s: wait for your own buckets instead of being refused,
// keep only as many requests in flight as help, retry 429, 529 and timeouts
// with full jitter and at least retry-after, and never retry a request the
// API will refuse again.
//
// Fill in every TODO(task5) below, then run
//
//	go test -tags exercises ./exercises/llmclient
//
// The tests are shared with the reference solution; do not edit them. They
// run in testing/synctest bubbles, where time is fake: read the clock with
// time.Now, wait with time.Sleep or time.NewTimer, and never sleep while
// holding a sync.Mutex (a goroutine waiting for a mutex stops the fake
// clock, and the test hangs). To make goroutines wait their turn, use a
// channel. The package provider has what you need to talk to the API:
// provider.CountTokens, provider.CachePrefix, provider.ReadError (turns an
// answer that is not 200 into a *provider.APIError, with its retry-after)
// and provider.ParseRateLimits. You may add private types, functions and
// methods.

// A WaitingBucket is a token bucket that makes callers wait for tokens
// instead of refusing them: the client-side pacer of the lesson's
// AsyncTokenBucket. It holds at most burst tokens, starts full and gains
// rate tokens per second.
//
// Take(ctx, n) returns once n tokens are the caller's. Callers are served
// first come, first served: a Take waits for the tokens promised to every
// Take that came before it, so a large request is never starved by a stream
// of small ones. An n larger than the burst is treated as the burst, since
// the bucket could never hold more.
//
// A WaitingBucket is safe for concurrent use by multiple goroutines.
type WaitingBucket struct {
	// Goal: the state of one bucket, and what protects it.
	// TODO(task5): choose the fields: the settings, the tokens and when
	// you last counted them, and a mutex. Task 3's TokenBucket is a good
	// start; think about what "promised to an earlier caller" looks like.
}

// NewWaitingBucket returns a full WaitingBucket that holds at most burst
// tokens and refills at rate tokens per second. It panics unless rate and
// burst are positive and finite.
func NewWaitingBucket(rate, burst float64) *WaitingBucket {
	// Goal: a bucket that is full now.
	// TODO(task5): check the arguments, set your fields, remove the panic.
	lab.NotImplemented(5, "NewWaitingBucket")
	return nil
}

// Take waits until n tokens are the caller's and takes them. An n above the
// burst takes the burst; an n of zero or less (or NaN) returns nil at once.
//
// If ctx ends first, Take returns ctx.Err() and takes nothing: the tokens
// it had been promised go back to the bucket for callers that come later.
// (Callers already waiting keep their turn; they are not moved earlier.) If
// ctx is already done, Take returns ctx.Err() without taking anything, even
// from a full bucket.
func (b *WaitingBucket) Take(ctx context.Context, n float64) error {
	// Goal: wait exactly as long as the tokens take to drip in, in turn,
	// and give up when ctx ends.
	// TODO(task5): refill lazily, work out how long this caller must wait
	// given everyone who came before it, then wait outside the lock for
	// that long or for ctx, whichever comes first.
	lab.NotImplemented(5, "WaitingBucket.Take")
	return nil
}

// Defaults for the zero fields of Options, and the client's fixed settings.
const (
	DefaultBaseURL        = "https://api.anthropic.com"
	DefaultMaxInFlight    = 8
	DefaultMaxAttempts    = 6
	DefaultAttemptTimeout = 10 * time.Minute
	DefaultBaseBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff     = 8 * time.Second

	// BurstWindow is how much of its refill each of the client's buckets
	// holds: a fiftieth of a second, and at least one request or token.
	// It is deliberately small. The API's own buckets are small too, and a
	// client that spends a whole minute's allowance at once is refused for
	// most of it. Keeping ours well below the API's leaves room for
	// requests that reach it bunched up, after a stall of the client, the
	// network or the machine.
	BurstWindow = 20 * time.Millisecond

	// MaxHold is the longest one answer's headers make the client wait:
	// the pause its rate-limit headers ask for, and a retry-after, which
	// counts as MaxHold when it is longer. A server that asks for days has
	// made a mistake, and a client that believes it is stuck for days.
	MaxHold = time.Minute

	// APIVersion is the anthropic-version header every request carries.
	APIVersion = "2023-06-01"
)

// Options configure a PoliteClient. The zero value of each field (or any
// value ≤ 0) means its default.
type Options struct {
	// BaseURL is where the API is, such as http://127.0.0.1:8080; requests
	// go to BaseURL + "/v1/messages" (default DefaultBaseURL).
	BaseURL string
	// APIKey goes in the x-api-key header.
	APIKey string
	// HTTPClient sends the requests (default http.DefaultClient).
	HTTPClient *http.Client
	// RPM is the request limit per minute the client keeps to (0: none).
	RPM float64
	// ITPM is the input-token limit per minute the client keeps to,
	// counting only input that is not read from the prompt cache (0: none).
	ITPM float64
	// MaxInFlight is the most requests sent and not yet answered (default
	// 8). By Little's Law, the request rate times the latency is the most
	// that can help: at 10 requests a second of 5 s each, about 50.
	MaxInFlight int
	// MaxAttempts is the most attempts per Create, the first included
	// (default 6).
	MaxAttempts int
	// AttemptTimeout bounds one attempt; an attempt that times out is
	// retried (default 10 minutes).
	AttemptTimeout time.Duration
	// BaseBackoff and MaxBackoff shape the retries' full-jitter backoff:
	// before retry k (k = 0, 1, …) the client waits a uniformly random time
	// in [0, min(MaxBackoff, BaseBackoff × 2^k)] (defaults 500 ms and 8 s).
	// The doubling saturates at MaxBackoff, for any k and any BaseBackoff,
	// up to the largest Duration.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

func (o Options) withDefaults() Options {
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = DefaultBaseBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	return o
}

// A PoliteClient sends Messages API requests the way the lesson's "A
// well-behaved client" list says. For each attempt, Create
//
//  1. takes one of MaxInFlight slots (a semaphore), and holds it until the
//     answer is in;
//  2. waits while the last headers said a limit was nearly spent;
//  3. waits on its request bucket (RPM/60 a second) and its input-token
//     bucket (ITPM/60 a second) for the request's uncached input tokens,
//     one request at a time;
//  4. sends, with AttemptTimeout;
//  5. reads the rate-limit headers of the answer (see Create).
//
// Between attempts it holds no slot and no tokens.
//
// A PoliteClient is safe for concurrent use; one is meant to be shared by
// every goroutine of a job, since the limits are per API key.
type PoliteClient struct {
	opts     Options // with the defaults filled in
	endpoint string  // BaseURL + "/v1/messages"

	// Goal: what every Create shares.
	// TODO(task5): add the semaphore of MaxInFlight slots (a buffered
	// channel), the request and input-token buckets (none when the limit
	// is 0), a channel that lets one request at a time wait on them, the
	// time the headers told you to hold until, the cache prefixes the API
	// has shown it serves from its cache, and a mutex for the last two.
}

// NewPoliteClient returns a client for opts, with the defaults filled in.
func NewPoliteClient(opts Options) *PoliteClient {
	opts = opts.withDefaults()
	c := &PoliteClient{
		opts:     opts,
		endpoint: strings.TrimRight(opts.BaseURL, "/") + "/v1/messages",
	}
	// Goal: the semaphore and two small buckets.
	// TODO(task5): make the semaphore, and a WaitingBucket for each limit
	// that is set: RPM/60 requests a second, ITPM/60 tokens a second, each
	// holding BurstWindow of its refill (at least 1). Not a minute's worth:
	// the lesson's Figure 005 shows why. Then remove the panic.
	lab.NotImplemented(5, "NewPoliteClient")
	return c
}

// Create sends params to the Messages API and returns the reply.
//
// It estimates the request's input tokens exactly with provider.CountTokens
// (the fake's rule; for the real API, count_tokens) and leaves out the
// cached prefix (provider.CachePrefix) once an answer has shown the API
// serving that prefix from its cache, since cached reads do not count
// against ITPM. A prompt larger than the input bucket's burst is taken in
// pieces, so it waits its full share instead of slipping through as one
// burst.
//
// Create retries 429, 529, other 5xx and 408 answers, attempts that time
// out and connection errors, up to MaxAttempts attempts in all. Before
// retry k it waits the full-jitter backoff of Options. When the answer
// carried retry-after (APIError.RetryAfter: seconds, fractions and huge
// numbers included, or an HTTP date), that is a floor: the wait is the
// longer of the backoff and the retry-after plus a random extra of up to
// BaseBackoff, so a crowd told the same number does not come back in step.
// A retry-after longer than MaxHold counts as MaxHold, however large the
// number or far the date, and the sum saturates at the largest Duration
// instead of overflowing. It never retries the spend-limit 429 or any
// other 4xx: those come back as a *provider.APIError (use errors.As) at
// once. After the last attempt the error wraps that attempt's
// *provider.APIError, if it was one.
//
// After every answer, if its headers say the API holds fewer requests than
// 1, or fewer input tokens than this request's estimate, no attempt starts
// until the API will have refilled enough at its stated per-minute rate,
// or until the headers' reset time if that is sooner (at most MaxHold).
//
// If ctx ends, Create returns an error that wraps ctx.Err() (and the last
// attempt's error, if any).
func (c *PoliteClient) Create(ctx context.Context, params provider.MessageParams) (*provider.Message, error) {
	if _, err := url.ParseRequestURI(c.endpoint); err != nil {
		return nil, fmt.Errorf("llmclient: base URL: %w", err)
	}
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("llmclient: encode the request: %w", err)
	}
	// Goal: one attempt after another until one succeeds, one fails for
	// good, the attempts run out or ctx ends.
	// TODO(task5): the retry loop. Decide from the error (errors.As to a
	// *provider.APIError, or a transport error such as a timeout) whether
	// to retry; wait the longer of the full-jitter backoff and retry-after
	// (capped at MaxHold) plus its jitter, adding without overflow; stop
	// early when ctx ends. Each attempt follows the five steps in the
	// PoliteClient comment: take a slot, respect the hold, wait on the
	// buckets, send with c.send (below: it posts body once and returns the
	// answer's headers, and a *provider.APIError for any status but 200),
	// and learn from the answer's headers and usage. Let one request at a
	// time through the buckets (the others queue on a channel), and take a
	// prompt larger than the input bucket's burst in pieces of at most the
	// burst: otherwise requests collect their tokens side by side and go
	// out in a bunch.
	_, _ = body, c.send // for the loop you write
	lab.NotImplemented(5, "PoliteClient.Create")
	return nil, nil
}

// send posts body once. It returns the answer's header whenever there was
// an answer, and a *provider.APIError for any status but 200.
func (c *PoliteClient) send(ctx context.Context, body []byte) (*provider.Message, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", APIVersion)
	req.Header.Set(provider.HeaderAPIKey, c.opts.APIKey)
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.Header, provider.ReadError(resp)
	}
	defer resp.Body.Close()
	var m provider.Message
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, resp.Header, fmt.Errorf("decode the reply: %w", err)
	}
	return &m, resp.Header, nil
}
