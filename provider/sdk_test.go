package provider_test

// These tests drive the fake with the official Go SDK,
// github.com/anthropics/anthropic-sdk-go/v2 (v2.15.0, pinned in go.mod),
// unmodified: a change to the fake that breaks a real client fails here.
// The SDK files cited below are in the module cache, under
// github.com/anthropics/anthropic-sdk-go/v2@v2.15.0/.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/provider"
)

const (
	sdkKey   = "sk-ant-fake-sdk"
	sdkModel = "claude-fake"
	// callTimeout bounds every call of a test, its retries included.
	callTimeout = 10 * time.Second
)

// seen is one request as the fake received it.
type seen struct {
	at     time.Time
	path   string
	header http.Header
}

// fake is a provider.Server behind httptest on loopback, recording every
// request it receives before the server answers it.
type fake struct {
	srv *provider.Server
	url string

	mu   sync.Mutex
	reqs []seen
}

// sdkConfig is a fast fake: replies at once, generous limits, prefixes of 100
// tokens and more cached.
func sdkConfig() provider.Config {
	c := provider.DefaultConfig()
	c.BaseLatency, c.PerTokenLatency = 0, 0
	c.CacheMinTokens = 100
	return c
}

func startFake(t *testing.T, c provider.Config) *fake {
	t.Helper()
	s, err := provider.New(c)
	require.NoError(t, err)
	f := &fake{srv: s}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{at: time.Now(), path: r.URL.Path, header: r.Header.Clone()})
		f.mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	f.url = hs.URL
	return f
}

// requests returns what the fake received on path so far.
func (f *fake) requests(path string) []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seen
	for _, r := range f.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// client is the SDK's client as its README configures it, pointed at f.
func (f *fake) client(opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(f.url), option.WithAPIKey(sdkKey),
	}, opts...)...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// text returns a text of exactly n tokens as the fake counts them.
func text(n int, tag string) string {
	s := strings.Repeat(tag+" lorem ipsum dolor sit amet ", n)
	return s[:4*n]
}

func question(s string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: sdkModel, MaxTokens: 20,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))},
	}
}

// sdkError returns err as the SDK's *anthropic.Error, failing the test if it
// is not one.
func sdkError(t *testing.T, err error) *anthropic.Error {
	t.Helper()
	var e *anthropic.Error
	require.True(t, errors.As(err, &e), "want an *anthropic.Error, got %T: %v", err, err)
	return e
}

func TestSDKCreate(t *testing.T) {
	f := startFake(t, sdkConfig())
	c := f.client()
	prompt := text(37, "hello")
	var resp *http.Response
	m, err := c.Messages.New(ctx(t), question(prompt), option.WithResponseInto(&resp))
	require.NoError(t, err)

	p := provider.MessageParams{Model: sdkModel, MaxTokens: 20, Messages: []provider.MessageParam{
		{Role: "user", Content: provider.Blocks{provider.Text(prompt)}}}}
	out := provider.ReplyTokens(p)
	assert.Equal(t, "message", string(m.Type))
	assert.Equal(t, "assistant", string(m.Role))
	assert.True(t, strings.HasPrefix(m.ID, "msg_"), "id %q", m.ID)
	require.Len(t, m.Content, 1)
	assert.Equal(t, "text", m.Content[0].Type)
	assert.Len(t, m.Content[0].Text, 4*out, "the reply has %d tokens of 4 characters", out)
	assert.Equal(t, int64(37), m.Usage.InputTokens)
	assert.Equal(t, int64(out), m.Usage.OutputTokens)
	assert.Zero(t, m.Usage.CacheCreationInputTokens)
	assert.True(t, m.Usage.CacheCreation.JSON.Ephemeral5mInputTokens.Valid(), "usage.cache_creation is sent")
	assert.NotEmpty(t, resp.Header.Get(provider.HeaderRequestID))

	// What the SDK sent: the key as Authorization: Bearer (option/requestoption.go,
	// WithAPIKey) and anthropic-version (internal/requestconfig/requestconfig.go,
	// NewRequestConfig), which the fake requires.
	reqs := f.requests("/v1/messages")
	require.Len(t, reqs, 1)
	assert.Equal(t, "Bearer "+sdkKey, reqs[0].header.Get("Authorization"))
	assert.Empty(t, reqs[0].header.Get(provider.HeaderAPIKey))
	assert.NotEmpty(t, reqs[0].header.Get(provider.HeaderVersion))
	st := f.srv.KeyStats(sdkKey)
	assert.Equal(t, int64(1), st.Completed, "the bearer token is the key the limits are kept under")
}

func TestSDKCountTokens(t *testing.T) {
	f := startFake(t, sdkConfig())
	c := f.client()
	sys, q := text(120, "system"), "How many tokens is this question, exactly?"
	n, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{
		Model:    sdkModel,
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(sys)},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))},
	})
	require.NoError(t, err)
	want := provider.TextTokens(sys) + provider.TextTokens(q)
	assert.Equal(t, int64(want), n.InputTokens, "count_tokens is exact")

	params := question(q)
	params.System = []anthropic.TextBlockParam{{Text: sys}}
	m, err := c.Messages.New(ctx(t), params)
	require.NoError(t, err)
	assert.Equal(t, n.InputTokens, m.Usage.InputTokens, "and is what the call is charged")
}

// TestSDKRetryAfter: a 429 carries retry-after in whole seconds and
// x-should-retry: true; the SDK waits exactly retry-after before its retry
// (internal/requestconfig/requestconfig.go, retryDelay and
// parseRetryAfterHeader: retry-after-ms, else retry-after, used as is).
func TestSDKRetryAfter(t *testing.T) {
	c := sdkConfig()
	c.RequestsPerMinute = 60 // one request a second,
	c.Burst = time.Second    // and a bucket of one
	f := startFake(t, c)
	cl := f.client()
	_, err := cl.Messages.New(ctx(t), question("first"))
	require.NoError(t, err)
	var resp *http.Response
	_, err = cl.Messages.New(ctx(t), question("second"), option.WithResponseInto(&resp))
	require.NoError(t, err, "the SDK retried the 429 and got through")

	reqs := f.requests("/v1/messages")
	require.Len(t, reqs, 3, "first, second refused, second retried")
	gap := reqs[2].at.Sub(reqs[1].at)
	t.Logf("retry-after: 1 s; the fake saw the retry %s after the 429", gap)
	assert.GreaterOrEqual(t, gap, time.Second, "the SDK waited the whole retry-after")
	assert.Less(t, gap, 1500*time.Millisecond, "and not much more")
	assert.Equal(t, "1", reqs[2].header.Get("X-Stainless-Retry-Count"), "it was the SDK's own retry")
	st := f.srv.KeyStats(sdkKey)
	assert.Equal(t, int64(1), st.RateLimited)
	assert.Equal(t, int64(2), st.Completed)
}

// TestSDKOverloaded: a 529 is retried (shouldRetry: status >= 500) and, once
// the retries are spent, is an *anthropic.Error of type overloaded_error.
func TestSDKOverloaded(t *testing.T) {
	c := sdkConfig()
	c.Overloaded = []provider.Episode{{Start: 0, Length: time.Hour}}
	f := startFake(t, c)
	// One retry rather than the default two keeps the test under a second:
	// without retry-after the SDK backs off 0.5 s less up to a quarter.
	cl := f.client(option.WithMaxRetries(1))
	_, err := cl.Messages.New(ctx(t), question("anyone there?"))
	e := sdkError(t, err)
	assert.Equal(t, provider.StatusOverloaded, e.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeOverloadedError, e.Type())
	assert.Equal(t, "Overloaded", e.Message)
	assert.NotEmpty(t, e.RequestID)
	reqs := f.requests("/v1/messages")
	require.Len(t, reqs, 2, "the SDK retried the 529 once")
	assert.GreaterOrEqual(t, reqs[1].at.Sub(reqs[0].at), 375*time.Millisecond, "after its own backoff")
	assert.Equal(t, int64(2), f.srv.KeyStats(sdkKey).Overloaded)
}

// TestSDKSpendLimit: the spend-limit 429 says x-should-retry: false, which the
// SDK obeys over the status (internal/requestconfig/requestconfig.go,
// shouldRetry), so it is sent once, where a 429 would be sent three times.
func TestSDKSpendLimit(t *testing.T) {
	c := sdkConfig()
	c.SpendLimit = 1
	f := startFake(t, c)
	cl := f.client()
	_, err := cl.Messages.New(ctx(t), question("within the limit"))
	require.NoError(t, err)
	start := time.Now()
	_, err = cl.Messages.New(ctx(t), question("over the limit"))
	e := sdkError(t, err)
	assert.Less(t, time.Since(start), 300*time.Millisecond, "no backoff was waited")
	assert.Equal(t, http.StatusTooManyRequests, e.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeRateLimitError, e.Type())
	assert.Equal(t, anthropic.ErrorCodeEnforcedSpendLimitReached, e.ErrorCode())
	assert.Equal(t, "false", e.Response.Header.Get(provider.HeaderShouldRetry))
	assert.Empty(t, e.Response.Header.Get(provider.HeaderRetryAfter))
	assert.Equal(t, 2, len(f.requests("/v1/messages")), "the spend-limit 429 was not retried")
	assert.Equal(t, int64(1), f.srv.KeyStats(sdkKey).SpendLimited)
}

// TestSDKErrors: a 400 and a 404 parse as *anthropic.Error with their status,
// type, message and request-id, and are not retried.
func TestSDKErrors(t *testing.T) {
	f := startFake(t, sdkConfig())
	cl := f.client()
	p := question("x")
	p.System = []anthropic.TextBlockParam{{Text: "a", CacheControl: anthropic.CacheControlEphemeralParam{TTL: "2h"}}}
	_, err := cl.Messages.New(ctx(t), p)
	e := sdkError(t, err)
	assert.Equal(t, http.StatusBadRequest, e.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeInvalidRequestError, e.Type())
	assert.Contains(t, e.Message, "ttl")
	assert.True(t, strings.HasPrefix(e.RequestID, "req_"), "request-id %q", e.RequestID)
	assert.Equal(t, 1, len(f.requests("/v1/messages")), "a 400 is not retried")

	err = cl.Get(ctx(t), "v1/nowhere", nil, new(json.RawMessage))
	e = sdkError(t, err)
	assert.Equal(t, http.StatusNotFound, e.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeNotFoundError, e.Type())
	assert.NotEmpty(t, e.RequestID, "an unknown path has a request-id too")
}

// TestSDKCaching: a cache_control on a system block, with either TTL, and the
// top-level cache_control of MessageNewParams (automatic caching) read back in
// usage, with usage.cache_creation split by TTL.
func TestSDKCaching(t *testing.T) {
	c := sdkConfig()
	c.CacheTTL = 200 * time.Millisecond // "5m", scaled down; "1h" stays an hour
	f := startFake(t, c)
	cl := f.client()
	withSystem := func(q string, blocks ...anthropic.TextBlockParam) anthropic.MessageNewParams {
		p := question(q)
		p.System = blocks
		return p
	}
	block := func(s string, ttl anthropic.CacheControlEphemeralTTL) anthropic.TextBlockParam {
		cc := anthropic.NewCacheControlEphemeralParam()
		cc.TTL = ttl
		return anthropic.TextBlockParam{Text: s, CacheControl: cc}
	}
	usage := func(p anthropic.MessageNewParams) anthropic.Usage {
		t.Helper()
		m, err := cl.Messages.New(ctx(t), p)
		require.NoError(t, err)
		return m.Usage
	}
	long, short := text(300, "hour"), text(200, "minutes")

	t.Run("system block", func(t *testing.T) {
		u := usage(withSystem("q1", block(long, anthropic.CacheControlEphemeralTTLTTL1h)))
		assert.Equal(t, int64(300), u.CacheCreationInputTokens)
		assert.Equal(t, int64(300), u.CacheCreation.Ephemeral1hInputTokens)
		assert.Zero(t, u.CacheCreation.Ephemeral5mInputTokens)
		assert.Equal(t, int64(1), u.InputTokens, "q1 is the one uncached token")

		u = usage(withSystem("q2", block(short, "")))
		assert.Equal(t, int64(200), u.CacheCreation.Ephemeral5mInputTokens, "no ttl is 5m")
		assert.Zero(t, u.CacheCreation.Ephemeral1hInputTokens)

		u = usage(withSystem("q3", block(long, anthropic.CacheControlEphemeralTTLTTL1h)))
		assert.Equal(t, int64(300), u.CacheReadInputTokens)
		assert.Zero(t, u.CacheCreationInputTokens)

		time.Sleep(2 * c.CacheTTL) // the 5m entry expires, the 1h one lives
		u = usage(withSystem("q4", block(long, anthropic.CacheControlEphemeralTTLTTL1h)))
		assert.Equal(t, int64(300), u.CacheReadInputTokens, "the 1h prefix outlives CacheTTL")
		u = usage(withSystem("q5", block(short, anthropic.CacheControlEphemeralTTLTTL5m)))
		assert.Zero(t, u.CacheReadInputTokens, "the 5m prefix has expired")
		assert.Equal(t, int64(200), u.CacheCreation.Ephemeral5mInputTokens)

		// Both TTLs in one request: 1h up to the 1h breakpoint, 5m after.
		u = usage(withSystem("q6", block(text(150, "a"), anthropic.CacheControlEphemeralTTLTTL1h), block(text(120, "b"), anthropic.CacheControlEphemeralTTLTTL5m)))
		assert.Equal(t, int64(270), u.CacheCreationInputTokens)
		assert.Equal(t, int64(150), u.CacheCreation.Ephemeral1hInputTokens)
		assert.Equal(t, int64(120), u.CacheCreation.Ephemeral5mInputTokens)
	})

	t.Run("top-level", func(t *testing.T) {
		turn1 := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text(250, "document")))}
		auto := func(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
			return anthropic.MessageNewParams{Model: sdkModel, MaxTokens: 20, Messages: msgs,
				CacheControl: anthropic.NewCacheControlEphemeralParam()}
		}
		u := usage(auto(turn1))
		assert.Equal(t, int64(250), u.CacheCreationInputTokens, "the whole prompt, to its last block, is written")
		assert.Equal(t, int64(250), u.CacheCreation.Ephemeral5mInputTokens)
		assert.Zero(t, u.InputTokens)
		u = usage(auto(turn1))
		assert.Equal(t, int64(250), u.CacheReadInputTokens, "and read back")

		// The conversation grows: the breakpoint moves to the new last block
		// and the previous turn's prefix is still found.
		turn2 := append(turn1,
			anthropic.NewAssistantMessage(anthropic.NewTextBlock(text(30, "answer"))),
			anthropic.NewUserMessage(anthropic.NewTextBlock(text(80, "follow-up"))))
		u = usage(auto(turn2))
		assert.Equal(t, int64(250), u.CacheReadInputTokens)
		assert.Equal(t, int64(110), u.CacheCreationInputTokens)
	})
}

// TestRequiredHeaders uses plain net/http, since the SDK always sends a key
// and anthropic-version: without the version the answer is 400, without a key
// 401, and every answer, an unknown path's included, has a request-id.
func TestRequiredHeaders(t *testing.T) {
	f := startFake(t, sdkConfig())
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	send := func(method, path string, header map[string]string) (*http.Response, provider.ErrorBody) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx(t), method, f.url+path, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var eb provider.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		assert.NotEmpty(t, resp.Header.Get(provider.HeaderRequestID), "%s %s: request-id", method, path)
		return resp, eb
	}
	version := map[string]string{provider.HeaderVersion: "2023-06-01"}

	resp, eb := send("POST", "/v1/messages", map[string]string{provider.HeaderAPIKey: "k"})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, provider.ErrorInvalidRequest, eb.Error.Type)
	assert.Contains(t, eb.Error.Message, "anthropic-version")
	assert.Equal(t, resp.Header.Get(provider.HeaderRequestID), eb.RequestID)

	resp, _ = send("POST", "/v1/messages/count_tokens", map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "count_tokens too")

	resp, eb = send("POST", "/v1/messages", version)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, provider.ErrorAuthentication, eb.Error.Type)

	resp, _ = send("POST", "/v1/messages", map[string]string{provider.HeaderAPIKey: "k", provider.HeaderVersion: "2023-06-01"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "x-api-key works as well as Bearer")

	resp, eb = send("GET", "/v1/models", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "error", eb.Type)
	assert.Equal(t, provider.ErrorNotFound, eb.Error.Type)

	resp, _ = send("GET", "/stats", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the fake's own /stats needs no headers")
}

// TestSDKStreaming: stream: true answers with server-sent events that the
// SDK's streaming client reads unmodified (Messages.NewStreaming and
// Message.Accumulate, messageutil.go): the same text, usage and stop reason
// as a plain reply, one text_delta per output token, spaced by the fake's
// per-token latency as they are generated.
func TestSDKStreaming(t *testing.T) {
	c := sdkConfig()
	c.PerTokenLatency = 2 * time.Millisecond
	f := startFake(t, c)
	cl := f.client()
	prompt := text(40, "stream")
	plain, err := cl.Messages.New(ctx(t), question(prompt))
	require.NoError(t, err)

	began := time.Now()
	stream := cl.Messages.NewStreaming(ctx(t), question(prompt))
	var acc anthropic.Message
	var types []string
	var deltaAt []time.Duration
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "content_block_delta" {
			deltaAt = append(deltaAt, time.Since(began))
		}
		require.NoError(t, acc.Accumulate(ev))
	}
	require.NoError(t, stream.Err())
	out := int(plain.Usage.OutputTokens)
	require.Positive(t, out)
	assert.Equal(t, plain.Content[0].Text, acc.Content[0].Text, "the streamed text is the plain reply's")
	assert.Equal(t, plain.StopReason, acc.StopReason)
	assert.Equal(t, plain.Usage.OutputTokens, acc.Usage.OutputTokens)
	assert.Equal(t, plain.Usage.InputTokens, acc.Usage.InputTokens)
	assert.NotEmpty(t, acc.ID)
	assert.Len(t, deltaAt, out, "one text_delta per output token")
	assert.Equal(t, []string{"message_start", "content_block_start"}, types[:2])
	assert.Equal(t, []string{"content_block_stop", "message_delta", "message_stop"}, types[len(types)-3:])
	// Generated as they stream: the last token comes out tokens × 2 ms
	// after the first (less one), not all at once.
	if len(deltaAt) > 1 {
		assert.GreaterOrEqual(t, deltaAt[len(deltaAt)-1]-deltaAt[0], time.Duration(out-1)*c.PerTokenLatency)
	}
	st := f.srv.KeyStats(sdkKey)
	assert.Equal(t, int64(2), st.Completed)
	assert.Equal(t, int64(2*out), st.OutputTokens)
	assert.Zero(t, st.InFlight)
}

// A streamed reply the client abandons part way is charged the tokens
// generated so far and counted as cancelled, as a plain one.
func TestSDKStreamingAbandoned(t *testing.T) {
	c := sdkConfig()
	c.PerTokenLatency = 20 * time.Millisecond
	f := startFake(t, c)
	cl := f.client()
	sctx, cancel := context.WithCancel(ctx(t))
	stream := cl.Messages.NewStreaming(sctx, question(text(40, "leave")))
	deltas := 0
	for stream.Next() {
		if stream.Current().Type == "content_block_delta" {
			deltas++
			if deltas == 3 {
				cancel()
			}
		}
	}
	cancel()
	require.Eventually(t, func() bool { return f.srv.KeyStats(sdkKey).Cancelled == 1 }, 5*time.Second, 10*time.Millisecond)
	st := f.srv.KeyStats(sdkKey)
	assert.Zero(t, st.Completed)
	assert.Zero(t, st.InFlight)
	assert.GreaterOrEqual(t, st.OutputTokens, int64(3), "charged what was generated")
	assert.Less(t, st.OutputTokens, int64(20), "and not the whole reply")
}
