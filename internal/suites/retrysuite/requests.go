package retrysuite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
)

// discardedBodiesRandom runs random scripts whose answers carry bodies of
// every size (empty, up to 64 KiB, up to 200 KiB, failing halfway, never
// ending): every body not returned must be closed, read to its end if it
// is 64 KiB or less, and never read past a megabyte.
func (s *suite) discardedBodiesRandom(t *testing.T) {
	// A body that never ends, as a broken proxy may send: reading it to
	// the end never finishes.
	srv := newServer(reply{status: 503, endless: true}, status(200))
	out := s.call(t, srv, Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Second})
	wantResponse(t, out, 200, srv, "the server answered 503 with a body that never ends, then 200")
	if read := srv.attempts[0].resp.bytesRead(); read > 1<<20 {
		t.Fatalf("CallWithRetries read %d bytes of a discarded 503's body that never ends; want at most 64 KiB\n"+
			"read a discarded body within a limit (io.LimitReader) before you close it", read)
	}
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		opts := drawOptions(rt)
		opts.HonorRetryAfter = false
		st := settingsOf(opts, 0)
		n := rapid.IntRange(1, st.maxTries+1).Draw(rt, "replies")
		script := make([]reply, n)
		for i := range script {
			label := fmt.Sprintf("reply %d", i)
			if i == n-1 && rapid.Bool().Draw(rt, "ends with a response to return") {
				script[i].status = rapid.OneOf(rapid.Just(http.StatusOK), rapid.Custom(func(rt *rapid.T) int { return drawFinalStatus(rt, label) })).Draw(rt, label+" status")
				drawBody(rt, label, &script[i], false)
				continue
			}
			script[i].status = rapid.SampledFrom(retryableStatuses).Draw(rt, label+" status")
			drawBody(rt, label, &script[i], true)
		}
		return s.runScript(script, opts, 0, false)
	})
}

// drawRequest draws a request of any method, URL, headers and body, with
// GetBody set as http.NewRequest sets it for its readers.
func drawRequest(rt *rapid.T) (*http.Request, []byte, string) {
	method := rapid.SampledFrom([]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}).Draw(rt, "method")
	path := rapid.StringMatching(`/[a-z0-9]{0,12}(/[a-z0-9]{1,8}){0,3}`).Draw(rt, "path")
	query := url.Values{}
	for i := range rapid.IntRange(0, 3).Draw(rt, "query parameters") {
		query.Set(fmt.Sprintf("q%d", i), rapid.StringMatching(`[a-zA-Z0-9]{0,10}`).Draw(rt, "query value"))
	}
	u := testHost + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	size := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 512), rapid.IntRange(512, 100<<10)).Draw(rt, "body size")
	payload := make([]byte, size)
	seed := rapid.Byte().Draw(rt, "body seed")
	for i := range payload {
		payload[i] = byte(i*31) ^ seed
	}
	var b io.Reader
	kind := rapid.IntRange(0, 2).Draw(rt, "body reader")
	switch {
	case size == 0 && rapid.Bool().Draw(rt, "no body at all"):
	case kind == 0:
		b = bytes.NewReader(payload)
	case kind == 1:
		b = strings.NewReader(string(payload))
	default:
		b = bytes.NewBuffer(bytes.Clone(payload))
	}
	req, err := http.NewRequest(method, u, b)
	if err != nil {
		panic(err)
	}
	for i := range rapid.IntRange(0, 4).Draw(rt, "headers") {
		key := fmt.Sprintf("X-Ratelab-%d", i)
		for range rapid.IntRange(1, 3).Draw(rt, "values") {
			req.Header.Add(key, rapid.StringMatching(`[ -~]{0,20}`).Draw(rt, "header value"))
		}
	}
	return req, payload, u
}

// resendsRandomRequests sends random requests through random failures:
// every attempt must be the whole request again, method, URL, headers,
// body and ctx.
func (s *suite) resendsRandomRequests(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		req, payload, u := drawRequest(rt)
		failures := rapid.IntRange(0, 5).Draw(rt, "failures")
		script := allFail(rt, failures, false, time.Second)
		script = append(script, status(http.StatusOK))
		srv := newServer(script...)
		value := fmt.Sprintf("the caller's ctx %d", rapid.Int().Draw(rt, "ctx value"))
		ctx := context.WithValue(context.Background(), ctxKey{}, value)
		want := req.Header.Clone()
		out, failure := s.callWith(ctx, srv.client(), req, Options{MaxTries: failures + 1, Base: time.Millisecond, Cap: time.Second, Jitter: true})
		if failure != "" {
			return failure
		}
		if out.resp != nil {
			out.resp.Body.Close()
		}
		if out.err != nil || out.resp == nil || srv.count() != failures+1 {
			return fmt.Sprintf("a %s answered %d failures, then 200, with MaxTries %d: CallWithRetries = (%v, %v) after %d attempts; want the 200 after %d\nattempts:%s",
				req.Method, failures, failures+1, respStatus(out.resp), out.err, srv.count(), failures+1, srv.history())
		}
		for i, a := range srv.attempts {
			var bad []string
			if a.method != req.Method {
				bad = append(bad, fmt.Sprintf("method %s", a.method))
			}
			if a.url != u {
				bad = append(bad, fmt.Sprintf("URL %s", a.url))
			}
			if a.body != string(payload) {
				bad = append(bad, fmt.Sprintf("a body of %d bytes (want %d, the same bytes)", len(a.body), len(payload)))
			}
			for k, vs := range want {
				if got := a.header.Values(k); fmt.Sprint(got) != fmt.Sprint(vs) {
					bad = append(bad, fmt.Sprintf("header %s = %q (want %q)", k, got, vs))
				}
			}
			if a.ctxValue != value {
				bad = append(bad, "a context that is not the one passed to CallWithRetries")
			}
			if len(bad) > 0 {
				return fmt.Sprintf("attempt %d of %d of a %s %s with a %d-byte body went out with %s\n"+
					"every attempt must be the whole request again: req.Clone(ctx), with a fresh body from req.GetBody for every retry",
					i+1, len(srv.attempts), req.Method, u, len(payload), strings.Join(bad, ", "))
			}
		}
		return ""
	})
}
