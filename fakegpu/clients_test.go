package fakegpu

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientSpanCoversAForgottenFirstRequest replays what a flood of
// one-off keys does to a steady client: its first request is in service
// when the full table forgets the key (it has arrived once), the second
// request starts a new entry, and the first is answered into that entry.
// The span must still start at the first request's arrival: the limiter
// granted it there, and b + r·span bounds every admission counted.
func TestClientSpanCoversAForgottenFirstRequest(t *testing.T) {
	var tab clientTable
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tracked, first := tab.arrive("steady", t0)
	require.True(t, tracked)
	require.True(t, first)
	for i := range ClientCapacity { // fills the table, then forgets every one-off key
		tab.arrive(fmt.Sprintf("one-off-%d", i), t0.Add(time.Millisecond))
	}
	second := t0.Add(20 * time.Millisecond)
	tracked, first = tab.arrive("steady", second)
	require.True(t, tracked)
	require.True(t, first, "the key was forgotten, so its second request starts a new entry")

	tab.answer(answerNotes{key: "steady", tracked: true, arrived: t0}, http.StatusOK, t0.Add(time.Microsecond), 0)
	last := second.Add(time.Second)
	tab.answer(answerNotes{key: "steady", tracked: true, arrived: second}, http.StatusOK, last, 0)

	c := tab.stats().Client("steady")
	require.NotNil(t, c)
	assert.Equal(t, int64(2), c.Admitted)
	assert.InDelta(t, last.Sub(t0).Seconds(), c.SpanS, 1e-9, "span = %v; want from the first counted admission's arrival to the last admission", c.SpanS)
}
