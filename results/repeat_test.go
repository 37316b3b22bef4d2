package results

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repeatDoc is task2 graded once, with one check per verdict given.
func repeatDoc(k int, statuses ...Status) *Document {
	start := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Minute)
	d := &Document{Schema: Schema, Task: "task2", Impl: "exercises", Started: start, Finished: start.Add(50 * time.Second),
		Notes: []string{"same every time"}}
	for i, st := range statuses {
		c := Check{Task: "task2", Name: "check " + string(rune('A'+i)), Status: st, MaxScore: 2, Message: "msg of repeat " + string(rune('0'+k)),
			Measured: map[string]float64{"ok": float64(800 + 10*k), "p99_ms": 130.25}, Run: "shed 240/s"}
		if st == StatusPass {
			c.Score = 2
		}
		d.Checks = append(d.Checks, c)
	}
	d.Runs = []*Run{{Name: "shed 240/s", Task: "task2", OK: int64(800 + 10*k)}}
	d.Total()
	return d
}

func TestCombineCheck(t *testing.T) {
	const (
		P = StatusPass
		F = StatusFail
		E = StatusError
		S = StatusSkip
	)
	tests := []struct {
		repeats   []Status
		want      Status
		score     float64
		message   string // in the message
		run       string
		repeatsOK int // len(Repeats)
	}{
		{[]Status{P, P, P}, P, 2, "msg of repeat 1 [3 repeats: pass (ok 810, p99_ms 130), pass (ok 820, p99_ms 130), pass (ok 830, p99_ms 130)]", "shed 240/s", 3},
		{[]Status{F, F, F}, F, 0, "msg of repeat 1 [3 repeats: fail (ok 810", "shed 240/s", 3},
		{[]Status{P, F, P}, StatusInconclusive, 0, "runs disagree: pass (ok 810, p99_ms 130), fail (ok 820, p99_ms 130), pass (ok 830, p99_ms 130). Repeat 2: msg of repeat 2", "shed 240/s (repeat 2)", 3},
		{[]Status{F, P}, StatusInconclusive, 0, "runs disagree: fail (ok 810, p99_ms 130), pass (ok 820, p99_ms 130). Repeat 1: msg of repeat 1", "shed 240/s", 2},
		{[]Status{E, P, P}, P, 2, "msg of repeat 2 [3 repeats: error (ok 810, p99_ms 130), pass", "shed 240/s (repeat 2)", 3},
		{[]Status{E, F}, F, 0, "msg of repeat 2 [2 repeats: error", "shed 240/s (repeat 2)", 2},
		{[]Status{S, P, F}, StatusInconclusive, 0, "runs disagree: skip (ok 810, p99_ms 130), pass", "shed 240/s (repeat 3)", 3},
		{[]Status{E, E}, E, 0, "msg of repeat 1 [2 repeats: error", "shed 240/s", 2},
		{[]Status{S, E}, E, 0, "msg of repeat 2 [2 repeats: skip", "shed 240/s (repeat 2)", 2},
		{[]Status{S, S, S}, S, 0, "msg of repeat 1 [3 repeats: skip", "shed 240/s", 3},
	}
	for _, tt := range tests {
		var docs []*Document
		for k, st := range tt.repeats {
			docs = append(docs, repeatDoc(k+1, st))
		}
		got, err := Combine(docs)
		require.NoError(t, err)
		require.Len(t, got.Checks, 1)
		c := got.Checks[0]
		assert.Equal(t, tt.want, c.Status, "Combine(%v).Status = %v; want %v", tt.repeats, c.Status, tt.want)
		assert.Equal(t, tt.score, c.Score, "Combine(%v).Score", tt.repeats)
		assert.Equal(t, 2.0, c.MaxScore, "Combine(%v).MaxScore", tt.repeats)
		assert.Contains(t, c.Message, tt.message, "Combine(%v).Message", tt.repeats)
		assert.Equal(t, tt.run, c.Run, "Combine(%v).Run", tt.repeats)
		require.Len(t, c.Repeats, tt.repeatsOK, "Combine(%v).Repeats", tt.repeats)
		for i, r := range c.Repeats {
			assert.Equal(t, i+1, r.Repeat)
			assert.Equal(t, tt.repeats[i], r.Status)
			assert.Equal(t, float64(800+10*(i+1)), r.Measured["ok"], "repeat %d's values are kept", i+1)
		}
	}
}

func TestCombineDocument(t *testing.T) {
	d1 := repeatDoc(1, StatusPass, StatusPass, StatusPass)
	d2 := repeatDoc(2, StatusPass, StatusFail, StatusPass)
	d3 := repeatDoc(3, StatusPass, StatusPass) // stopped before check C
	d3.Interrupted = true
	d3.Notes = append(d3.Notes, "interrupted")
	before, err := json.Marshal([]*Document{d1, d2, d3})
	require.NoError(t, err)

	got, err := Combine([]*Document{d1, d2, d3})
	require.NoError(t, err)
	after, err := json.Marshal([]*Document{d1, d2, d3})
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "Combine leaves its documents alone")

	assert.Equal(t, 3, got.Repeat)
	assert.Equal(t, "task2", got.Task)
	assert.Equal(t, d1.Started, got.Started)
	assert.Equal(t, d3.Finished, got.Finished)
	assert.True(t, got.Interrupted)
	require.Len(t, got.Checks, 3)
	assert.Equal(t, []Status{StatusPass, StatusInconclusive, StatusPass}, []Status{got.Checks[0].Status, got.Checks[1].Status, got.Checks[2].Status})
	assert.Contains(t, got.Checks[2].Message, "not reached", "a repeat that stopped early is listed")
	assert.Len(t, got.Checks[2].Repeats, 2)
	assert.Equal(t, 0.0, got.Score, "an interrupted document has no score")
	assert.Equal(t, 6.0, got.MaxScore)
	assert.Equal(t, StatusInterrupted, got.Status, "an interrupted document is no verdict")

	var names []string
	for _, r := range got.Runs {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"shed 240/s", "shed 240/s (repeat 2)", "shed 240/s (repeat 3)"}, names)
	assert.Equal(t, []string{"same every time", "interrupted", "task2 graded 3 times: 1 check(s) disagreed across the repeats and are marked inconclusive, with each repeat's values; that is the measurement's noise, not a verdict on the code"}, got.Notes)

	got, err = Combine([]*Document{d1, repeatDoc(2, StatusPass, StatusPass, StatusPass)})
	require.NoError(t, err)
	assert.Equal(t, StatusPass, got.Status)
	assert.Contains(t, got.Notes, "task2 graded 2 times: every check agreed across the repeats")

	one, err := Combine([]*Document{d1})
	require.NoError(t, err)
	assert.Same(t, d1, one, "a single document is returned as it is")

	for _, bad := range [][]*Document{nil, {d1, nil}, {d1, {Schema: Schema, Task: "task3", Impl: "exercises"}}, {d1, {Schema: Schema, Task: "task2", Impl: "solutions"}}} {
		_, err := Combine(bad)
		assert.Error(t, err, "Combine(%d documents)", len(bad))
	}
}

// A name that occurs twice in one document is matched by occurrence.
func TestCombineDuplicateNames(t *testing.T) {
	a := &Document{Schema: Schema, Task: "task1", Checks: []Check{{Task: "task1", Name: "x", Status: StatusPass}, {Task: "task1", Name: "x", Status: StatusFail}}}
	b := &Document{Schema: Schema, Task: "task1", Checks: []Check{{Task: "task1", Name: "x", Status: StatusPass}, {Task: "task1", Name: "x", Status: StatusFail}}}
	got, err := Combine([]*Document{a, b})
	require.NoError(t, err)
	require.Len(t, got.Checks, 2)
	assert.Equal(t, StatusPass, got.Checks[0].Status)
	assert.Equal(t, StatusFail, got.Checks[1].Status)
}

func TestTotalPrecedence(t *testing.T) {
	tests := []struct {
		checks      []Status
		interrupted bool
		want        Status
	}{
		{[]Status{StatusPass}, false, StatusPass},
		{[]Status{StatusPass, StatusInconclusive}, false, StatusInconclusive},
		{[]Status{StatusInconclusive, StatusFail}, false, StatusFail},
		{[]Status{StatusInconclusive, StatusSkip}, false, StatusFail},
		{[]Status{StatusFail, StatusInconclusive, StatusError}, false, StatusError},
		{[]Status{StatusError, StatusFail}, false, StatusError},
		{[]Status{StatusInconclusive}, true, StatusInterrupted},
		{[]Status{StatusPass}, true, StatusInterrupted},
		{[]Status{StatusFail, StatusError}, true, StatusInterrupted},
		{[]Status{StatusPass, "bogus"}, false, StatusFail},
	}
	for _, tt := range tests {
		d := &Document{Interrupted: tt.interrupted}
		for _, s := range tt.checks {
			d.Checks = append(d.Checks, Check{Status: s})
		}
		d.Total()
		assert.Equal(t, tt.want, d.Status, "Total(%v, interrupted %t) = %v; want %v", tt.checks, tt.interrupted, d.Status, tt.want)
	}
}

// An interrupted document's score is null in JSON, and reads back as 0
// with its status; a finished one's is a number.
func TestInterruptedScoreIsNull(t *testing.T) {
	d := &Document{Schema: Schema, Task: "task2", Interrupted: true, Checks: []Check{{Name: "a", Status: StatusPass, Score: 2, MaxScore: 2}, {Name: "b", Status: StatusSkip, MaxScore: 3}}}
	d.Total()
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"score":null`)
	assert.Contains(t, string(b), `"status":"interrupted"`)
	var back Document
	require.NoError(t, json.Unmarshal(b, &back))
	assert.NoError(t, back.Consistent())
	assert.Equal(t, 5.0, back.MaxScore)
	assert.Equal(t, 2.0, back.Checks[0].Score, "a finished check keeps its points")

	d.Interrupted = false
	d.Total()
	b, err = json.Marshal(d)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"score":2`)
}

// A document graded once has neither "repeat" nor "repeats" in its JSON.
func TestRepeatJSONOmitted(t *testing.T) {
	b, err := json.Marshal(repeatDoc(1, StatusPass))
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"repeat`)
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{812: "812", 130.25: "130", 12.345: "12.3", 0.5: "0.5", -3: "-3", 0.01234: "0.0123"} {
		assert.Equal(t, want, formatValue(v), "formatValue(%v)", v)
	}
}

// Combine keeps every repeat's token-bucket plays, named by repeat as
// runs are.
func TestCombineKeepsBucketPlays(t *testing.T) {
	d1, d2 := repeatDoc(1, StatusPass), repeatDoc(2, StatusPass)
	d1.BucketPlays = []*BucketPlay{{Name: "spikes", Admitted: 20}}
	d2.BucketPlays = []*BucketPlay{{Name: "spikes", Admitted: 20}}
	got, err := Combine([]*Document{d1, d2})
	require.NoError(t, err)
	require.Len(t, got.BucketPlays, 2)
	assert.Equal(t, "spikes", got.BucketPlays[0].Name)
	assert.Equal(t, "spikes (repeat 2)", got.BucketPlays[1].Name)
	assert.Equal(t, "spikes", d2.BucketPlays[0].Name, "the repeat's own document is left alone")
}
