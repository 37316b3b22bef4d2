package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/vnet"
	"ratelab/provider"
	"ratelab/results"
)

// The tally puts each call in the timeline by the time it returned at: a
// message in OK, an error or a panic in Failed, a call cut short by the
// time limit in neither.
func TestJudgeTallyTimeline(t *testing.T) {
	limited := &provider.APIError{StatusCode: 429, Type: "rate_limit_error"}
	type call struct {
		err       error
		at        time.Duration
		cancelled bool // the strategy's time limit had passed
	}
	for _, tc := range []struct {
		name   string
		calls  []call
		want   *results.JudgeTimeline
		client results.JudgeTally
	}{
		{"no calls", nil, nil, results.JudgeTally{}},
		{"messages by the time they returned", []call{{nil, 10 * time.Millisecond, false}, {nil, 260 * time.Millisecond, false}, {nil, 740 * time.Millisecond, false}},
			&results.JudgeTimeline{BinMS: 250, OK: []int64{1, 1, 1}}, results.JudgeTally{OK: 3}},
		{"errors and panics fail", []call{{limited, 100 * time.Millisecond, false}, {&panicError{"Create panicked: boom"}, 300 * time.Millisecond, false}, {nil, 0, false}},
			&results.JudgeTimeline{BinMS: 250, OK: []int64{1, 0}, Failed: []int64{1, 1}},
			results.JudgeTally{OK: 1, Failed: 2, Errors: map[string]int{"429 rate_limit_error": 1, "panic": 1}}},
		{"unfinished calls have no time", []call{{nil, 100 * time.Millisecond, false}, {context.DeadlineExceeded, 20 * time.Second, true}},
			&results.JudgeTimeline{BinMS: 250, OK: []int64{1}}, results.JudgeTally{OK: 1, Unfinished: 1}},
		{"an answer after the limit still counts", []call{{limited, 600 * time.Millisecond, true}},
			&results.JudgeTimeline{BinMS: 250, OK: []int64{0, 0, 0}, Failed: []int64{0, 0, 1}},
			results.JudgeTally{Failed: 1, Errors: map[string]int{"429 rate_limit_error": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, cancel := context.WithCancel(context.Background())
			cancel()
			tl := newJudgeTally()
			for _, c := range tc.calls {
				ctx := context.Background()
				if c.cancelled {
					ctx = done
				}
				err := c.err
				if c.cancelled && errors.Is(err, context.DeadlineExceeded) {
					err = ctx.Err()
				}
				tl.record(ctx, err, c.at)
			}
			assert.Equal(t, tc.want, tl.timeline(), "timeline after %v", tc.calls)
			assert.Equal(t, tc.client, tl.result(), "tally after %v", tc.calls)
		})
	}
}

// mostDone is when all but the last 2% of the judgments had returned a
// message, in any order of recording, errors aside; 0 while fewer have.
func TestJudgeTallyMostDone(t *testing.T) {
	tl := newJudgeTally()
	limited := &provider.APIError{StatusCode: 429, Type: "rate_limit_error"}
	// 100 judgments: the 98th message decides. Record 97 messages at
	// 1..97 ms in reverse, and a 429 at 1 ms.
	for i := 97; i >= 1; i-- {
		tl.record(context.Background(), nil, time.Duration(i)*time.Millisecond)
	}
	tl.record(context.Background(), limited, time.Millisecond)
	assert.Zero(t, tl.mostDone(100), "97 of 100 returned a message")
	tl.record(context.Background(), nil, 5*time.Second) // the refused one, retried
	tl.record(context.Background(), nil, 98*time.Millisecond)
	assert.Equal(t, 98*time.Millisecond, tl.mostDone(100), "the 98th message, not the last")
	assert.Equal(t, 40*time.Millisecond, tl.mostDone(40), "of 40, 2% is less than one: none left out")
	assert.Zero(t, newJudgeTally().mostDone(0))
}

// callAll measures each call from just before the first, on its own clock:
// in a synctest bubble the times are exact. Each fake call takes the
// milliseconds in its prompt's MaxTokens and fails if its model is "fail".
func TestJudgeCallAllTimeline(t *testing.T) {
	call := func(ctx context.Context, p provider.MessageParams) error {
		if err := sleepCtx(ctx, time.Duration(p.MaxTokens)*time.Millisecond); err != nil {
			return err
		}
		if p.Model == "fail" {
			return &provider.APIError{StatusCode: 529, Type: "overloaded_error"}
		}
		return nil
	}
	prompts := []provider.MessageParams{{MaxTokens: 240}, {MaxTokens: 50}, {MaxTokens: 300}, {MaxTokens: 300}, {Model: "fail", MaxTokens: 600}, {MaxTokens: 5000}}
	for _, tc := range []struct {
		firstAlone bool
		want       results.JudgeTimeline
	}{
		// All at once: 50 and 240 ms, 300 twice, the failure at 600.
		{false, results.JudgeTimeline{BinMS: 250, OK: []int64{2, 2, 0}, Failed: []int64{0, 0, 1}}},
		// The first alone, the rest 240 ms later: 240, then 290, 540
		// twice, the failure at 840.
		{true, results.JudgeTimeline{BinMS: 250, OK: []int64{1, 1, 2, 0}, Failed: []int64{0, 0, 0, 1}}},
	} {
		synctest.Test(t, func(t *testing.T) {
			// The last call outlasts the time limit of one second.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			tl, wall := callAll(ctx, call, prompts, tc.firstAlone)
			assert.Equal(t, time.Second, wall, "callAll(firstAlone=%t): wall", tc.firstAlone)
			got := tl.timeline()
			require.NotNil(t, got)
			assert.Equal(t, tc.want, *got, "callAll(firstAlone=%t): timeline", tc.firstAlone)
			assert.Equal(t, results.JudgeTally{OK: 4, Failed: 1, Unfinished: 1, Errors: map[string]int{"529 overloaded_error": 1}}, tl.result())
		})
	}
}

// creatorFunc adapts a function to Creator.
type creatorFunc func(ctx context.Context, p provider.MessageParams) (*provider.Message, error)

func (f creatorFunc) Create(ctx context.Context, p provider.MessageParams) (*provider.Message, error) {
	return f(ctx, p)
}

// Judge runs each strategy with its own key against the API and takes its
// counts from the API's /stats; a polite client that panics is reported,
// not fatal.
func TestJudge(t *testing.T) {
	srv, err := provider.New(provider.DefaultConfig())
	require.NoError(t, err)
	in, err := provider.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	w := results.JudgeWorkload{N: 12, PromptTokens: 40, PrefixTokens: 10, MaxTokens: 4, MaxInFlight: 4}
	var built []PoliteOptions
	rep, err := Judge(context.Background(), JudgeOptions{
		URL: in.URL, InProcess: true, Workload: w, Strategies: []string{"naive", "polite", "polite-cached"}, Client: "test",
		NewPolite: func(o PoliteOptions) Creator {
			built = append(built, o)
			if len(built) == 2 {
				panic("not implemented")
			}
			return creatorFunc(func(ctx context.Context, p provider.MessageParams) (*provider.Message, error) {
				body, err := json.Marshal(p)
				if err != nil {
					return nil, err
				}
				return &provider.Message{}, postMessage(ctx, o.HTTPClient, o.BaseURL, o.APIKey, body)
			})
		},
	})
	require.NoError(t, err)
	assert.Equal(t, results.JudgeSchema, rep.Schema)
	assert.Equal(t, "test", rep.Client)
	assert.Equal(t, w, rep.Workload)
	assert.Equal(t, provider.DefaultConfig().Limits(), rep.Limits)
	require.Len(t, rep.Strategies, 3)
	naive, polite, cached := rep.Strategies[0], rep.Strategies[1], rep.Strategies[2]
	for _, st := range []results.JudgeStrategy{naive, polite} {
		assert.Equal(t, int64(12), st.Completed, "%s: completed, from the API", st.Name)
		assert.Equal(t, int64(12), st.Server.Completed, "%s: the API's count for its key", st.Name)
		assert.Equal(t, 12, st.Client.OK, "%s: what the calls returned", st.Name)
		assert.Empty(t, st.Error, st.Name)
		assert.Positive(t, st.MinSeconds, st.Name)
	}
	assert.NotEqual(t, naive.Key, polite.Key, "each strategy has its own key")
	require.Len(t, built, 2)
	assert.Equal(t, PoliteOptions{BaseURL: in.URL, APIKey: polite.Key, HTTPClient: built[0].HTTPClient, RPM: rep.Limits.RequestsPerMinute,
		ITPM: rep.Limits.InputTokensPerMinute, MaxInFlight: 4}, built[0])
	assert.Equal(t, "NewPoliteClient panicked: not implemented", cached.Error)
	assert.Equal(t, int64(12), cached.Lost)
}

func TestJudgeOptions(t *testing.T) {
	w := DefaultJudgeWorkload()
	for _, tc := range []struct {
		o    JudgeOptions
		want string
	}{
		{JudgeOptions{URL: "http://127.0.0.1:1", Workload: w, Strategies: []string{"eager"}}, `unknown strategy "eager"`},
		{JudgeOptions{URL: "http://127.0.0.1:1", Workload: results.JudgeWorkload{N: 1, PromptTokens: 1, MaxTokens: 1}}, "must be at least 1"},
		{JudgeOptions{URL: "http://127.0.0.1:1", Workload: results.JudgeWorkload{N: 1, PromptTokens: 10, PrefixTokens: 10, MaxTokens: 1, MaxInFlight: 1}}, "PrefixTokens 10"},
		{JudgeOptions{URL: "http://127.0.0.1:1", Workload: w}, "need NewPolite"},
		{JudgeOptions{URL: "http://example.com", Workload: w, Strategies: []string{"naive"}}, "example.com"},
	} {
		_, err := Judge(context.Background(), tc.o)
		assert.ErrorContains(t, err, tc.want, "Judge(%+v)", tc.o)
	}
}

// The batch strategy splits the workload at the API's per-batch limit,
// judges all of it through the Batches API and pays half what the naive
// client pays at full price for the same prompts.
func TestJudgeBatch(t *testing.T) {
	c := provider.DefaultConfig()
	c.BatchRequestsPerSecond = 1000
	c.MaxBatchRequests = 5
	srv, err := provider.New(c)
	require.NoError(t, err)
	in, err := provider.Listen(srv, "127.0.0.1:0")
	require.NoError(t, err)
	defer in.Close()
	w := results.JudgeWorkload{N: 12, PromptTokens: 40, PrefixTokens: 10, MaxTokens: 4, MaxInFlight: 4}
	rep, err := Judge(context.Background(), JudgeOptions{URL: in.URL, InProcess: true, Workload: w, Strategies: []string{"naive", "batch"}})
	require.NoError(t, err)
	require.Len(t, rep.Strategies, 2)
	naive, batch := rep.Strategies[0], rep.Strategies[1]
	assert.Empty(t, batch.Error)
	assert.Equal(t, int64(12), batch.Completed)
	assert.Equal(t, int64(12), batch.Attempts)
	assert.Zero(t, batch.Lost)
	assert.Equal(t, 12, batch.Client.OK)
	assert.Equal(t, int64(3), batch.Server.Batches, "12 requests in batches of at most 5")
	assert.Zero(t, batch.Server.Requests, "nothing through POST /v1/messages")
	assert.Equal(t, 12.0/1000, batch.MinSeconds)
	assert.Equal(t, "batch_requests", batch.MinBoundBy)
	assert.GreaterOrEqual(t, batch.WallSeconds, batch.MinSeconds)

	require.Equal(t, int64(12), naive.Completed)
	assert.Equal(t, naive.Server.InputTokens, batch.Server.BatchInputTokens, "the same prompts")
	assert.Equal(t, naive.Server.OutputTokens, batch.Server.BatchOutputTokens, "the same replies")
	assert.Positive(t, naive.CostUSD)
	assert.InDelta(t, naive.CostUSD/2, batch.CostUSD, 1e-12, "half price")
}

// In virtual time, as the grader runs it (internal/vsession), the batch
// strategy takes its minimum, N over the batch throughput, plus at most
// one poll: the processing is lazy and the polls are timers.
func TestJudgeBatchVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		url, dial := ServeAPIVirtual(t, provider.DefaultConfig())
		w := results.JudgeWorkload{N: 300, PromptTokens: 40, PrefixTokens: 10, MaxTokens: 4, MaxInFlight: 4}
		rep, err := Judge(context.Background(), JudgeOptions{URL: url, Workload: w, Strategies: []string{"batch"}, Dial: dial})
		require.NoError(t, err)
		b := rep.Strategies[0]
		assert.Equal(t, int64(300), b.Completed)
		assert.Equal(t, 3.0, b.MinSeconds, "300 at 100 a second")
		assert.GreaterOrEqual(t, b.WallSeconds, 3.0)
		assert.LessOrEqual(t, b.WallSeconds, 3.0+JudgeBatchPoll.Seconds())
		assert.Equal(t, 0.5*provider.DefaultPrices.Cost(300*40, 0, 0, b.Server.BatchOutputTokens), b.CostUSD)
	})
}

// Against an API whose /stats reports no batch throughput (one from before
// batches), the batch strategy fails every judgment with a reason and no
// minimum, and the others are unaffected.
func TestJudgeBatchUnsupported(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(provider.Stats{Limits: results.APILimits{RequestsPerMinute: 60, InputTokensPerMinute: 6000}})
	}))
	defer hs.Close()
	w := results.JudgeWorkload{N: 3, PromptTokens: 40, PrefixTokens: 10, MaxTokens: 4, MaxInFlight: 4}
	rep, err := Judge(context.Background(), JudgeOptions{URL: hs.URL, Workload: w, Strategies: []string{"batch"}})
	require.NoError(t, err)
	b := rep.Strategies[0]
	assert.Equal(t, results.JudgeTally{Failed: 3, Errors: map[string]int{"the API reports no Message Batches API in its /stats": 3}}, b.Client)
	assert.Zero(t, b.MinSeconds)
	assert.Equal(t, int64(3), b.Lost)
}

// ServeAPIVirtual serves a fake API of cfg on an in-memory network, for a
// test inside a synctest bubble, until the test ends. It returns the API's
// URL and the dialer that reaches it. (Exported for the package's external
// tests only: it is in a _test file.)
func ServeAPIVirtual(t *testing.T, cfg provider.Config) (string, func(ctx context.Context, network, addr string) (net.Conn, error)) {
	t.Helper()
	srv, err := provider.New(cfg)
	require.NoError(t, err)
	n := &vnet.Network{}
	l, err := n.Listen("127.0.0.1:1")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() {
		_ = hs.Close()
		srv.Close()
	})
	return "http://127.0.0.1:1", n.DialContext
}
