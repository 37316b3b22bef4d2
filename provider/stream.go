package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Server-sent event types of a streamed reply, in the order they come.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventPing              = "ping"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventError             = "error"
)

// streamStart is message_start's message: a Message whose content is still
// empty and whose stop reason is still null.
type streamStart struct {
	ID           string      `json:"id"`
	Type         string      `json:"type"`
	Role         string      `json:"role"`
	Model        string      `json:"model"`
	Content      []TextBlock `json:"content"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        Usage       `json:"usage"`
}

// textDelta is a content_block_delta's delta.
type textDelta struct {
	Type string `json:"type"` // "text_delta"
	Text string `json:"text"`
}

// eventWriter writes server-sent events and flushes each at once, so the
// client sees every token as it is generated.
type eventWriter struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func (e eventWriter) send(event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // only this file's own types are sent
	}
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, b)
	if e.fl != nil {
		e.fl.Flush()
	}
}

// stream answers an admitted request as server-sent events: after
// BaseLatency, the reply's text one token at a time, PerTokenLatency
// apart, as it is generated. The output-token limit is settled as for a
// plain reply: a client that leaves part way is charged the tokens
// generated so far, and the rest of its max_tokens goes back to the bucket.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, a *account, started time.Time, p MessageParams, out int, adm admission) {
	h := w.Header()
	a.mu.Lock()
	a.setHeaders(h, started)
	a.mu.Unlock()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ev := eventWriter{w: w, fl: fl}

	usage := adm.usage
	usage.OutputTokens = 1 // as the API's message_start says before the first token
	ev.send(EventMessageStart, map[string]any{"type": EventMessageStart, "message": streamStart{
		ID: s.newID("msg"), Type: "message", Role: "assistant", Model: p.Model, Content: []TextBlock{}, Usage: usage,
	}})

	timer := time.NewTimer(a.baseLatency)
	defer timer.Stop()
	// wait returns false when the reply is cut short: the client left, or
	// the server is closing (which the client is told).
	wait := func() bool {
		select {
		case <-timer.C:
			return true
		case <-r.Context().Done():
		case <-s.closing:
			ev.send(EventError, map[string]any{"type": EventError, "error": map[string]string{"type": ErrorAPI, "message": "the server is shutting down"}})
		}
		s.abandon(a, started, p.MaxTokens, out)
		return false
	}
	if !wait() {
		return
	}
	ev.send(EventContentBlockStart, map[string]any{"type": EventContentBlockStart, "index": 0, "content_block": Text("")})
	ev.send(EventPing, map[string]string{"type": EventPing})
	text := replyText(out)
	for i := range out {
		if a.tokenLatency > 0 {
			timer.Reset(a.tokenLatency)
			if !wait() {
				return
			}
		}
		ev.send(EventContentBlockDelta, map[string]any{"type": EventContentBlockDelta, "index": 0,
			"delta": textDelta{Type: "text_delta", Text: text[4*i : 4*i+4]}})
	}

	done := time.Now()
	a.mu.Lock()
	a.finish(done, p.MaxTokens, out, true, adm.writes)
	a.mu.Unlock()
	stop := "end_turn"
	if out == p.MaxTokens {
		stop = "max_tokens"
	}
	ev.send(EventContentBlockStop, map[string]any{"type": EventContentBlockStop, "index": 0})
	ev.send(EventMessageDelta, map[string]any{"type": EventMessageDelta,
		"delta": map[string]any{"type": "message_delta", "stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": out}})
	ev.send(EventMessageStop, map[string]string{"type": EventMessageStop})
}
