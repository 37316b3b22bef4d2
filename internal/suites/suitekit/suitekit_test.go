package suitekit

import (
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"ratelab/lab"
)

func TestHammerRunsEveryGoroutine(t *testing.T) {
	var seen [8]atomic.Bool
	Hammer(t, len(seen), "f", func(g int) { seen[g].Store(true) })
	for g := range seen {
		assert.True(t, seen[g].Load(), "f(%d) did not run", g)
	}
}

func TestHammerReportsTheFirstPanic(t *testing.T) {
	for _, tt := range []struct {
		name  string
		f     func(g int)
		want  string // the report, or its start (before the stack) unless exact
		exact bool
	}{
		{name: "no panic", f: func(int) {}, want: "", exact: true},
		{name: "a Failure passes as it is", f: func(int) { panic(Failure("the budget allowed 12 retries; want 10")) },
			want: "the budget allowed 12 retries; want 10", exact: true},
		{name: "a stub names its TODO alone", f: func(int) { lab.NotImplemented(3, "TokenBucket.TryTake") },
			want: "task 3: TokenBucket.TryTake is not implemented yet", exact: true},
		{name: "any other panic names the goroutine", f: func(g int) {
			if g == 2 {
				panic("boom")
			}
		}, want: "TryTake in goroutine 2 panicked: boom\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := hammer(4, "TryTake", tt.f)
			if tt.exact {
				assert.Equal(t, tt.want, got, "hammer(4, %q, f) = %q; want %q", "TryTake", got, tt.want)
				return
			}
			assert.Truef(t, strings.HasPrefix(got, tt.want) && len(got) > len(tt.want),
				"hammer(4, %q, f) = %q; want it to start with %q, then the stack", "TryTake", got, tt.want)
		})
	}
}

// TestFormatHTTPDate checks that every form FormatHTTPDate writes is read
// back by net/http as the same instant, for random instants and clocks.
func TestFormatHTTPDate(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := time.Unix(rapid.Int64Range(0, 8e9).Draw(rt, "now"), 0)
		at := now.Add(time.Duration(rapid.Int64Range(-1e18, 1e18).Draw(rt, "ahead")))
		f := HTTPDateForms().Draw(rt, "form")
		s, used := FormatHTTPDate(at, now, f)
		if used != f && (f != RFC850Date || used != IMFFixdate) {
			rt.Fatalf("FormatHTTPDate(%v, %v) used %v", at, f, used)
		}
		got, err := http.ParseTime(s)
		if err != nil || !got.Equal(at.Truncate(time.Second)) {
			rt.Fatalf("FormatHTTPDate(%v, %v) = %q, read back as %v, %v", at, f, s, got, err)
		}
	})
}

// TestKeySet checks that KeySet draws distinct keys within MaxKeyBytes.
func TestKeySet(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(rt, "n")
		keys := KeySet(n).Draw(rt, "keys")
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] || len(k) > MaxKeyBytes+26 {
				rt.Fatalf("KeySet(%d) drew %q twice or too long (%d bytes)", n, k, len(k))
			}
			seen[k] = true
		}
		if len(keys) != n {
			rt.Fatalf("KeySet(%d) drew %d keys", n, len(keys))
		}
	})
}

// TestExtremeRateAndSize checks that the pairs are in the domain (zero or
// more, not NaN) and that a fill time, size/rate, stays finite.
func TestExtremeRateAndSize(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	for range 10000 {
		rate, size := ExtremeRateAndSize(rng)
		if !(rate >= 0 && size >= 0) || (rate > 0 && !(size/rate < math.MaxFloat64/4)) {
			t.Fatalf("ExtremeRateAndSize() = %v, %v", rate, size)
		}
	}
}
