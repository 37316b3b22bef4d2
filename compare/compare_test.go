package compare

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// doc is a small task1 document: one check on one flood with ok
// successes, on clock.
func doc(clock results.Clock, ok int64) *results.Document {
	d := &results.Document{
		Schema: results.Schema, Task: "task1", Impl: "solutions",
		Checks: []results.Check{{Task: "task1", Name: "120/s: successes", Status: results.StatusPass, Score: 2, MaxScore: 2,
			Measured: map[string]float64{"ok": float64(ok)}, Run: "120/s"}},
		Runs: []*results.Run{{Name: "120/s", Clock: clock, OfferedRPS: 120, DurationS: 10, OK: ok,
			GoodputRPS: float64(ok) / 10, Counts: map[results.Outcome]int64{results.OutcomeOK: ok},
			Samples: []results.Sample{{TS: 0.1}}}},
	}
	d.Total()
	return d
}

func input(docs ...*results.Document) *Input {
	in := &Input{Path: "side"}
	for i, d := range docs {
		in.Files = append(in.Files, filepath.Join("side", string(rune('a'+i)), "results.json"))
		in.Docs = append(in.Docs, d)
	}
	return in
}

func find(t *testing.T, c *Comparison, section, key string) Figure {
	t.Helper()
	for _, f := range c.Figures {
		if f.Section == section && f.Key == key {
			return f
		}
	}
	t.Fatalf("no figure %s %s", section, key)
	return Figure{}
}

func docs(clock results.Clock, oks ...int64) *Input {
	var ds []*results.Document
	for _, ok := range oks {
		ds = append(ds, doc(clock, ok))
	}
	return input(ds...)
}

// In virtual time a figure is exact: its delta, and no test.
func TestVirtualDeltaIsExact(t *testing.T) {
	c, err := Compare(docs(results.ClockVirtual, 216), docs(results.ClockVirtual, 230), Options{})
	require.NoError(t, err)
	f := find(t, c, "run", "ok")
	assert.Equal(t, ChangeExact, f.Change)
	assert.Equal(t, results.ClockVirtual, f.Clock)
	assert.Equal(t, 14.0, f.Delta)
	require.NotNil(t, f.DeltaPct)
	assert.InDelta(t, 100*14.0/216, *f.DeltaPct, 1e-9)
	assert.Nil(t, f.Test)
	assert.Equal(t, ChangeExact, find(t, c, "check", "ok").Change)
	assert.InDelta(t, 1.4, find(t, c, "run", "goodput_rps").Delta, 1e-9)
	assert.Equal(t, 0.0, find(t, c, "score", "score").Delta)
}

// The records' figures are read from their typed fields: nested structs
// and maps by their JSON names, time series left out.
func TestFiguresOfARun(t *testing.T) {
	r := &results.Run{Name: "x", OK: 3, Counts: map[results.Outcome]int64{results.OutcomeTooMany: 2},
		ServerFinal: results.ServerStats{Dead: 7}, Samples: []results.Sample{{TS: 1}}}
	got := map[string]float64{}
	for _, kv := range figures(r) {
		got[kv.key] = kv.value
	}
	assert.Equal(t, 3.0, got["ok"])
	assert.Equal(t, 2.0, got["counts.429"])
	assert.Equal(t, 7.0, got["server_final.dead"])
	for k := range got {
		assert.False(t, strings.HasPrefix(k, "samples"), "figure %s from a time series", k)
	}
}

// Clearly different wall-clock repeats are significant; identical ones,
// and 3+3 runs (whose smallest p-value is 0.1), are "~".
func TestMannWhitney(t *testing.T) {
	tests := []struct {
		name string
		a, b []int64
		want Change
	}{
		{"clearly different", []int64{100, 101, 102, 103, 104}, []int64{200, 201, 202, 203, 204}, ChangeSignificant},
		{"identical", []int64{100, 101, 102, 103, 104}, []int64{100, 101, 102, 103, 104}, ChangeSame},
		{"all equal", []int64{100, 100, 100, 100}, []int64{100, 100, 100, 100}, ChangeSame},
		{"overlapping", []int64{100, 120, 101, 119, 110}, []int64{105, 118, 102, 121, 111}, ChangeSame},
		{"three runs a side", []int64{100, 101, 102}, []int64{200, 201, 202}, ChangeSame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compare(docs(results.ClockWall, tt.a...), docs(results.ClockWall, tt.b...), Options{})
			require.NoError(t, err)
			f := find(t, c, "run", "ok")
			require.NotNil(t, f.Test, "a wall-clock figure with repeats is tested")
			assert.Equal(t, tt.want, f.Change, "p=%g", f.Test.P)
			assert.Equal(t, tt.want == ChangeSignificant, f.Test.P < 0.05, "p=%g", f.Test.P)
			assert.Equal(t, DefaultAlpha, f.Test.Alpha)
		})
	}
	c, err := Compare(docs(results.ClockWall, 1, 2, 3), docs(results.ClockWall, 7, 8, 9), Options{})
	require.NoError(t, err)
	assert.Contains(t, strings.Join(find(t, c, "run", "ok").Test.Warnings, ";"), "need >= 4 samples")
}

// One run a side on the wall clock: the delta, untested.
func TestSingleWallRunIsUntested(t *testing.T) {
	c, err := Compare(docs(results.ClockWall, 100), docs(results.ClockWall, 90), Options{})
	require.NoError(t, err)
	f := find(t, c, "run", "ok")
	assert.Equal(t, ChangeUntested, f.Change)
	assert.Equal(t, -10.0, f.Delta)
	assert.Nil(t, f.Test)
}

// An interrupted document has no score and is no failure; what it
// finished is compared.
func TestInterrupted(t *testing.T) {
	stopped := doc(results.ClockVirtual, 230)
	stopped.Interrupted = true
	stopped.Total()
	c, err := Compare(docs(results.ClockVirtual, 216), input(stopped), Options{})
	require.NoError(t, err)
	assert.Equal(t, 1, c.B.Interrupted)
	assert.Equal(t, 1, c.B.Statuses[results.StatusInterrupted])
	assert.Zero(t, c.B.Statuses[results.StatusFail])
	assert.Equal(t, ChangeOnlyA, find(t, c, "score", "score").Change)
	assert.Equal(t, 14.0, find(t, c, "run", "ok").Delta)
	var b strings.Builder
	require.NoError(t, Text(&b, c, TextOptions{}))
	assert.Contains(t, b.String(), "interrupted")
	assert.NotRegexp(t, `\bfail\b`, b.String(), "an interrupted run is no failure")
}

// Documents of different tasks are not compared; the error names them.
func TestDifferentTasks(t *testing.T) {
	other := doc(results.ClockVirtual, 1)
	other.Task = "task2"
	_, err := Compare(docs(results.ClockVirtual, 1), input(other), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "task2")
	assert.Contains(t, err.Error(), "results.json")
}

// Text prints "~" for a difference that is not significant, and the
// change in percent with its p-value for one that is.
func TestText(t *testing.T) {
	c, err := Compare(docs(results.ClockWall, 100, 101, 102, 103), docs(results.ClockWall, 200, 201, 202, 203), Options{})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, Text(&b, c, TextOptions{Changed: true}))
	assert.Contains(t, b.String(), "+98.5%")
	assert.Contains(t, b.String(), "p=0.029 n=4")

	c, err = Compare(docs(results.ClockWall, 100, 101, 102, 103), docs(results.ClockWall, 101, 100, 103, 102), Options{})
	require.NoError(t, err)
	b.Reset()
	require.NoError(t, Text(&b, c, TextOptions{}))
	assert.Contains(t, b.String(), " ~ ")
}

// A document of grade --repeat N counts as its N runs: its checks'
// repeats and its runs of every repeat are the samples.
func TestCombinedDocumentIsItsRepeats(t *testing.T) {
	combined := func(oks ...int64) *Input {
		var ds []*results.Document
		for _, ok := range oks {
			ds = append(ds, doc(results.ClockWall, ok))
		}
		d, err := results.Combine(ds)
		require.NoError(t, err)
		return input(d)
	}
	c, err := Compare(combined(100, 101, 102, 103), combined(200, 201, 202, 203), Options{})
	require.NoError(t, err)
	assert.Equal(t, 4, c.A.Repeats)
	for _, key := range []string{"ok"} {
		for _, section := range []string{"check", "run"} {
			f := find(t, c, section, key)
			assert.Equal(t, 4, f.A.N, "%s %s", section, key)
			assert.Equal(t, ChangeSignificant, f.Change, "%s %s", section, key)
		}
	}
	assert.Equal(t, 4, find(t, c, "score", "score").A.N)
}
