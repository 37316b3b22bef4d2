package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"ratelab/provider"
	"ratelab/results"
)

// JudgeBatchPoll is how often the batch strategy asks whether its batches
// have ended: twice a second, a few dozen polls for the default workload's
// 20 s. (Against the real API, whose batches take minutes to hours, a
// minute is usual.)
const JudgeBatchPoll = 500 * time.Millisecond

// judgeBatchBytes is the most body the batch strategy sends in one batch:
// a quarter of the API's 256 MB, so that 20,000 judgments of 12 KB go as
// a few batches that the API starts on while the next is uploaded.
const judgeBatchBytes = 64 << 20

// judgeBatches is the batch strategy: it submits prompts as Message
// Batches of at most limits.MaxBatchRequests requests and judgeBatchBytes,
// waiting JudgeBatchPoll and trying again while the API's queue is full,
// polls each batch every JudgeBatchPoll until it has ended and reads its
// results. It tallies each result at the time its results were read, and
// returns the tally and the time from the first submission to the last
// result.
func judgeBatches(ctx context.Context, hc *http.Client, url, key string, limits results.APILimits, prompts []provider.MessageParams) (*judgeTally, time.Duration) {
	t := newJudgeTally()
	start := time.Now()
	fail := func(err error, n int) (*judgeTally, time.Duration) {
		for range n {
			t.record(ctx, err, time.Since(start))
		}
		return t, time.Since(start)
	}
	if limits.BatchRequestsPerSecond <= 0 || limits.MaxBatchRequests < 1 {
		return fail(errors.New("the API reports no Message Batches API in its /stats"), len(prompts))
	}

	// Submit every batch first, so the API works on one while the next is
	// uploaded, then collect them in order.
	var ids []string
	var sizes []int
	for i := 0; i < len(prompts); {
		var body bytes.Buffer
		body.WriteString(`{"requests":[`)
		n := 0
		for i+n < len(prompts) && n < limits.MaxBatchRequests {
			line, err := json.Marshal(provider.BatchRequest{CustomID: fmt.Sprintf("j%d", i+n), Params: prompts[i+n]})
			if err != nil {
				return fail(err, len(prompts)-i)
			}
			if n > 0 && body.Len()+len(line)+2 > judgeBatchBytes {
				break
			}
			if n > 0 {
				body.WriteByte(',')
			}
			body.Write(line)
			n++
		}
		body.WriteString(`]}`)
		var b provider.Batch
		for {
			err := batchCall(ctx, hc, http.MethodPost, url+"/v1/messages/batches", key, body.Bytes(), &b)
			var apiErr *provider.APIError
			if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests && ctx.Err() == nil {
				if sleepCtx(ctx, JudgeBatchPoll) == nil {
					continue // the queue is full: wait for it to drain
				}
				err = ctx.Err()
			}
			if err != nil {
				return fail(err, len(prompts)-i)
			}
			break
		}
		ids, sizes = append(ids, b.ID), append(sizes, n)
		i += n
	}

	// rest counts the judgments of batch j and every later one, less done.
	rest := func(j, done int) int {
		n := -done
		for _, size := range sizes[j:] {
			n += size
		}
		return n
	}
	for j, id := range ids {
		if err := waitBatch(ctx, hc, url, key, id); err != nil {
			return fail(err, rest(j, 0))
		}
		read, err := readBatchResults(ctx, hc, url, key, id, t, start)
		if err != nil {
			// The results not read, of this batch and the later ones, are
			// failures with the reason, not judgments that never happened.
			return fail(fmt.Errorf("read the results of batch %s: %w", id, err), max(rest(j, read), 0))
		}
	}
	return t, time.Since(start)
}

// waitBatch polls batch id every JudgeBatchPoll until it has ended.
func waitBatch(ctx context.Context, hc *http.Client, url, key, id string) error {
	for {
		var b provider.Batch
		if err := batchCall(ctx, hc, http.MethodGet, url+"/v1/messages/batches/"+id, key, nil, &b); err != nil {
			return err
		}
		if b.ProcessingStatus == provider.BatchEnded {
			return nil
		}
		if err := sleepCtx(ctx, JudgeBatchPoll); err != nil {
			return err
		}
	}
}

// readBatchResults reads batch id's results into t: a succeeded result
// is a judgment done, any other a failure named by its type. It returns
// how many results it recorded, also when it stopped at an error.
func readBatchResults(ctx context.Context, hc *http.Client, url, key, id string, t *judgeTally, start time.Time) (int, error) {
	resp, err := batchDo(ctx, hc, http.MethodGet, url+"/v1/messages/batches/"+id+"/results", key, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	read := 0
	for sc.Scan() {
		var line provider.BatchResponse
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return read, err
		}
		read++
		switch line.Result.Type {
		case provider.BatchSucceeded:
			t.record(ctx, nil, time.Since(start))
		case provider.BatchErrored:
			msg := "errored"
			if line.Result.Error != nil {
				msg = "errored " + line.Result.Error.Error.Type
			}
			t.record(ctx, errors.New(msg), time.Since(start))
		default:
			t.record(ctx, errors.New(line.Result.Type), time.Since(start))
		}
	}
	return read, sc.Err()
}

func batchRequest(ctx context.Context, method, u, key string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(provider.HeaderAPIKey, key)
	return req, nil
}

// batchDo sends one request of the Batches API and returns a 200's
// response, whose body the caller closes; another status is an
// *provider.APIError.
func batchDo(ctx context.Context, hc *http.Client, method, u, key string, body []byte) (*http.Response, error) {
	req, err := batchRequest(ctx, method, u, key, body)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, provider.ReadError(resp)
	}
	return resp, nil
}

// batchCall sends one request of the Batches API and decodes a 200's body
// into out; another status is an *provider.APIError.
func batchCall(ctx context.Context, hc *http.Client, method, u, key string, body []byte, out any) error {
	resp, err := batchDo(ctx, hc, method, u, key, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}
