// Package provider is a fake of Anthropic's Messages API, faithful in the
// parts that decide whether a batch job finishes: the request and response
// JSON, a reply streamed as server-sent events when asked (stream: true), per-key rate limits on requests, input tokens
// and output tokens kept as token buckets, the rate-limit headers on every
// response, retry-after and x-should-retry on 429, the error bodies (429,
// 529, 400 and the spend-limit 429), prompt caching (per block or top-level,
// with 5-minute and 1-hour TTLs), the count_tokens endpoint, and the headers
// a real client relies on: the key in x-api-key or Authorization: Bearer, a
// required anthropic-version, a request-id on every answer. The official Go
// SDK (anthropic-sdk-go v2) works against it unmodified; sdk_test.go proves
// it.
//
// The model is not a model: a reply's length is a fixed function of the
// request (see ReplyTokens), its text is filler, and producing it takes
// BaseLatency plus PerTokenLatency per output token. Tokens are counted by
// a documented rule, about four characters to a token (see TextTokens), so
// a client can count them exactly.
//
// The wire types (MessageParams, Message, APIError, RateLimits) and the
// helpers that read a response (ReadError, ParseRateLimits) live here so the
// fake, task 5's client in both trees and cmd/judge agree on them.
//
// A Server is an http.Handler for
//
//	POST /v1/messages               create a message
//	POST /v1/messages/count_tokens  {"input_tokens": N}, exact for this fake
//	GET  /stats                     what every API key did (Stats)
//	PUT  /faults?key=K              fail some of K's requests on purpose
//	                                (a results.APIFaultPlan; the lab's own)
//
// Create it with New; serve it with Listen or any http.Server.
package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Names of the request and response headers the API uses.
const (
	// HeaderAPIKey carries the caller's API key; limits are per key. The
	// key may come instead as "Authorization: Bearer KEY", which is how the
	// official Go SDK v2 sends it (anthropic-sdk-go/v2 option/requestoption.go,
	// WithAPIKey).
	HeaderAPIKey        = "x-api-key"
	HeaderAuthorization = "authorization" // "Bearer KEY", the other way to send the key
	// HeaderVersion is required on every request to the API; without it the
	// answer is 400 invalid_request_error, as Anthropic's. Any value is
	// accepted (the Go SDK v2.15.0 sends 2026-10-21, task 5's client
	// 2023-06-01).
	HeaderVersion    = "anthropic-version"
	HeaderRequestID  = "request-id"  // on every response, such as req_fake000000000000002a
	HeaderRetryAfter = "retry-after" // on a rate-limit 429: whole seconds to wait
	// HeaderShouldRetry tells a client whether to retry an error: "true" on
	// a rate-limit 429, a 529 and a 500, "false" on the spend-limit 429,
	// absent elsewhere. The official SDKs obey it over the status
	// (anthropic-sdk-go/v2 internal/requestconfig/requestconfig.go,
	// shouldRetry and retryHeader).
	HeaderShouldRetry = "x-should-retry"

	HeaderRequestsLimit     = "anthropic-ratelimit-requests-limit"     // requests per minute
	HeaderRequestsRemaining = "anthropic-ratelimit-requests-remaining" // requests that would be admitted now
	HeaderRequestsReset     = "anthropic-ratelimit-requests-reset"     // RFC 3339: when the bucket is full again

	HeaderInputTokensLimit     = "anthropic-ratelimit-input-tokens-limit"
	HeaderInputTokensRemaining = "anthropic-ratelimit-input-tokens-remaining"
	HeaderInputTokensReset     = "anthropic-ratelimit-input-tokens-reset"

	HeaderOutputTokensLimit     = "anthropic-ratelimit-output-tokens-limit"
	HeaderOutputTokensRemaining = "anthropic-ratelimit-output-tokens-remaining"
	HeaderOutputTokensReset     = "anthropic-ratelimit-output-tokens-reset"
)

// Values of error.type in an error body, as Anthropic names them.
const (
	ErrorInvalidRequest  = "invalid_request_error" // 400: the request itself is wrong; do not retry
	ErrorAuthentication  = "authentication_error"  // 401: no x-api-key nor Authorization: Bearer
	ErrorNotFound        = "not_found_error"       // 404
	ErrorRequestTooLarge = "request_too_large"     // 413
	ErrorRateLimit       = "rate_limit_error"      // 429: a rate limit, or the spend limit
	ErrorAPI             = "api_error"             // 500
	ErrorOverloaded      = "overloaded_error"      // 529: the service is overloaded for everyone
)

// ErrorCodeSpendLimit is error.details.error_code of the 429 that says the
// key reached its spend limit. That 429 has no retry-after and carries
// x-should-retry: false: retrying cannot help until the limit is raised, and
// the official SDKs then do not retry it.
const ErrorCodeSpendLimit = "enforced_spend_limit_reached"

// StatusOverloaded is the status of an overloaded_error. It is not in
// net/http because it is Anthropic's own.
const StatusOverloaded = 529

// CacheControl marks the end of a prompt prefix to cache. Type is
// "ephemeral", the only kind. TTL is "5m" (the default, also when empty) or
// "1h": how long the prefix lives after its last use (Config.CacheTTL and
// Config.CacheTTL1h). As in the API, a 1h breakpoint may not come after a 5m
// one.
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// The values of CacheControl.TTL.
const (
	TTL5m = "5m"
	TTL1h = "1h"
)

// Ephemeral returns the cache_control marker of a cached prefix, with the
// default TTL of 5 minutes.
func Ephemeral() *CacheControl { return &CacheControl{Type: "ephemeral"} }

// Ephemeral1h returns the cache_control marker of a prefix cached for an
// hour.
func Ephemeral1h() *CacheControl { return &CacheControl{Type: "ephemeral", TTL: TTL1h} }

// A TextBlock is one piece of text in a prompt or a reply. In a prompt,
// CacheControl on a block makes everything up to and including it a prefix
// to cache (see CachePrefix).
type TextBlock struct {
	Type         string        `json:"type"` // "text"
	Text         string        `json:"text"`
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// Text returns a text block holding s, without cache_control.
func Text(s string) TextBlock { return TextBlock{Type: "text", Text: s} }

// Blocks is the content of a system prompt or a message. In JSON it is
// either a string, which is one text block, or an array of blocks; it is
// always written as an array.
type Blocks []TextBlock

// UnmarshalJSON accepts a string or an array of text blocks.
func (b *Blocks) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = Blocks{Text(s)}
		return nil
	}
	var blocks []TextBlock
	if err := json.Unmarshal(data, &blocks); err != nil {
		return err
	}
	*b = blocks
	return nil
}

// A MessageParam is one turn of the conversation sent to the API.
type MessageParam struct {
	Role    string `json:"role"` // "user" or "assistant"
	Content Blocks `json:"content"`
}

// MessageParams is the body of POST /v1/messages (and, without max_tokens,
// of count_tokens).
type MessageParams struct {
	Model     string         `json:"model"`
	MaxTokens int            `json:"max_tokens"` // the most output tokens the reply may have; at least 1
	System    Blocks         `json:"system,omitempty"`
	Messages  []MessageParam `json:"messages"`
	// CacheControl, at the top level, is automatic prompt caching: it puts
	// a breakpoint on the last block of the last message, as if that block
	// carried it (unless it carries its own), and takes one of the four
	// breakpoints. The Go SDK documents it on MessageNewParams.CacheControl
	// (anthropic-sdk-go/v2 message.go: "Top-level cache control
	// automatically applies a cache_control marker to the last cacheable
	// block in the request").
	CacheControl *CacheControl `json:"cache_control,omitempty"`
	// Stream asks for the reply as server-sent events (message_start, a
	// text block's start, one text_delta per output token as it is
	// generated, its stop, message_delta with the stop reason and the
	// output tokens, message_stop) instead of one JSON body.
	Stream bool `json:"stream,omitempty"`
}

// Usage is what a request cost. InputTokens counts only the input that was
// neither read from nor written to the cache; the whole prompt is
// InputTokens + CacheCreationInputTokens + CacheReadInputTokens.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	// CacheCreation splits CacheCreationInputTokens by TTL; the API always
	// sends it (anthropic-sdk-go/v2 message.go, Usage.CacheCreation).
	CacheCreation CacheCreation `json:"cache_creation"`
}

// CacheCreation is usage.cache_creation: the tokens written to the cache
// for five minutes and for an hour. They add up to
// Usage.CacheCreationInputTokens.
type CacheCreation struct {
	Ephemeral5mInputTokens int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1hInputTokens int `json:"ephemeral_1h_input_tokens"`
}

// Message is the body of a 200 answer to POST /v1/messages.
type Message struct {
	ID           string      `json:"id"`   // msg_…
	Type         string      `json:"type"` // "message"
	Role         string      `json:"role"` // "assistant"
	Model        string      `json:"model"`
	Content      []TextBlock `json:"content"`
	StopReason   string      `json:"stop_reason"` // "end_turn", or "max_tokens" when the reply was cut
	StopSequence *string     `json:"stop_sequence"`
	Usage        Usage       `json:"usage"`
}

// Text returns the text of all of m's content blocks, joined.
func (m *Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TokenCount is the body of a 200 answer to count_tokens.
type TokenCount struct {
	InputTokens int `json:"input_tokens"`
}

// ErrorBody is the body of every error answer:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
type ErrorBody struct {
	Type      string      `json:"type"` // "error"
	Error     ErrorDetail `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

// ErrorDetail is the "error" object of an ErrorBody.
type ErrorDetail struct {
	Type    string        `json:"type"`
	Message string        `json:"message"`
	Details *ErrorDetails `json:"details,omitempty"`
}

// ErrorDetails says more about some errors, such as the spend limit.
type ErrorDetails struct {
	ErrorCode string `json:"error_code"`
}

// An APIError is an answer other than 200, as ReadError decodes it.
type APIError struct {
	StatusCode int    // such as 429
	Type       string // error.type, such as rate_limit_error
	Message    string // error.message
	ErrorCode  string // error.details.error_code, such as enforced_spend_limit_reached; often empty
	// RetryAfter is what the retry-after header asked for, 0 when it was
	// absent or unreadable.
	RetryAfter time.Duration
	RequestID  string // the request-id header
}

// Error returns the status, the error type and the message, such as
// "429 rate_limit_error: This request would exceed …".
func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.StatusCode, e.Type, e.Message)
	if e.ErrorCode != "" {
		msg += " (" + e.ErrorCode + ")"
	}
	return msg
}

// SpendLimit reports whether e is the spend-limit 429, which no retry fixes.
func (e *APIError) SpendLimit() bool { return e.ErrorCode == ErrorCodeSpendLimit }

// maxErrorBody is the most of an error body ReadError reads.
const maxErrorBody = 64 << 10

// ReadError reads (up to 64 KiB) and closes the body of resp, an answer
// other than 200, and returns the APIError it describes. A body that is not
// an Anthropic error body still gives an APIError, with the status text as
// its type and the body as its message.
func ReadError(resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	e := &APIError{
		StatusCode: resp.StatusCode,
		RetryAfter: ParseRetryAfter(resp.Header.Get(HeaderRetryAfter), time.Now()),
		RequestID:  resp.Header.Get(HeaderRequestID),
	}
	var eb ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Type != "" {
		e.Type, e.Message = eb.Error.Type, eb.Error.Message
		if eb.Error.Details != nil {
			e.ErrorCode = eb.Error.Details.ErrorCode
		}
		return e
	}
	e.Type = strings.ToLower(strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "_"))
	if resp.StatusCode == StatusOverloaded {
		e.Type = ErrorOverloaded
	}
	e.Message = strings.TrimSpace(string(body))
	return e
}

// ParseRetryAfter reads a retry-after value: whole seconds, or an HTTP date
// (RFC 9110) measured from now. It returns 0 for an empty, malformed or
// negative value, or a date in the past, and saturates a huge number of
// seconds at the largest Duration.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		// Whole seconds, the form RFC 9110 gives, read exactly: a float
		// loses whole nanoseconds past 2^53.
		if n >= uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(n) * time.Second
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if !(secs > 0) {
			return 0
		}
		if secs >= math.MaxInt64/float64(time.Second) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// A RateLimit is what the three headers of one limit said.
type RateLimit struct {
	// Known reports whether the response carried this limit's headers;
	// when false the other fields are zero.
	Known bool
	// Limit is the limit per minute, such as 600 requests or 600000 input
	// tokens.
	Limit int64
	// Remaining is how much the bucket held when the response was sent: the
	// requests or tokens that could have been admitted at once.
	Remaining int64
	// Reset is when the bucket will be full again if nothing is spent.
	Reset time.Time
}

// RateLimits is what the anthropic-ratelimit-* headers of one response said.
type RateLimits struct {
	Requests     RateLimit
	InputTokens  RateLimit
	OutputTokens RateLimit
}

// ParseRateLimits reads the anthropic-ratelimit-* headers of h. A limit is
// Known only if its limit and remaining headers are both valid integers;
// an unreadable reset is left zero.
func ParseRateLimits(h http.Header) RateLimits {
	return RateLimits{
		Requests:     parseRateLimit(h, HeaderRequestsLimit, HeaderRequestsRemaining, HeaderRequestsReset),
		InputTokens:  parseRateLimit(h, HeaderInputTokensLimit, HeaderInputTokensRemaining, HeaderInputTokensReset),
		OutputTokens: parseRateLimit(h, HeaderOutputTokensLimit, HeaderOutputTokensRemaining, HeaderOutputTokensReset),
	}
}

func parseRateLimit(h http.Header, limit, remaining, reset string) RateLimit {
	l, err1 := strconv.ParseInt(h.Get(limit), 10, 64)
	r, err2 := strconv.ParseInt(h.Get(remaining), 10, 64)
	if err1 != nil || err2 != nil {
		return RateLimit{}
	}
	rl := RateLimit{Known: true, Limit: l, Remaining: r}
	if t, err := time.Parse(time.RFC3339, h.Get(reset)); err == nil {
		rl.Reset = t
	}
	return rl
}
