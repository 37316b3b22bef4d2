package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"ratelab/results"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testConfig is a small, slow API: 60 requests, 6000 input tokens and 6000
// output tokens a minute, buckets of one second, replies at once.
func testConfig() Config {
	c := DefaultConfig()
	c.RequestsPerMinute = 60
	c.InputTokensPerMinute = 6000
	c.OutputTokensPerMinute = 6000
	c.Burst = time.Second
	c.BaseLatency, c.PerTokenLatency = 0, 0
	return c
}

func newServer(t *testing.T, c Config) *Server {
	t.Helper()
	s, err := New(c)
	require.NoError(t, err)
	return s
}

// words returns a prompt text of exactly n tokens (4n characters).
func words(n int, tag string) string {
	s := strings.Repeat(tag+" lorem ipsum dolor sit amet ", 4*n/len(tag)+4*n)
	return s[:4*n]
}

// params returns a one-message request of exactly tokens input tokens.
func params(tokens, maxTokens int) MessageParams {
	return MessageParams{
		Model: "claude-fake", MaxTokens: maxTokens,
		Messages: []MessageParam{{Role: "user", Content: Blocks{Text(words(tokens, "q"))}}},
	}
}

// post sends body (a value to encode, or raw []byte) to path with key and
// returns the answer once the handler is done.
func post(s *Server, key, path string, body any) *httptest.ResponseRecorder {
	return postCtx(context.Background(), s, key, path, body)
}

func postCtx(ctx context.Context, s *Server, key, path string, body any) *httptest.ResponseRecorder {
	raw, ok := body.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			panic(err)
		}
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(raw))
	r.Header.Set(HeaderVersion, "2023-06-01")
	if key != "" {
		r.Header.Set(HeaderAPIKey, key)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func decodeMessage(t *testing.T, w *httptest.ResponseRecorder) Message {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, "status; body %s", w.Body)
	var m Message
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
	return m
}

func apiError(w *httptest.ResponseRecorder) *APIError {
	return ReadError(w.Result())
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no RPM", func(c *Config) { c.RequestsPerMinute = 0 }},
		{"negative ITPM", func(c *Config) { c.InputTokensPerMinute = -1 }},
		{"no OTPM", func(c *Config) { c.OutputTokensPerMinute = 0 }},
		{"no burst", func(c *Config) { c.Burst = 0 }},
		{"negative latency", func(c *Config) { c.BaseLatency = -time.Millisecond }},
		{"empty episode", func(c *Config) { c.Overloaded = []Episode{{Start: time.Second}} }},
		{"negative spend limit", func(c *Config) { c.SpendLimit = -1 }},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		tt.change(&c)
		assert.Error(t, c.Validate(), "%s: Validate() = nil; want an error", tt.name)
		_, err := New(c)
		assert.Error(t, err, "%s: New accepted an invalid config", tt.name)
	}
	l := DefaultConfig().Limits()
	assert.Equal(t, 40.0, l.RequestBurst, "default request burst: 400/s × 100 ms")
	assert.Equal(t, 40000.0, l.InputTokenBurst, "default input burst: 400,000/s × 100 ms")
}

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want int
	}{{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"héllo wörld!", 3}, {strings.Repeat("x", 4000), 1000}} {
		assert.Equal(t, tt.want, TextTokens(tt.s), "TextTokens(%q)", tt.s)
	}
	p := MessageParams{
		Model: "m", MaxTokens: 10,
		System: Blocks{Text("abcde"), Text("abc")}, // 2 + 1
		Messages: []MessageParam{
			{Role: "user", Content: Blocks{Text("abcdefgh")}},          // 2
			{Role: "assistant", Content: Blocks{Text("a"), Text("b")}}, // 1 + 1
		},
	}
	assert.Equal(t, 7, CountTokens(p), "CountTokens sums ⌈runes/4⌉ over every block")

	for n := range 100 {
		assert.Equal(t, n, TextTokens(replyText(n)), "a reply of %d tokens has TextTokens %d", n, n)
	}
	seen := map[int]bool{}
	for i := range 200 {
		q := params(5, 1000)
		q.Messages[0].Content[0].Text += strconv.Itoa(i)
		n := ReplyTokens(q)
		assert.Equal(t, n, ReplyTokens(q), "ReplyTokens is deterministic")
		assert.True(t, n >= minReply && n < minReply+replySpan, "ReplyTokens = %d; want 16 to 63", n)
		seen[n] = true
		q.MaxTokens = 5
		assert.Equal(t, 5, ReplyTokens(q), "max_tokens cuts the reply")
	}
	assert.Greater(t, len(seen), 30, "reply lengths should vary with the prompt")
}

func TestBlocksJSON(t *testing.T) {
	var p MessageParams
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","max_tokens":5,"system":"be brief",
		"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"yo","cache_control":{"type":"ephemeral"}}]}]}`), &p))
	assert.Equal(t, Blocks{Text("be brief")}, p.System, "a string system prompt is one text block")
	assert.Equal(t, Blocks{Text("hi")}, p.Messages[0].Content, "string content is one text block")
	require.NotNil(t, p.Messages[1].Content[0].CacheControl)
	out, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"system":[{"type":"text","text":"be brief"}]`, "blocks are written as arrays")

	out, err = json.Marshal(MessageParams{Model: "m", MaxTokens: 1, Messages: []MessageParam{{Role: "user", Content: Blocks{Text("x")}}}})
	require.NoError(t, err)
	assert.NotContains(t, string(out), "system", "an empty system prompt is left out")
}

func TestMessageAndHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.BaseLatency, c.PerTokenLatency = 50*time.Millisecond, 2*time.Millisecond
		s := newServer(t, c)
		p := params(100, 1000)
		start := time.Now()
		w := post(s, "k", "/v1/messages", p)
		out := ReplyTokens(p)
		assert.Equal(t, 50*time.Millisecond+time.Duration(out)*2*time.Millisecond, time.Since(start), "latency = base + per token × output")
		m := decodeMessage(t, w)
		assert.Equal(t, "message", m.Type)
		assert.Equal(t, "assistant", m.Role)
		assert.Equal(t, "claude-fake", m.Model)
		assert.True(t, strings.HasPrefix(m.ID, "msg_"), "id %q", m.ID)
		assert.Equal(t, "end_turn", m.StopReason)
		assert.Equal(t, Usage{InputTokens: 100, OutputTokens: out}, m.Usage)
		assert.Equal(t, out, TextTokens(m.Text()), "the reply's text has output_tokens tokens")
		assert.True(t, strings.HasPrefix(w.Header().Get(HeaderRequestID), "req_"), "request-id header")

		rl := ParseRateLimits(w.Header())
		now := time.Now()
		// 1 request of 1; 100 input tokens of 100 (refilled 5 over ~150 ms);
		// output: 1000 max_tokens charged, out used, refund capped at 100.
		assert.Equal(t, RateLimit{Known: true, Limit: 60, Remaining: 0, Reset: rl.Requests.Reset}, rl.Requests)
		assert.Equal(t, int64(6000), rl.InputTokens.Limit)
		// Output: max_tokens 1000 charged at admission (100 − 1000), refilled
		// for the latency at 100 a second, the unused 1000 − out given back.
		refill := 100 * (50*time.Millisecond + time.Duration(out)*2*time.Millisecond).Seconds()
		assert.InDelta(t, min(100, 100-float64(out)+refill), float64(rl.OutputTokens.Remaining), 1,
			"the unused output is given back when the reply is done")
		assert.True(t, rl.Requests.Reset.After(now), "requests reset %v after now %v: the bucket is empty", rl.Requests.Reset, now)
		assert.WithinDuration(t, start.Add(time.Second), rl.Requests.Reset, time.Millisecond, "the request bucket is full 1 s after the take")

		// A max_tokens reply is cut.
		p = params(10, 3)
		m = decodeMessage(t, post(s, "other", "/v1/messages", p))
		assert.Equal(t, "max_tokens", m.StopReason)
		assert.Equal(t, 3, m.Usage.OutputTokens)
	})
}

func TestRequestBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 120 // 2 a second, burst 2
		s := newServer(t, c)
		p := params(1, 5)
		for i := range 2 {
			assert.Equal(t, 200, post(s, "k", "/v1/messages", p).Code, "request %d of the burst", i)
		}
		w := post(s, "k", "/v1/messages", p)
		e := apiError(w)
		assert.Equal(t, 429, e.StatusCode)
		assert.Equal(t, ErrorRateLimit, e.Type)
		assert.Equal(t, time.Second, e.RetryAfter, "retry-after: 0.5 s rounded up to whole seconds")
		assert.Equal(t, "1", w.Header().Get(HeaderRetryAfter))
		assert.Equal(t, 200, post(s, "other", "/v1/messages", p).Code, "limits are per key")

		time.Sleep(499 * time.Millisecond)
		assert.Equal(t, 429, post(s, "k", "/v1/messages", p).Code, "after 499 ms not one request has dripped in")
		time.Sleep(time.Millisecond)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", p).Code, "after 500 ms one request has")
		time.Sleep(time.Hour)
		for range 2 {
			assert.Equal(t, 200, post(s, "k", "/v1/messages", p).Code, "an idle bucket holds its burst")
		}
		assert.Equal(t, 429, post(s, "k", "/v1/messages", p).Code, "and no more")
		st := s.KeyStats("k")
		assert.Equal(t, results.APIKeyStats{Requests: 8, Completed: 5, RateLimited: 3, LimitedByRequests: 3, MaxInFlight: 1,
			InputTokens: 5, OutputTokens: st.OutputTokens, CostUSD: s.Config().Prices.Cost(5, 0, 0, st.OutputTokens)}, st)
	})
}

func TestInputTokenBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, testConfig()) // 100 input tokens a second, burst 100
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(80, 5)).Code)
		time.Sleep(time.Second) // the request bucket refills
		w := post(s, "k", "/v1/messages", params(80, 5))
		require.Equal(t, 200, w.Code, "after 1 s the input bucket holds 100 again")
		time.Sleep(time.Second)
		assert.Equal(t, int64(99), ParseRateLimits(post(s, "k", "/v1/messages", params(1, 5)).Header()).InputTokens.Remaining,
			"after 1 s: 100, less the 1 just taken")
		time.Sleep(time.Second)

		// A prompt bigger than the bucket passes when the bucket is full, and
		// its debt delays the next.
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(250, 5)).Code, "a full bucket admits a prompt larger than the burst")
		time.Sleep(time.Second)
		w = post(s, "k", "/v1/messages", params(10, 5))
		e := apiError(w)
		assert.Equal(t, 429, e.StatusCode, "a debt of 150 tokens, 100 repaid after 1 s: 10 more take 0.6 s")
		assert.Equal(t, time.Second, e.RetryAfter, "(10 − (100 − 250 + 100)) / 100 = 0.6 s, rounded up")
		assert.Contains(t, e.Message, "input tokens")
		assert.Equal(t, int64(1), s.KeyStats("k").LimitedByInputTokens)
		time.Sleep(600 * time.Millisecond)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(10, 5)).Code)
	})
}

func TestOutputTokensCorrected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 6000
		c.OutputTokensPerMinute = 600 // 10 a second
		c.Burst = 10 * time.Second    // 100 output tokens
		c.BaseLatency = time.Second
		s := newServer(t, c)
		p := params(5, 100)
		out := ReplyTokens(p)
		require.Less(t, out, 100)

		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- post(s, "k", "/v1/messages", p) }()
		time.Sleep(500 * time.Millisecond)
		w := post(s, "k", "/v1/messages", params(5, 50))
		assert.Equal(t, 429, w.Code, "max_tokens 100 was charged at admission: 5 tokens left after 0.5 s")
		assert.Equal(t, int64(1), s.KeyStats("k").LimitedByOutputTokens)
		first := <-done
		require.Equal(t, 200, first.Code)
		rl := ParseRateLimits(first.Header())
		assert.Equal(t, int64(10+100-out), rl.OutputTokens.Remaining,
			"after 1 s: 10 refilled plus the %d of max_tokens 100 not used", 100-out)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(5, 10+100-out)).Code, "the refund can be spent at once")
	})
}

func TestCaching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 6000
		c.InputTokensPerMinute = 6_000_000
		c.BaseLatency = time.Second
		s := newServer(t, c)
		prefix := words(2000, "instructions")
		cached := func(unique string) MessageParams {
			return MessageParams{
				Model: "m", MaxTokens: 20,
				System:   Blocks{{Type: "text", Text: prefix, CacheControl: Ephemeral()}},
				Messages: []MessageParam{{Role: "user", Content: Blocks{Text(unique)}}},
			}
		}
		key, tokens, ok := CachePrefix(cached("a"))
		require.True(t, ok)
		assert.Equal(t, 2000, tokens)
		key2, _, _ := CachePrefix(cached("something else"))
		assert.Equal(t, key, key2, "the prefix key does not depend on what follows the prefix")
		_, _, ok = CachePrefix(params(3, 3))
		assert.False(t, ok, "no cache_control, no prefix")

		// Two requests before the first reply is done both write the cache.
		var wg sync.WaitGroup
		var a, b Message
		wg.Go(func() { a = decodeMessage(t, post(s, "k", "/v1/messages", cached("abcd"))) })
		wg.Go(func() { b = decodeMessage(t, post(s, "k", "/v1/messages", cached("efgh"))) })
		wg.Wait()
		assert.Equal(t, Usage{InputTokens: 1, CacheCreationInputTokens: 2000, OutputTokens: a.Usage.OutputTokens,
			CacheCreation: CacheCreation{Ephemeral5mInputTokens: 2000}}, a.Usage)
		assert.Equal(t, 2000, b.Usage.CacheCreationInputTokens, "the cache is readable only once the writing reply is done")

		m := decodeMessage(t, post(s, "k", "/v1/messages", cached("ijkl")))
		assert.Equal(t, Usage{InputTokens: 1, CacheReadInputTokens: 2000, OutputTokens: m.Usage.OutputTokens}, m.Usage, "now the prefix is read from the cache")
		st := s.KeyStats("k")
		assert.Equal(t, int64(4003), st.UncachedInputTokens(), "reads are free: 2 × 2001 written + 1")
		assert.Equal(t, int64(2000), st.CacheReadInputTokens)

		other := decodeMessage(t, post(s, "other", "/v1/messages", cached("mnop")))
		assert.Equal(t, 2000, other.Usage.CacheCreationInputTokens, "each key has its own cache")

		// Reads refresh the TTL; five idle minutes expire it.
		time.Sleep(4 * time.Minute)
		assert.Equal(t, 2000, decodeMessage(t, post(s, "k", "/v1/messages", cached("x"))).Usage.CacheReadInputTokens)
		time.Sleep(4 * time.Minute)
		assert.Equal(t, 2000, decodeMessage(t, post(s, "k", "/v1/messages", cached("y"))).Usage.CacheReadInputTokens, "the read 4 min ago refreshed the TTL")
		time.Sleep(6 * time.Minute)
		assert.Equal(t, 2000, decodeMessage(t, post(s, "k", "/v1/messages", cached("z"))).Usage.CacheCreationInputTokens, "expired after 5 idle minutes")

		// A marked prefix under CacheMinTokens is not cached.
		small := cached("q")
		small.System[0].Text = words(500, "short")
		for range 2 {
			assert.Equal(t, Usage{InputTokens: 501, OutputTokens: ReplyTokens(small)},
				decodeMessage(t, post(s, "k", "/v1/messages", small)).Usage)
		}
	})
}

func TestCachedTokensAreFreeForITPM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 6000
		c.InputTokensPerMinute = 60_000 // 1000 a second, burst 1000
		c.OutputTokensPerMinute = 600_000
		c.CacheMinTokens = 100
		s := newServer(t, c)
		p := MessageParams{
			Model: "m", MaxTokens: 20,
			System:   Blocks{{Type: "text", Text: words(900, "sys"), CacheControl: Ephemeral()}},
			Messages: []MessageParam{{Role: "user", Content: Blocks{Text(words(50, "u"))}}},
		}
		assert.Equal(t, 200, post(s, "k", "/v1/messages", p).Code, "950 tokens fit the full bucket")
		time.Sleep(time.Second)
		for i := range 20 {
			assert.Equal(t, 200, post(s, "k", "/v1/messages", p).Code, "cached request %d costs 50 tokens", i)
		}
		assert.Equal(t, 429, post(s, "k", "/v1/messages", p).Code, "1000 tokens were spent on 20 × 50")
	})
}

func TestErrors(t *testing.T) {
	s := newServer(t, testConfig())
	good := params(5, 10)
	tests := []struct {
		name string
		body any
		want string
	}{
		{"malformed JSON", []byte(`{"model":`), "invalid JSON"},
		{"no model", MessageParams{MaxTokens: 5, Messages: good.Messages}, "model"},
		{"no max_tokens", MessageParams{Model: "m", Messages: good.Messages}, "max_tokens"},
		{"negative max_tokens", MessageParams{Model: "m", MaxTokens: -1, Messages: good.Messages}, "max_tokens"},
		{"no messages", MessageParams{Model: "m", MaxTokens: 5}, "messages"},
		{"bad role", MessageParams{Model: "m", MaxTokens: 5, Messages: []MessageParam{{Role: "system", Content: Blocks{Text("x")}}}}, "role"},
		{"empty content", MessageParams{Model: "m", MaxTokens: 5, Messages: []MessageParam{{Role: "user"}}}, "content"},
		{"empty text", MessageParams{Model: "m", MaxTokens: 5, Messages: []MessageParam{{Role: "user", Content: Blocks{Text("")}}}}, "non-empty"},
		{"image block", []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","text":"x"}]}]}`), "text"},
		{"streaming without messages", []byte(`{"model":"m","max_tokens":5,"stream":true,"messages":[]}`), "messages"},
		{"five breakpoints", MessageParams{Model: "m", MaxTokens: 5, Messages: []MessageParam{{Role: "user", Content: Blocks{
			{Type: "text", Text: "a", CacheControl: Ephemeral()}, {Type: "text", Text: "b", CacheControl: Ephemeral()},
			{Type: "text", Text: "c", CacheControl: Ephemeral()}, {Type: "text", Text: "d", CacheControl: Ephemeral()},
			{Type: "text", Text: "e", CacheControl: Ephemeral()}}}}}, "maximum of 4"},
		{"four breakpoints and a top-level one", MessageParams{Model: "m", MaxTokens: 5, CacheControl: Ephemeral(), Messages: []MessageParam{{Role: "user", Content: Blocks{
			{Type: "text", Text: "a", CacheControl: Ephemeral()}, {Type: "text", Text: "b", CacheControl: Ephemeral()},
			{Type: "text", Text: "c", CacheControl: Ephemeral()}, {Type: "text", Text: "d", CacheControl: Ephemeral()},
			Text("e")}}}}, "maximum of 4"},
		{"unknown ttl", MessageParams{Model: "m", MaxTokens: 5, Messages: []MessageParam{{Role: "user", Content: Blocks{
			{Type: "text", Text: "a", CacheControl: &CacheControl{Type: "ephemeral", TTL: "10m"}}}}}}, "ttl"},
		{"1h after 5m", MessageParams{Model: "m", MaxTokens: 5, System: Blocks{{Type: "text", Text: "s", CacheControl: Ephemeral()}},
			CacheControl: Ephemeral1h(), Messages: []MessageParam{{Role: "user", Content: Blocks{Text("a")}}}}, "must not come after"},
		{"bad top-level cache_control", []byte(`{"model":"m","max_tokens":5,"cache_control":{"type":"persistent"},"messages":[{"role":"user","content":"x"}]}`), "cache_control"},
	}
	for _, tt := range tests {
		w := post(s, "k", "/v1/messages", tt.body)
		var body map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "%s: the body is JSON", tt.name)
		assert.Equal(t, "error", body["type"], "%s: body type", tt.name)
		e := apiError(w)
		assert.Equal(t, 400, e.StatusCode, "%s: status", tt.name)
		assert.Equal(t, ErrorInvalidRequest, e.Type, "%s: error type", tt.name)
		assert.Contains(t, e.Message, tt.want, "%s: message", tt.name)
		assert.Zero(t, e.RetryAfter, "%s: a 400 has no retry-after", tt.name)
		assert.NotEmpty(t, e.RequestID, "%s: request-id", tt.name)
		assert.True(t, ParseRateLimits(w.Header()).Requests.Known, "%s: rate-limit headers on every answer", tt.name)
	}
	assert.Equal(t, int64(len(tests)), s.KeyStats("k").Invalid)
	assert.Zero(t, s.KeyStats("k").Completed)

	w := post(s, "", "/v1/messages", good)
	assert.Empty(t, w.Header().Get(HeaderShouldRetry), "a 401 leaves retrying to the status")
	e := apiError(w)
	assert.Equal(t, 401, e.StatusCode)
	assert.Equal(t, ErrorAuthentication, e.Type)
	e = apiError(post(s, "k", "/v1/complete", good))
	assert.Equal(t, 404, e.StatusCode)
	assert.Equal(t, ErrorNotFound, e.Type)
	e = apiError(post(s, "k", "/v1/messages", bytes.Repeat([]byte("x"), maxBody+1)))
	assert.Equal(t, 413, e.StatusCode)
	assert.Equal(t, ErrorRequestTooLarge, e.Type)
}

func TestSpendLimit(t *testing.T) {
	c := testConfig()
	c.RequestsPerMinute = 6000
	c.SpendLimit = 2
	s := newServer(t, c)
	for range 2 {
		require.Equal(t, 200, post(s, "k", "/v1/messages", params(1, 5)).Code)
	}
	w := post(s, "k", "/v1/messages", params(1, 5))
	assert.Empty(t, w.Header().Get(HeaderRetryAfter), "the spend-limit 429 has no retry-after")
	assert.Contains(t, w.Body.String(), `"details":{"error_code":"enforced_spend_limit_reached"}`)
	e := apiError(w)
	assert.Equal(t, 429, e.StatusCode)
	assert.Equal(t, ErrorRateLimit, e.Type)
	assert.True(t, e.SpendLimit(), "ReadError reads error.details.error_code")
	assert.Contains(t, e.Error(), ErrorCodeSpendLimit)
	st := s.KeyStats("k")
	assert.Equal(t, int64(1), st.SpendLimited)
	assert.Equal(t, int64(1), st.TooManyRequests())
	assert.Zero(t, st.RateLimited)
}

func TestOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 6000
		c.Overloaded = []Episode{{Start: time.Second, Length: 2 * time.Second}}
		s := newServer(t, c)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(1, 5)).Code, "before the episode")
		time.Sleep(1500 * time.Millisecond)
		e := apiError(post(s, "k", "/v1/messages", params(1, 5)))
		assert.Equal(t, StatusOverloaded, e.StatusCode, "during the episode")
		assert.Equal(t, ErrorOverloaded, e.Type)
		time.Sleep(1500 * time.Millisecond)
		assert.Equal(t, 200, post(s, "k", "/v1/messages", params(1, 5)).Code, "after the episode")
		st := s.KeyStats("k")
		assert.Equal(t, int64(1), st.Overloaded)
		assert.Equal(t, int64(2), st.InputTokens, "a 529 charges nothing")
	})
}

func TestCountTokens(t *testing.T) {
	s := newServer(t, testConfig())
	p := params(1234, 0) // count_tokens needs no max_tokens
	for range 3 {
		w := post(s, "k", "/v1/messages/count_tokens", p)
		require.Equal(t, 200, w.Code, "body %s", w.Body)
		var tc TokenCount
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &tc))
		assert.Equal(t, TokenCount{InputTokens: 1234}, tc)
	}
	assert.Equal(t, 200, post(s, "k", "/v1/messages", params(100, 5)).Code, "count_tokens spends no limit")
	assert.Equal(t, int64(3), s.KeyStats("k").CountTokensCalls)
	assert.Equal(t, 400, post(s, "k", "/v1/messages/count_tokens", []byte("{")).Code)
}

func TestStatsAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testConfig()
		c.RequestsPerMinute = 6000
		c.BaseLatency, c.PerTokenLatency = 100*time.Millisecond, 10*time.Millisecond
		s := newServer(t, c)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { postCtx(ctx, s, "k", "/v1/messages", params(2, 20)) })
		}
		time.Sleep(50 * time.Millisecond)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/stats?key=k", nil))
		var st Stats
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &st))
		assert.Equal(t, int64(3), st.Keys["k"].InFlight)
		assert.Equal(t, 6000.0, st.Limits.RequestsPerMinute)
		time.Sleep(150 * time.Millisecond) // 100 ms base + 10 tokens of 10 ms
		cancel()
		wg.Wait()
		k := s.KeyStats("k")
		assert.Equal(t, int64(3), k.Cancelled)
		assert.Equal(t, int64(0), k.InFlight)
		assert.Equal(t, int64(3), k.MaxInFlight)
		assert.Equal(t, int64(30), k.OutputTokens, "a cancelled reply is charged the tokens generated: 10 each")
	})
}

func TestParseHelpers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"0", 0}, {"-2", 0}, {"soon", 0}, {"1.5", 1500 * time.Millisecond},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{now.Add(-time.Second).Format(http.TimeFormat), 0},
		{"99999999999999999999", time.Duration(1<<63 - 1)},
	} {
		assert.Equal(t, tt.want, ParseRetryAfter(tt.v, now), "ParseRetryAfter(%q)", tt.v)
	}

	h := http.Header{}
	h.Set(HeaderInputTokensLimit, "600000")
	h.Set(HeaderInputTokensRemaining, "1234")
	h.Set(HeaderInputTokensReset, "2026-01-02T03:04:05.250Z")
	h.Set(HeaderRequestsLimit, "many")
	h.Set(HeaderRequestsRemaining, "3")
	rl := ParseRateLimits(h)
	assert.Equal(t, RateLimit{Known: true, Limit: 600000, Remaining: 1234, Reset: now.Add(250 * time.Millisecond)}, rl.InputTokens)
	assert.Equal(t, RateLimit{}, rl.Requests, "an unreadable limit is not Known")
	assert.Equal(t, RateLimit{}, rl.OutputTokens, "a missing limit is not Known")

	resp := &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("upstream down\n"))}
	e := ReadError(resp)
	assert.Equal(t, &APIError{StatusCode: 503, Type: "service_unavailable", Message: "upstream down"}, e)
	resp = &http.Response{StatusCode: 529, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}
	assert.Equal(t, ErrorOverloaded, ReadError(resp).Type, "a bare 529 is overloaded")
}

func TestListen(t *testing.T) {
	s := newServer(t, testConfig())
	in, err := Listen(s, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	body, err := json.Marshal(params(10, 5))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, in.URL+"/v1/messages", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(HeaderAPIKey, "k")
	req.Header.Set(HeaderVersion, "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var m Message
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	assert.Equal(t, 10, m.Usage.InputTokens)
	require.NoError(t, in.Close())
	require.NoError(t, in.Close(), "Close is idempotent")
}

// The memo of parsed bodies answers exactly as a fresh parse does: the
// same body to count_tokens and then to messages is judged by each path's
// rules, a bad body stays bad, and the memo holds at most maxMemoParams.
func TestParamsMemoAnswersAsParsingDoes(t *testing.T) {
	s := newServer(t, testConfig())
	noMax := params(5, 0)
	require.Equal(t, 200, post(s, "k", "/v1/messages/count_tokens", noMax).Code)
	assert.Equal(t, 400, post(s, "k", "/v1/messages", noMax).Code, "max_tokens is required here, whatever count_tokens accepted")
	assert.Equal(t, 200, post(s, "k", "/v1/messages/count_tokens", noMax).Code)
	for range 2 {
		assert.Equal(t, 400, post(s, "k", "/v1/messages/count_tokens", []byte(`{"model":"claude-fake"}`)).Code, "no messages")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("random token counts from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 200 {
		n := 1 + rng.IntN(5000)
		fresh := newServer(t, testConfig())
		want := post(fresh, "k", "/v1/messages/count_tokens", params(n, 0)).Body.String()
		for range 2 {
			assert.Equal(t, want, post(s, "k", "/v1/messages/count_tokens", params(n, 0)).Body.String(), "%d tokens", n)
		}
	}
	big := params(40000, 0)
	raw, err := json.Marshal(big)
	require.NoError(t, err)
	require.Greater(t, len(raw), maxMemoBody)
	s.parsed.mu.Lock()
	held := len(s.parsed.byID)
	s.parsed.mu.Unlock()
	for range 2 {
		assert.JSONEq(t, `{"input_tokens":40000}`, post(s, "k", "/v1/messages/count_tokens", raw).Body.String())
	}
	s.parsed.mu.Lock()
	assert.Equal(t, held, len(s.parsed.byID), "a body over maxMemoBody is parsed every time, not held")
	s.parsed.mu.Unlock()
	for i := range maxMemoParams + 10 {
		p := params(1+i%7, 0)
		p.System = Blocks{Text(fmt.Sprint("body ", i))}
		post(s, "k", "/v1/messages/count_tokens", p)
	}
	s.parsed.mu.Lock()
	defer s.parsed.mu.Unlock()
	assert.LessOrEqual(t, len(s.parsed.byID), maxMemoParams)
}
