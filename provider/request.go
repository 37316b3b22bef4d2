// Reading and checking a request body, and writing JSON answers and errors.

package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"sync"
)

// maxBreakpoints is the most blocks with cache_control a request may have.
const maxBreakpoints = 4

// parsed is a checked request body and what admitting it needs: its
// cache breakpoints and its input tokens.
type parsed struct {
	p           MessageParams
	breakpoints []breakpoint
	tokens      int
}

// paramsMemo remembers recent request bodies parsed, by their hash, so
// that a client that sends the same body again (a retry loop sends it
// dozens of times) costs a hash instead of a JSON parse and a token count:
// in task 5's judge those were 60% of the fake API's time. It answers
// exactly as parsing again would; what it returns is shared and only read.
// Bodies that fail their checks are not remembered.
type paramsMemo struct {
	seeds [2]maphash.Seed // random per server (New): no client can aim for a collision
	mu    sync.Mutex
	byID  map[paramsID]parsed
}

// paramsID is a body's 128-bit hash and whether max_tokens was required.
type paramsID struct {
	sum           [2]uint64
	needMaxTokens bool
}

// maxMemoParams bounds paramsMemo: when full it starts again, so a flood
// of distinct bodies holds at most this many; bodies over maxMemoBody bytes
// are parsed every time, so it holds at most 256 MiB (task 5's bodies are
// about 12 KB, a few tens of MB in all).
const (
	maxMemoParams = 4096
	maxMemoBody   = 64 << 10
)

// read reads and checks the body of r, remembering what it parsed, and
// returns the body's hash too: a retry sends the same body again. On a bad
// request it returns a status (400 or 413) and the message to send.
func (m *paramsMemo) read(w http.ResponseWriter, r *http.Request, needMaxTokens bool) (parsed, paramsID, int, string) {
	body, status, msg := readBody(w, r)
	if status != 0 {
		return parsed{}, paramsID{}, status, msg
	}
	id := paramsID{[2]uint64{maphash.Bytes(m.seeds[0], body), maphash.Bytes(m.seeds[1], body)}, needMaxTokens}
	if len(body) > maxMemoBody {
		req, status, msg := parseRequest(body, needMaxTokens)
		return req, id, status, msg
	}
	m.mu.Lock()
	req, ok := m.byID[id]
	m.mu.Unlock()
	if ok {
		return req, id, 0, ""
	}
	req, status, msg = parseRequest(body, needMaxTokens)
	if status != 0 {
		return parsed{}, id, status, msg
	}
	m.mu.Lock()
	if m.byID == nil || len(m.byID) >= maxMemoParams {
		m.byID = make(map[paramsID]parsed)
	}
	m.byID[id] = req
	m.mu.Unlock()
	return req, id, 0, ""
}

// parseRequest parses and checks a body and works out what admitting it
// needs.
func parseRequest(body []byte, needMaxTokens bool) (parsed, int, string) {
	p, status, msg := parseParams(body, needMaxTokens)
	if status != 0 {
		return parsed{}, status, msg
	}
	return parsed{p: p, breakpoints: breakpoints(p), tokens: CountTokens(p)}, 0, ""
}

// readBody reads the body of r, at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBody)
		}
		return nil, http.StatusBadRequest, "could not read the request body: " + err.Error()
	}
	return body, 0, ""
}

// parseParams decodes and checks a request body.
func parseParams(body []byte, needMaxTokens bool) (MessageParams, int, string) {
	var p MessageParams
	if err := json.Unmarshal(body, &p); err != nil {
		return MessageParams{}, http.StatusBadRequest, "invalid JSON body: " + err.Error()
	}
	if !needMaxTokens {
		p.Stream = false // count_tokens has no stream field
	}
	if msg := check(p, needMaxTokens); msg != "" {
		return MessageParams{}, http.StatusBadRequest, msg
	}
	return p, 0, ""
}

// check returns what is wrong with p, or "".
func check(p MessageParams, needMaxTokens bool) string {
	switch {
	case p.Model == "":
		return "model: field required"
	case needMaxTokens && p.MaxTokens < 1:
		return fmt.Sprintf("max_tokens: must be at least 1 (got %d; the field is required)", p.MaxTokens)
	case len(p.Messages) == 0:
		return "messages: at least one message is required"
	}
	marks := 0
	seen5m := false
	checkTTL := func(where string, cc *CacheControl) string {
		if cc.Type != "ephemeral" {
			return fmt.Sprintf("%s.cache_control.type: want \"ephemeral\", got %q", where, cc.Type)
		}
		switch cc.TTL {
		case "", TTL5m:
			seen5m = true
		case TTL1h:
			if seen5m {
				return fmt.Sprintf("%s.cache_control.ttl: a ttl of \"1h\" must not come after one of \"5m\"", where)
			}
		default:
			return fmt.Sprintf("%s.cache_control.ttl: want \"5m\" or \"1h\", got %q", where, cc.TTL)
		}
		return ""
	}
	if p.CacheControl != nil {
		if p.CacheControl.Type != "ephemeral" || (p.CacheControl.TTL != "" && p.CacheControl.TTL != TTL5m && p.CacheControl.TTL != TTL1h) {
			return fmt.Sprintf("cache_control: want {\"type\": \"ephemeral\"} with a ttl of \"5m\" or \"1h\", got %+v", *p.CacheControl)
		}
	}
	checkBlock := func(where string, b TextBlock, last bool) string {
		if b.Type != "text" {
			return fmt.Sprintf("%s.type: want \"text\", got %q (this fake takes text only)", where, b.Type)
		}
		if b.Text == "" {
			return where + ".text: text content blocks must be non-empty"
		}
		if cc := marked(p, b, last); cc != nil {
			marks++
			if msg := checkTTL(where, cc); msg != "" {
				return msg
			}
		}
		return ""
	}
	for i, b := range p.System {
		if msg := checkBlock(fmt.Sprintf("system.%d", i), b, false); msg != "" {
			return msg
		}
	}
	for i, m := range p.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("messages.%d.role: want \"user\" or \"assistant\", got %q", i, m.Role)
		}
		if len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d.content: must not be empty", i)
		}
		for j, b := range m.Content {
			if msg := checkBlock(fmt.Sprintf("messages.%d.content.%d", i, j), b, i == len(p.Messages)-1 && j == len(m.Content)-1); msg != "" {
				return msg
			}
		}
	}
	if marks > maxBreakpoints {
		return fmt.Sprintf("a maximum of %d blocks with cache_control may be provided; found %d", maxBreakpoints, marks)
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do then
}

// writeError writes an error body, with the request-id that ServeHTTP set,
// and x-should-retry where the API says whether to retry: false on the
// spend-limit 429, true on a rate-limit 429, a 529 and a 500. The Go SDK
// obeys the header over the status (anthropic-sdk-go/v2
// internal/requestconfig/requestconfig.go, shouldRetry), so it does not
// retry the spend limit, which it would as a 429.
func writeError(w http.ResponseWriter, status int, typ, msg, code string) {
	switch {
	case code == ErrorCodeSpendLimit:
		w.Header().Set(HeaderShouldRetry, "false")
	case status == http.StatusTooManyRequests || status >= http.StatusInternalServerError:
		w.Header().Set(HeaderShouldRetry, "true")
	}
	body := ErrorBody{Type: "error", Error: ErrorDetail{Type: typ, Message: msg}, RequestID: w.Header().Get(HeaderRequestID)}
	if code != "" {
		body.Error.Details = &ErrorDetails{ErrorCode: code}
	}
	writeJSON(w, status, body)
}
