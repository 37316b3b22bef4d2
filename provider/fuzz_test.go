package provider

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryAfter feeds ParseRetryAfter any string: it never panics and
// never returns a negative wait; whole seconds read as that many seconds
// (saturating); and a date one to 10^6 seconds ahead, in each of the three
// forms RFC 9110 section 5.6.7 makes a recipient accept, reads as the time
// until it, whatever the zone the date was formatted from.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "1", "120", " 7 ", "-3", "1.5", "NaN", "Inf", "99999999999999999999",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "tomorrow"} {
		f.Add(s, int64(90))
	}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string, ahead int64) {
		got := ParseRetryAfter(v, now)
		if got < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", v, got)
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil && strings.Trim(strings.TrimSpace(v), "0123456789") == "" {
			want := time.Duration(1<<63 - 1)
			if n < uint64(want/time.Second) {
				want = time.Duration(n) * time.Second
			}
			if got != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
			}
		}
		secs := 1 + (ahead%1_000_000+1_000_000)%1_000_000
		at := now.Add(time.Duration(secs) * time.Second)
		zone := time.FixedZone("local", int(ahead%50_000))
		for _, form := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
			// RFC 850 and asctime dates are in GMT, as the RFC requires
			// of every form; the zone only changes how a sender wrote it.
			s := at.In(zone).UTC().Format(form)
			if form == time.RFC850 {
				s = strings.Replace(s, "UTC", "GMT", 1)
			}
			if d := ParseRetryAfter(s, now); d != at.Sub(now) {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", s, d, at.Sub(now))
			}
		}
	})
}

// FuzzParseRequest feeds the fake API any request body: it never panics,
// and a body it accepts has a token count that is not negative.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":1,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		`{}`, `[]`, `null`, `{"max_tokens":-1}`, `{"messages":[{"role":"bot"}]}`, "\x00",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, needMaxTokens bool) {
		p, status, msg := parseRequest(body, needMaxTokens)
		if status == 0 && p.tokens < 0 {
			t.Fatalf("accepted %q with %d tokens", body, p.tokens)
		}
		if status != 0 && msg == "" {
			t.Fatalf("refused %q with status %d and no message", body, status)
		}
	})
}
