package model

import (
	"math"
	"testing"
	"time"
)

func TestUnprotectedSuccesses(t *testing.T) {
	tests := []struct {
		rate, timeoutS float64
		want           float64
	}{
		{80, 1, 800},    // at capacity everyone gets through
		{40, 1, 400},    // below capacity too
		{120, 1, 216},   // the lesson's 120/s row: 1.8 s of arrivals
		{160, 1, 144},   // 0.9 s
		{240, 1, 108},   // 0.45 s
		{480, 1, 86.4},  // 0.18 s
		{120, 30, 1200}, // Break It 4: a 30 s timeout outlasts the 10 s flood
		{120, 0.1, 0},   // a timeout no longer than the work: nobody
	}
	for _, tt := range tests {
		m := Unprotected{Capacity: 80, Work: 100 * time.Millisecond, Timeout: time.Duration(tt.timeoutS * float64(time.Second)),
			Rate: tt.rate, Duration: 10 * time.Second}
		if got := m.Successes(); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("Successes(λ=%v, T=%vs) = %v; want %v", tt.rate, tt.timeoutS, got, tt.want)
		}
	}
}

func TestUnprotectedLatencyAndBacklog(t *testing.T) {
	m := Unprotected{Capacity: 80, Work: 100 * time.Millisecond, Timeout: 30 * time.Second, Rate: 120, Duration: 10 * time.Second}
	// The line grows by 40/s; after 10 s it holds 400, which is 5 s at 80/s.
	if got, want := m.Backlog(), 400.0; got != want {
		t.Errorf("Backlog() = %v; want %v", got, want)
	}
	if got, want := m.Latency(1), 5100*time.Millisecond; got != want {
		t.Errorf("Latency(1) = %v; want %v", got, want)
	}
	if got, want := m.Latency(0.99), 5050*time.Millisecond; got != want {
		t.Errorf("Latency(0.99) = %v; want %v", got, want)
	}
	below := Unprotected{Capacity: 80, Work: 100 * time.Millisecond, Timeout: time.Second, Rate: 40, Duration: 10 * time.Second}
	if got, want := below.Latency(0.99), 100*time.Millisecond; got != want {
		t.Errorf("below capacity Latency(0.99) = %v; want %v", got, want)
	}
}
