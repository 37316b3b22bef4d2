package main

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/provider"
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
		want   *provider.Timeline
		client provider.ClientTally
	}{
		{"no calls", nil, nil, provider.ClientTally{}},
		{"messages by the time they returned", []call{{nil, 10 * time.Millisecond, false}, {nil, 260 * time.Millisecond, false}, {nil, 740 * time.Millisecond, false}},
			&provider.Timeline{BinMS: 250, OK: []int64{1, 1, 1}}, provider.ClientTally{OK: 3}},
		{"errors and panics fail", []call{{limited, 100 * time.Millisecond, false}, {&panicError{"Create panicked: boom"}, 300 * time.Millisecond, false}, {nil, 0, false}},
			&provider.Timeline{BinMS: 250, OK: []int64{1, 0}, Failed: []int64{1, 1}},
			provider.ClientTally{OK: 1, Failed: 2, Errors: map[string]int{"429 rate_limit_error": 1, "panic": 1}}},
		{"unfinished calls have no time", []call{{nil, 100 * time.Millisecond, false}, {context.DeadlineExceeded, 20 * time.Second, true}},
			&provider.Timeline{BinMS: 250, OK: []int64{1}}, provider.ClientTally{OK: 1, Unfinished: 1}},
		{"an answer after the limit still counts", []call{{limited, 600 * time.Millisecond, true}},
			&provider.Timeline{BinMS: 250, OK: []int64{0, 0, 0}, Failed: []int64{0, 0, 1}},
			provider.ClientTally{Failed: 1, Errors: map[string]int{"429 rate_limit_error": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, cancel := context.WithCancel(context.Background())
			cancel()
			tl := newTally()
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

// callAll measures each call from just before the first, on its own clock:
// in a synctest bubble the times are exact. Each fake call takes the
// milliseconds in its prompt's MaxTokens and fails if its model is "fail".
func TestJudgeCallAllTimeline(t *testing.T) {
	call := func(ctx context.Context, p provider.MessageParams) error {
		if err := sleep(ctx, time.Duration(p.MaxTokens)*time.Millisecond); err != nil {
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
		want       provider.Timeline
	}{
		// All at once: 50 and 240 ms, 300 twice, the failure at 600.
		{false, provider.Timeline{BinMS: 250, OK: []int64{2, 2, 0}, Failed: []int64{0, 0, 1}}},
		// The first alone, the rest 240 ms later: 240, then 290, 540
		// twice, the failure at 840.
		{true, provider.Timeline{BinMS: 250, OK: []int64{1, 1, 2, 0}, Failed: []int64{0, 0, 0, 1}}},
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
			assert.Equal(t, provider.ClientTally{OK: 4, Failed: 1, Unfinished: 1, Errors: map[string]int{"529 overloaded_error": 1}}, tl.result())
		})
	}
}
