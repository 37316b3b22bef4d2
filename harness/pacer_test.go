package harness

import (
	"testing"
	"time"

	"ratelab/results"
)

func TestIntended(t *testing.T) {
	tests := []struct {
		rate float64
		seq  uint64
		want time.Duration
	}{
		{100, 0, 10 * time.Millisecond}, // the first request goes one interval in
		{100, 99, time.Second},
		{120, 1199, 10 * time.Second},
		{3, 0, 333330 * time.Microsecond}, // on the 10 µs grid of ties.Send
		{0.5, 1, 4 * time.Second},
	}
	for _, tt := range tests {
		if got := Intended(tt.rate, tt.seq); got != tt.want {
			t.Errorf("Intended(%v, %d) = %s; want %s", tt.rate, tt.seq, got, tt.want)
		}
	}
}

func TestPace(t *testing.T) {
	const rate, count = 100, 3
	ms := time.Millisecond
	tests := []struct {
		elapsed time.Duration
		hits    uint64
		wait    time.Duration
		stop    bool
	}{
		{0, 0, 10 * ms, false},      // first request is due at 10 ms
		{4 * ms, 0, 6 * ms, false},  // part way there
		{10 * ms, 0, 0, false},      // due now
		{50 * ms, 1, 0, false},      // behind schedule: catch up, never skip
		{15 * ms, 1, 5 * ms, false}, // second one due at 20 ms
		{0, 2, 30 * ms, false},      // third at 30 ms
		{40 * ms, 3, 0, true},       // all three sent
		{0, 7, 0, true},
	}
	for _, tt := range tests {
		wait, stop := Pace(rate, count, tt.elapsed, tt.hits)
		if wait != tt.wait || stop != tt.stop {
			t.Errorf("Pace(%s, %d) = (%s, %t); want (%s, %t)", tt.elapsed, tt.hits, wait, stop, tt.wait, tt.stop)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		code uint16
		err  string
		want results.Outcome
	}{
		{200, "", results.OutcomeOK},
		{429, "429 Too Many Requests", results.OutcomeTooMany},
		{503, "503 Service Unavailable", results.OutcomeUnavailable},
		{0, `Get "http://127.0.0.1:1/generate": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, results.OutcomeTimeout},
		{0, `net/http: request canceled (Client.Timeout or context cancellation while reading body)`, results.OutcomeTimeout},
		{0, `dial tcp 127.0.0.1:1: connect: connection refused`, results.OutcomeOther},
		{500, "500 Internal Server Error", results.OutcomeOther},
	}
	for _, tt := range tests {
		if got := Classify(tt.code, tt.err); got != tt.want {
			t.Errorf("Classify(%d, %q) = %s; want %s", tt.code, tt.err, got, tt.want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8000/generate", "http://localhost:80", "http://[::1]:9000", "http://127.1.2.3:1"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("CheckLoopback(%q) = %v; want nil", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:80", "http://192.168.1.1", "http://example.com", "https://127.0.0.1", "ftp://127.0.0.1", "::"} {
		if err := CheckLoopback(bad); err == nil {
			t.Errorf("CheckLoopback(%q) = nil; want an error", bad)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{URL: "http://127.0.0.1:1/generate", Rate: 10, Duration: time.Second}
	bad := []func(*Options){
		func(o *Options) { o.Rate = 0 },
		func(o *Options) { o.Rate = -5 },
		func(o *Options) { o.Rate = MaxRate * 2 },
		func(o *Options) { o.Duration = 0 },
		func(o *Options) { o.Timeout = -time.Second },
		func(o *Options) { o.Rate, o.Duration = 0.5, time.Second }, // no request at all
		func(o *Options) { o.URL = "http://8.8.8.8/" },
	}
	o := good
	if err := o.validate(); err != nil {
		t.Fatalf("validate(%+v) = %v; want nil", good, err)
	}
	for i, change := range bad {
		o := good
		change(&o)
		if err := o.validate(); err == nil {
			t.Errorf("case %d: validate(%+v) = nil; want an error", i, o)
		}
	}
}

func TestCountRetryAfter(t *testing.T) {
	var ra results.RetryAfterStats
	for _, v := range []string{"1", "3", " 2 ", "", "0", "-1", "1.5", "Wed, 21 Oct 2026 07:28:00 GMT"} {
		countRetryAfter(&ra, v)
	}
	want := results.RetryAfterStats{Valid: 3, Invalid: 5, MinS: 1, MaxS: 3}
	if ra != want {
		t.Errorf("countRetryAfter over mixed headers = %+v; want %+v", ra, want)
	}
}
