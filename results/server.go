package results

import (
	"bytes"
	"encoding/json"
)

// Server is how the fake GPU server behind a flood or a storm was
// configured, as the grader started it (fakegpu.Config.Record writes it).
// Durations are in milliseconds, rates in tokens per second. Settings a
// mode does not use (the line in mode none, the bucket outside the bucket
// modes) are recorded all the same.
type Server struct {
	// Mode is the server's protection: "none", "shed", "bucket" or "redis".
	// It is empty only in a server read from a document written before
	// servers were recorded as data; Description then holds what that
	// document said.
	Mode string `json:"mode"`
	// Slots is how many requests the GPU works on at once, WorkMS how long
	// one request holds its slot.
	Slots  int     `json:"slots"`
	WorkMS float64 `json:"work_ms"`
	// MaxWaiting bounds the line in the protected modes.
	MaxWaiting int `json:"max_waiting"`
	// DeadlineMS is the longest a request may wait for a slot in the
	// protected modes; 0 is no deadline.
	DeadlineMS float64 `json:"deadline_ms"`
	// BucketRatePerS and BucketBurst are each client's token bucket in the
	// bucket modes: its refill in tokens per second, its capacity in tokens.
	BucketRatePerS float64 `json:"bucket_rate_per_s"`
	BucketBurst    float64 `json:"bucket_burst"`
	// SpreadRetryAfter says the server spread the Retry-After of the
	// requests it shed at its capacity (task 4).
	SpreadRetryAfter bool `json:"spread_retry_after,omitempty"`
	// Redis is the Redis server that kept the buckets in mode redis, its
	// password, if any, left out.
	Redis string `json:"redis,omitempty"`
	// Counting names task 8's limiter the server had in mode bucket
	// instead of task 3's bucket ("fixed", "log", "counter", "bucket"),
	// with its limit per window; empty for task 3's.
	Counting         string  `json:"counting,omitempty"`
	CountingLimit    int     `json:"counting_limit,omitempty"`
	CountingWindowMS float64 `json:"counting_window_ms,omitempty"`
	// Workers is how many server processes shared one port (task 6); 0
	// means a single server.
	Workers int `json:"workers,omitempty"`
	// Description is what a document written before servers were recorded
	// as data said of the server, as free text (such as "--mode shed" or
	// "none, 8 slots x 100ms"). Nothing reads settings from it, and such a
	// server is written back as that text, as it came.
	Description string `json:"-"`
}

// Known reports whether s holds the server's settings, not just an old
// document's description of it.
func (s *Server) Known() bool { return s != nil && s.Mode != "" }

// UnmarshalJSON reads a Server, or the free-text "server" of a document
// written before servers were recorded as data: that text becomes its
// Description, and its settings stay unknown.
func (s *Server) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		var desc string
		if err := json.Unmarshal(b, &desc); err != nil {
			return err
		}
		*s = Server{Description: desc}
		return nil
	}
	type plain Server // without this method
	return json.Unmarshal(b, (*plain)(s))
}

// MarshalJSON writes s, or, for a server read from an old document, the
// free text it came as.
func (s Server) MarshalJSON() ([]byte, error) {
	if s.Mode == "" && s.Description != "" {
		return json.Marshal(s.Description)
	}
	type plain Server // without this method
	return json.Marshal(plain(s))
}
