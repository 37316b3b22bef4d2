package suitekit

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

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
