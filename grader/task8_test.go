package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// task8Reference is cmd/counting's measurements of the reference on a busy
// 2-core machine: the boundary burst 48.6 ms before and 51.0 ms after a
// boundary of a 2 s window at 100 per window; the synchronised return of
// 100 clients at 10 per second; memory at 100 and 10,000 per minute;
// the disagreement on 5,790 requests.
func task8Reference() *results.Counting {
	b := func(lim string, before, after, burst int) results.CountingBoundary {
		return results.CountingBoundary{
			Limiter: lim, Limit: 100, WindowMS: 2000, Burst: burst, Sent: 200,
			AdmittedBefore: before, AdmittedAfter: after,
			FirstStartMS: -48.6, BeforeEndMS: -48.5, AfterStartMS: 51.0, LastEndMS: 51.1,
		}
	}
	r := func(lim string, peak float64) results.CountingReturn {
		return results.CountingReturn{
			Limiter: lim, Clients: 100, Limit: 10, WindowMS: 1000, BinMS: 100,
			Admitted: 4000, PeakOverMean: peak, LateP99MS: 3.7,
		}
	}
	m := func(lim string, limit, clients int, perClient float64) results.CountingMemory {
		return results.CountingMemory{
			Limiter: lim, Limit: limit, WindowMS: 60000, Clients: clients,
			HeapBytes: int64(perClient * float64(clients)), BytesPerClient: perClient,
		}
	}
	return &results.Counting{
		Tree: "solutions/counting",
		Boundary: []results.CountingBoundary{
			b(results.LimiterFixed, 100, 100, 0),
			b(results.LimiterLog, 100, 0, 0),
			b(results.LimiterCounter, 100, 2, 0),
			b(results.LimiterBucket, 10, 4, 10),
		},
		Return: []results.CountingReturn{
			r(results.LimiterFixed, 10), r(results.LimiterLog, 1), r(results.LimiterCounter, 1.11), r(results.LimiterBucket, 1.02),
		},
		Memory: []results.CountingMemory{
			m(results.LimiterFixed, 100, 1000, 60), m(results.LimiterLog, 100, 1000, 1123),
			m(results.LimiterCounter, 100, 1000, 55), m(results.LimiterBucket, 100, 1000, 82),
			m(results.LimiterFixed, 10000, 200, 33), m(results.LimiterLog, 10000, 200, 98359),
			m(results.LimiterCounter, 10000, 200, 34), m(results.LimiterBucket, 10000, 200, 49),
		},
		Disagreement: &results.CountingDisagreement{
			Seed: 1, Clients: 100, Limit: 10, WindowMS: 500, Seconds: 3, Requests: 5790,
			Differ: 938, CounterOnly: 472, LogOnly: 466, LogAdmitted: 4705, CounterAdmitted: 4711, ModelDiffer: 938,
		},
	}
}

func TestTask8Checks(t *testing.T) {
	all := []string{
		task8CheckFixedBoundary, task8CheckLogBoundary, task8CheckCounterBoundary, task8CheckBucketBoundary,
		task8CheckFixedReturn, task8CheckSmoothReturn, task8CheckLogMemory, task8CheckCountsMemory, task8CheckDisagreement,
	}
	require.Len(t, task8Planned(), len(all)+len(task8ServerPlanned()))
	tests := []struct {
		name  string
		wrong func(c *results.Counting)
		fail  []string // the checks that must fail; the others pass
	}{
		{"the reference", func(c *results.Counting) {}, nil},
		// The same at the edges of every bound.
		{"the reference at the edges", func(c *results.Counting) {
			c.Boundary[2].AdmittedAfter = 100 * 51 / 2000 // ⌊100 × 51.1/2000⌋ = 2
			c.Boundary[3].AdmittedAfter = 100 * 99 / 2000 // ⌊100 × 99.7/2000⌋ = 4
			c.Return[0].PeakOverMean = task8FixedPeakMin
			c.Return[2].PeakOverMean = task8SmoothPeakMax
			c.Memory[5].BytesPerClient = task8LogGrowthMin * c.Memory[1].BytesPerClient
			c.Memory[6].BytesPerClient = task8CountsGrowthFactor*c.Memory[2].BytesPerClient + task8CountsGrowthSlack
			c.Disagreement.Differ = 938 + 28 // 0.5 points of 5,790 is 28.95
		}, nil},
		// wrong/task8/fixed-window-per-key-start: each key's window starts
		// at its first request, 48.6 ms before the boundary, so the second
		// batch is refused; and the clients, starting evenly over a
		// window, come back evenly.
		{"a fixed window from each key's first request", func(c *results.Counting) {
			c.Boundary[0].AdmittedAfter = 0
			c.Return[0].PeakOverMean = 1.0
		}, []string{task8CheckFixedBoundary, task8CheckFixedReturn}},
		// A "log" that keeps a count per window (a fixed window under
		// another name): both batches pass, its memory does not grow,
		// and its clients come back together.
		{"a log that is a fixed window", func(c *results.Counting) {
			c.Boundary[1].AdmittedAfter = 100
			c.Return[1].PeakOverMean = 10
			c.Memory[5].BytesPerClient = 33
		}, []string{task8CheckLogBoundary, task8CheckSmoothReturn, task8CheckLogMemory}},
		// wrong/task8/counter-elapsed-share: right after the boundary the
		// previous window weighs e/window, almost nothing, so nearly the
		// whole second batch passes; on the trace it strays far from the
		// log.
		// At a window's start the previous window weighs nothing, so the
		// refused clients all come back then, as under a fixed window.
		{"a counter weighting the elapsed share", func(c *results.Counting) {
			c.Boundary[2].AdmittedAfter = 97
			c.Return[2].PeakOverMean = 10
			*c.Disagreement = results.CountingDisagreement{
				Seed: 7, Clients: 100, Limit: 10, WindowMS: 500, Seconds: 3, Requests: 5991,
				Differ: 2097, CounterOnly: 544, LogOnly: 1553, ModelDiffer: 970,
			}
		}, []string{task8CheckCounterBoundary, task8CheckSmoothReturn, task8CheckDisagreement}},
		// wrong/task8/counter-keeps-timestamps: a timestamp per request
		// in each window, where two integers would do.
		{"a counter keeping timestamps", func(c *results.Counting) {
			c.Memory[6].BytesPerClient = 98000
		}, []string{task8CheckCountsMemory}},
		// wrong/task8/bucket-rate-per-second: limit tokens a second with a
		// 2 s window, twice the rate: 10 tokens more in the 99.7 ms.
		{"a bucket at limit per second", func(c *results.Counting) {
			c.Boundary[3].AdmittedAfter = 9
		}, []string{task8CheckBucketBoundary}},
		// A bucket that tells refused clients to wait for the next window
		// (the fixed window's wait): they come back together.
		{"a bucket waiting for the window's end", func(c *results.Counting) {
			c.Return[3].PeakOverMean = 9.5
		}, []string{task8CheckSmoothReturn}},
		// A fixed window that refuses a fresh key's first requests (counts
		// from 1): fewer than 2 × limit.
		{"a fixed window that admits too few", func(c *results.Counting) {
			c.Boundary[0].AdmittedBefore, c.Boundary[0].AdmittedAfter = 99, 99
		}, []string{task8CheckFixedBoundary}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := task8Reference()
			tt.wrong(c)
			for _, name := range all {
				chk := judged(t, 8, name, func(g *grading) { checkTask8(g, c) })
				want := wantStatus(name, tt.fail)
				assert.Equal(t, want, chk.Status, "%s: %s", name, chk.Message)
			}
		})
	}
}

// Timing the machine spoilt is not a verdict: a batch of the boundary
// burst that ran across the boundary is not judged, pass or fail, and a
// synchronised return that fails with late retries is not judged either,
// while one that passes stands.
func TestTask8BusyMachineIsNotJudged(t *testing.T) {
	c := task8Reference()
	for i := range c.Boundary {
		c.Boundary[i].BeforeEndMS = 0.2
	}
	c.Return[0].PeakOverMean = 3 // would fail
	for i := range c.Return {
		c.Return[i].LateP99MS = 40
	}
	g := &grading{task: tasks[7], doc: &results.Document{}}
	checkTask8(g, c)
	require.Len(t, g.doc.Checks, len(task8Planned())-len(task8ServerPlanned()))
	status := map[string]results.Status{}
	for _, chk := range g.doc.Checks {
		status[chk.Name] = chk.Status
		if chk.Status == results.StatusError {
			assert.Contains(t, chk.Message, "not judged")
		}
	}
	for _, name := range []string{task8CheckFixedBoundary, task8CheckLogBoundary, task8CheckCounterBoundary, task8CheckBucketBoundary, task8CheckFixedReturn} {
		assert.Equal(t, results.StatusError, status[name], name)
	}
	for _, name := range []string{task8CheckSmoothReturn, task8CheckLogMemory, task8CheckCountsMemory, task8CheckDisagreement} {
		assert.Equal(t, results.StatusPass, status[name], name)
	}
}

// Missing measurements are the grader's fault: errors, never a pass.
func TestTask8MissingMeasurements(t *testing.T) {
	g := &grading{task: tasks[7], doc: &results.Document{}}
	checkTask8(g, &results.Counting{})
	require.Len(t, g.doc.Checks, len(task8Planned())-len(task8ServerPlanned()))
	for _, chk := range g.doc.Checks {
		assert.Equal(t, results.StatusError, chk.Status, "%s: %s", chk.Name, chk.Message)
	}
}
