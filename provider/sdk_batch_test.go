package provider_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// batchRequests returns n SDK batch requests of 20 input tokens each, with
// custom IDs tag-0 to tag-(n−1).
func batchRequests(n int, tag string) []anthropic.MessageBatchNewParamsRequest {
	rs := make([]anthropic.MessageBatchNewParamsRequest, n)
	for i := range rs {
		rs[i] = anthropic.MessageBatchNewParamsRequest{
			CustomID: fmt.Sprintf("%s-%d", tag, i),
			Params: anthropic.MessageBatchNewParamsRequestParams{
				Model: sdkModel, MaxTokens: 20,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text(20, fmt.Sprint(tag, i))))},
			},
		}
	}
	return rs
}

// TestSDKBatches drives the Message Batches API end to end through the
// SDK's MessageBatchService (anthropic-sdk-go/v2 messagebatch.go): create,
// retrieve until ended, list, results decoded by the SDK's own JSONL
// stream, cancel, and a refused batch as an *anthropic.Error. The fake
// processes 200 requests a second, so the real waits are short.
func TestSDKBatches(t *testing.T) {
	c := sdkConfig()
	c.BatchRequestsPerSecond = 200
	c.MaxBatchRequests = 1000
	f := startFake(t, c)
	cl := f.client()
	ctx := ctx(t)

	b, err := cl.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: batchRequests(5, "a")})
	require.NoError(t, err)
	assert.Equal(t, anthropic.MessageBatchProcessingStatusInProgress, b.ProcessingStatus)
	assert.Equal(t, int64(5), b.RequestCounts.Processing)
	assert.True(t, b.EndedAt.IsZero(), "ended_at is null while in progress")
	for b.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded {
		time.Sleep(10 * time.Millisecond)
		b, err = cl.Messages.Batches.Get(ctx, b.ID, anthropic.MessageBatchGetParams{})
		require.NoError(t, err)
	}
	assert.Equal(t, int64(5), b.RequestCounts.Succeeded)
	assert.Zero(t, b.RequestCounts.Processing)
	assert.False(t, b.EndedAt.Before(b.CreatedAt.Add(25*time.Millisecond)), "5 requests at 200/s take 25 ms: created %s, ended %s", b.CreatedAt, b.EndedAt)
	assert.NotEmpty(t, b.ResultsURL)

	stream := cl.Messages.Batches.ResultsStreaming(ctx, b.ID, anthropic.MessageBatchResultsParams{})
	var n int
	for stream.Next() {
		r := stream.Current()
		assert.Equal(t, fmt.Sprintf("a-%d", n), r.CustomID)
		require.Equal(t, "succeeded", r.Result.Type)
		m := r.Result.AsSucceeded().Message
		assert.Equal(t, int64(20), m.Usage.InputTokens)
		assert.Positive(t, m.Usage.OutputTokens)
		assert.Len(t, m.Content[0].Text, 4*int(m.Usage.OutputTokens))
		n++
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	assert.Equal(t, 5, n)

	// A second, long batch, cancelled at once.
	long, err := cl.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: batchRequests(1000, "b")})
	require.NoError(t, err)
	long, err = cl.Messages.Batches.Cancel(ctx, long.ID, anthropic.MessageBatchCancelParams{})
	require.NoError(t, err)
	assert.Equal(t, anthropic.MessageBatchProcessingStatusCanceling, long.ProcessingStatus)
	assert.False(t, long.CancelInitiatedAt.IsZero())
	for long.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded {
		time.Sleep(10 * time.Millisecond)
		long, err = cl.Messages.Batches.Get(ctx, long.ID, anthropic.MessageBatchGetParams{})
		require.NoError(t, err)
	}
	assert.Positive(t, long.RequestCounts.Canceled)
	assert.Equal(t, int64(1000), long.RequestCounts.Succeeded+long.RequestCounts.Canceled)
	canceled := 0
	stream2 := cl.Messages.Batches.ResultsStreaming(ctx, long.ID, anthropic.MessageBatchResultsParams{})
	for stream2.Next() {
		if stream2.Current().Result.Type == "canceled" {
			canceled++
		}
	}
	require.NoError(t, stream2.Err())
	assert.Equal(t, long.RequestCounts.Canceled, int64(canceled))

	// List: newest first, one to a page, through the SDK's auto-pager.
	page, err := cl.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(1)})
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, long.ID, page.Data[0].ID)
	assert.True(t, page.HasMore)
	var ids []string
	iter := cl.Messages.Batches.ListAutoPaging(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(1)})
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	require.NoError(t, iter.Err())
	assert.Equal(t, []string{long.ID, b.ID}, ids)

	// Too many requests in one batch: a 400 the SDK parses.
	_, err = cl.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{Requests: batchRequests(1001, "c")})
	e := sdkError(t, err)
	assert.Equal(t, http.StatusBadRequest, e.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeInvalidRequestError, e.Type())
	assert.Contains(t, e.Error(), "at most 1000 requests")

	// What the key was charged: half price for the batched tokens, nothing
	// at full price.
	st := f.srv.KeyStats(sdkKey)
	assert.Equal(t, int64(2), st.Batches)
	assert.Equal(t, 0.5*c.Prices.Cost(st.BatchInputTokens, 0, 0, st.BatchOutputTokens), st.BatchCostUSD)
	assert.Equal(t, results.BatchPriceFraction*c.Prices.Cost(20*st.BatchSucceeded, 0, 0, st.BatchOutputTokens), st.BatchCostUSD)
	assert.Zero(t, st.CostUSD)
}
