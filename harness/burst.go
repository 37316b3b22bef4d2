package harness

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// BurstOptions is a burst of one request from each of many distinct
// clients (task 6's keyspace check): every request runs the server's
// limiter once, on a key of its own.
type BurstOptions struct {
	// URL is where every request goes, such as http://127.0.0.1:8000/generate.
	URL string `json:"url,omitempty"`
	// IDs are the clients, one X-Client-Id per request.
	IDs []string `json:"ids"`
	// Concurrency is how many requests are out at once (32 if 0).
	Concurrency int `json:"concurrency,omitempty"`
	// Timeout bounds each request (2 s if 0).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Dial, if set, makes the connections (an in-memory network in
	// virtual time).
	Dial DialFunc `json:"-"`
}

// Burst sends o's requests and waits for their answers, whatever they
// are: the server's records, not the answers, are what a burst is for. It
// returns the context's error if it ended first.
func Burst(ctx context.Context, o BurstOptions) error {
	conc, timeout := o.Concurrency, o.Timeout
	if conc <= 0 {
		conc = 32
	}
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	tr := &http.Transport{MaxIdleConnsPerHost: conc}
	if o.Dial != nil {
		tr.DialContext = o.Dial
	}
	client := &http.Client{Timeout: timeout, Transport: tr}
	defer tr.CloseIdleConnections()
	ids := make(chan string)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for id := range ids {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
				if err != nil {
					continue
				}
				req.Header.Set("X-Client-Id", id)
				if resp, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	for _, id := range o.IDs {
		select {
		case ids <- id:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(ids)
	wg.Wait()
	return ctx.Err()
}
