package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// TestCompareClocks matches virtual floods and storms with their
// wall-clock twins and holds each figure to its band: the reference's
// figures agree, a wall clock that loses successes or a storm twice as
// slow does not.
func TestCompareClocks(t *testing.T) {
	run := func(name string, ok int64, clock results.Clock) *results.Run {
		return &results.Run{Task: "task1", Name: name, OK: ok, Clock: clock}
	}
	storm := func(jitter bool, s float64, attempts int64, clock results.Clock) *results.Storm {
		name := "storm 400, no jitter"
		if jitter {
			name = "storm 400, full jitter"
		}
		return &results.Storm{Name: name, Kind: "storm", Jitter: jitter, LastDoneS: s, Attempts: attempts, Clock: clock}
	}
	virtual := &results.Document{
		Runs: []*results.Run{
			run("120/s", 216, results.ClockVirtual), run("240/s", 112, results.ClockVirtual),
			run("many keys", 5000, results.ClockWall), // the wall-clock part of a virtual grading
			run("only here", 10, results.ClockVirtual),
		},
		Storms: []*results.Storm{storm(false, 31.6, 2800, results.ClockVirtual), storm(true, 7.4, 2400, results.ClockVirtual)},
	}
	wall := &results.Document{
		Runs:   []*results.Run{run("120/s", 221, results.ClockWall), run("240/s", 106, results.ClockWall), run("many keys", 4000, results.ClockWall)},
		Storms: []*results.Storm{storm(false, 31.7, 2810, results.ClockWall), storm(true, 8.5, 2435, results.ClockWall)},
	}
	figures, unmatched := CompareClocks(virtual, wall)
	assert.Equal(t, []string{"task1: only here"}, unmatched)
	require.Len(t, figures, 6)
	for _, f := range figures {
		assert.True(t, f.Within(), "%+v", f)
	}

	wall.Runs[0].OK = 200           // 16 fewer than 216: outside ±10.8
	wall.Storms[0].LastDoneS = 37.0 // lockstep: outside ±15%
	wall.Storms[1].Attempts = 3100  // jitter: outside ±25%
	figures, _ = CompareClocks(virtual, wall)
	var outside []string
	for _, f := range figures {
		if !f.Within() {
			outside = append(outside, f.Name+": "+f.Figure)
		}
	}
	assert.Equal(t, []string{"120/s: successes", "storm 400, no jitter: seconds to the last completion", "storm 400, full jitter: attempts"}, outside)
}

// Task 8's fixed window and sliding counter count per window aligned on the
// Unix epoch, so their successes move by up to one window's limit per
// client with where the flood starts; the log's and the bucket's do not.
// (CI measured the reference's fixed window at 4 × 50 in virtual time and
// 4 × 60 on the wall clock.)
func TestCompareClocksEpochWindows(t *testing.T) {
	server := func(counting string) *results.Run {
		return &results.Run{Task: "task8", Name: "server, " + counting, Clients: 4,
			Server: &results.Server{Counting: counting, CountingLimit: 10, CountingWindowMS: 2000}}
	}
	var virtual, wall results.Document
	for _, c := range []string{"fixed", "counter", "log", "bucket"} {
		v, w := server(c), server(c)
		v.Clock, v.OK, w.OK = results.ClockVirtual, 200, 240
		virtual.Runs, wall.Runs = append(virtual.Runs, v), append(wall.Runs, w)
	}
	figures, _ := CompareClocks(&virtual, &wall)
	require.Len(t, figures, 4)
	within := map[string]bool{}
	for _, f := range figures {
		within[f.Name] = f.Within()
	}
	assert.Equal(t, map[string]bool{"server, fixed": true, "server, counter": true, "server, log": false, "server, bucket": false}, within)
}
