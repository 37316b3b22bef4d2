package grader

import (
	"fmt"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// histogramOf encodes latencies in milliseconds as a run stores them.
func histogramOf(t *testing.T, ms ...float64) string {
	t.Helper()
	h := hdr.New(1, 60_000_000, 3)
	for _, v := range ms {
		require.NoError(t, h.RecordValue(int64(v*1000)))
	}
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	require.NoError(t, err)
	return string(b)
}

// measuredShed is a shedding row at rate as a 2-core machine measured it:
// ok successes with p99 p99 ms, the rest refused with 503 in about 1 ms.
func measuredShed(t *testing.T, rate, d float64, ok int64, p99 float64) *results.Run {
	issued := int64(rate * d)
	return &results.Run{
		Name: fmt.Sprintf("shed %g/s", rate), OfferedRPS: rate, DurationS: d, TimeoutS: 1, Reliable: true,
		Issued: issued, OK: ok, P99MS: p99,
		Counts:      map[results.Outcome]int64{results.OutcomeOK: ok, results.OutcomeUnavailable: issued - ok},
		Histograms:  map[results.Outcome]string{results.OutcomeUnavailable: histogramOf(t, 0.4, 0.9, 1.2, 2.5)},
		ServerFinal: results.ServerStats{MaxWaiting: 16},
	}
}

func TestTask2ShedChecks(t *testing.T) {
	type row struct {
		name      string
		run       func(rate float64) *results.Run
		failCheck string // "" if all pass
	}
	tests := []row{
		{"measured in 10 s", func(r float64) *results.Run { return measuredShed(t, r, 10, 814, 304.9) }, ""},
		{"measured in a practice run", func(r float64) *results.Run { return measuredShed(t, r, 3, 255, 303) }, ""},
		{"too few", func(r float64) *results.Run { return measuredShed(t, r, 10, 790, 304) }, "successes pinned at capacity"},
		{"a 4 s run that served as many as a 10 s one", func(r float64) *results.Run { return measuredShed(t, r, 4, 816, 304) }, "successes pinned at capacity"},
		{"a line shorter than asked", func(r float64) *results.Run { return measuredShed(t, r, 10, 808, 200) }, "p99 of successes as simulated"},
		{"a line longer than asked", func(r float64) *results.Run { return measuredShed(t, r, 10, 830, 420) }, "p99 of successes as simulated"},
		// A shedder that lets the line grow past its bound: the server saw 40
		// waiting, and the last in line waited past the client's timeout.
		{"an unbounded line", func(r float64) *results.Run {
			run := measuredShed(t, r, 10, 814, 305)
			run.ServerFinal.MaxWaiting = 40
			return run
		}, "the line stays bounded"},
		{"clients that time out", func(r float64) *results.Run {
			run := measuredShed(t, r, 10, 814, 305)
			run.Counts[results.OutcomeTimeout] = 12
			run.Counts[results.OutcomeUnavailable] -= 12
			return run
		}, "no client times out"},
		// A shedder that checks the line only after taking a slot: its 503s
		// wait behind the work, about 100 ms each.
		{"503s after a slot", func(r float64) *results.Run {
			run := measuredShed(t, r, 10, 814, 305)
			run.Histograms[results.OutcomeUnavailable] = histogramOf(t, 95, 101, 103, 180)
			return run
		}, "503s answered at once"},
		{"never a 503", func(r float64) *results.Run {
			run := measuredShed(t, r, 10, 814, 305)
			delete(run.Counts, results.OutcomeUnavailable)
			delete(run.Histograms, results.OutcomeUnavailable)
			return run
		}, "503s answered at once"},
	}
	for _, rate := range []float64{240, 480} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%g/s %s", rate, tt.name), func(t *testing.T) {
				run := tt.run(rate)
				require.NoError(t, predictTask2Shed(run, shedConfig()))
				g := &grading{task: tasks[1], doc: &results.Document{}}
				checkTask2Shed(g, run, shedConfig())
				for _, c := range g.doc.Checks {
					if tt.failCheck != "" && c.Name == run.Name+": "+tt.failCheck {
						assert.Equal(t, results.StatusFail, c.Status, c.Message)
						shownFailing(t, "task2", c)
					} else {
						assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
					}
				}
			})
		}
	}
}

// breakIt3 returns the long line's two runs as measured: without a
// deadline the unprotected collapse, with one about 80/s of goodput.
func breakIt3(t *testing.T, offOK int64, onGoodput float64) (off, on *results.Run) {
	t.Helper()
	off = &results.Run{Name: "240/s, line 2000, no deadline", OfferedRPS: 240, DurationS: 10, TimeoutS: 1, Reliable: true, OK: offOK}
	on = &results.Run{Name: "240/s, line 2000, deadline 800 ms", OfferedRPS: 240, DurationS: 10, TimeoutS: 1, Reliable: true, GoodputRPS: onGoodput}
	require.NoError(t, predictTask2BreakIt3(off, on, shedConfig()))
	return off, on
}

func TestTask2BreakIt3Checks(t *testing.T) {
	const collapses, harmless = "Break It 3: a 2000-long line without a deadline collapses", "Break It 3: the deadline makes the long line harmless"
	ref, refOn := breakIt3(t, 0, 0)
	okOff, goodOn := ref.Predicted["ok"], refOn.Predicted["ok"]/10
	for _, tt := range []struct {
		name      string
		offOK     int64
		onGoodput float64
		fail      string
	}{
		{"as simulated", int64(okOff), goodOn, ""},
		// A deadline that is always on (a zero deadline read as "expire at
		// once", or a default put in its place): the long line without one
		// no longer collapses, most of capacity is served.
		{"a deadline even when none is set", 780, goodOn, collapses},
		// A deadline that is never checked: the long line collapses with
		// it as without it.
		{"a deadline never checked", int64(okOff), okOff / 10, harmless},
		// A deadline checked before the wait instead of after it: nothing
		// is ever dropped, the same collapse.
		{"a deadline checked on arrival", int64(okOff), okOff/10 + 2, harmless},
	} {
		t.Run(tt.name, func(t *testing.T) {
			off, on := breakIt3(t, tt.offOK, tt.onGoodput)
			g := &grading{task: tasks[1], doc: &results.Document{}}
			checkTask2BreakIt3(g, off, on, shedConfig())
			require.Len(t, g.doc.Checks, 2)
			for _, c := range g.doc.Checks {
				if c.Name == tt.fail {
					assert.Equal(t, results.StatusFail, c.Status, c.Message)
					shownFailing(t, "task2", c)
				} else {
					assert.Equal(t, results.StatusPass, c.Status, "%s: %s", c.Name, c.Message)
				}
			}
		})
	}
}
