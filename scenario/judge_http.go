// The judge's own HTTP calls: the strategies that are not learner code,
// and the fake API's /stats and /faults.

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"ratelab/provider"
	"ratelab/results"
)

// postMessage sends an encoded call once with the API key and returns nil
// for a 200, an *provider.APIError for another status, or the transport's
// error. Loops that send the same call many times encode it once, as an
// SDK's retries do.
func postMessage(ctx context.Context, hc *http.Client, url, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(provider.HeaderAPIKey, key)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return provider.ReadError(resp)
	}
	defer resp.Body.Close()
	var m provider.Message
	return json.NewDecoder(resp.Body).Decode(&m)
}

// naiveCall is what an SDK does for one call of asyncio.gather: up to 2
// retries of 408, 409, 429, 5xx (529 included) and connection errors,
// waiting what retry-after says if it is between 0 and 60 s, otherwise
// 0.5 s × 2^k (at most 8 s) less up to a quarter of jitter.
func naiveCall(ctx context.Context, hc *http.Client, url, key string, p provider.MessageParams) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	const retries = 2
	for k := 0; ; k++ {
		err := postMessage(ctx, hc, url, key, body)
		if err == nil || ctx.Err() != nil || k == retries {
			return err
		}
		var apiErr *provider.APIError
		isAPI := errors.As(err, &apiErr)
		if isAPI && !(apiErr.StatusCode == 408 || apiErr.StatusCode == 409 || apiErr.StatusCode == 429 || apiErr.StatusCode >= 500) {
			return err
		}
		delay := time.Duration(min(0.5*math.Pow(2, float64(k)), 8) * (1 - 0.25*rand.Float64()) * float64(time.Second))
		if isAPI && apiErr.RetryAfter > 0 && apiErr.RetryAfter <= time.Minute {
			delay = apiErr.RetryAfter
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return err
		}
	}
}

// sleep1Call is the lesson's loop: on a 429, a 529 or a connection error,
// sleep one second and try again, for as long as it takes.
func sleep1Call(ctx context.Context, hc *http.Client, url, key string, p provider.MessageParams) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	for {
		err := postMessage(ctx, hc, url, key, body)
		if err == nil || ctx.Err() != nil {
			return err
		}
		var apiErr *provider.APIError
		if errors.As(err, &apiErr) && apiErr.StatusCode != 429 && apiErr.StatusCode != provider.StatusOverloaded {
			return err
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}

// sleepCtx waits d, or until ctx ends, and returns ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readAPIStats reads the API's /stats with hc, for key only if key is set.
func readAPIStats(ctx context.Context, hc *http.Client, url, key string) (provider.Stats, error) {
	var st provider.Stats
	u := url + "/stats"
	if key != "" {
		u += "?key=" + key
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("read the API's stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("read the API's stats: %s answered %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("read the API's stats: %w", err)
	}
	if !(st.Limits.RequestsPerMinute > 0 && st.Limits.InputTokensPerMinute > 0) {
		return st, fmt.Errorf("read the API's stats: %s reports no limits; is it the fake Messages API?", u)
	}
	return st, nil
}

// putFaultPlan sets key's fault plan on the fake API (PUT /faults).
func putFaultPlan(ctx context.Context, hc *http.Client, url, key string, p results.APIFaultPlan) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/faults?key="+key, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("set the API's fault plan: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("set the API's fault plan: %s/faults answered %s; only the lab's fake API takes one", url, resp.Status)
	}
	return nil
}
