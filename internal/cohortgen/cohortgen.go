// Package cohortgen makes cohorts of results documents for benchmarks: a
// class of learners, each with one graded document of realistic size and
// content (checks with messages and figures, floods with the server's
// /stats every 100 ms, timelines and latency histograms, storms with their
// server samples, the breaker's scenarios). Nothing it makes is committed:
// reports' BenchmarkCohort writes a cohort to a temporary folder, and
// cmd/cohortgen writes one for a measured run of grade cohort.
//
// The sizes follow documents the grader writes (grade all --solutions on
// go1.26.8): indented, as the grader wrote them before results.json became
// compact, a task 2 document is about 620 KB and the average over the
// eight tasks about 280 KB; compact, as it writes them now, about 270 KB
// and 126 KB.
package cohortgen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"ratelab/results"
)

// shape is how much one task's document carries: its floods, how many
// /stats samples each holds, whether the server judged refusals (the
// protected modes), and its checks.
type shape struct {
	runs, samples int
	refusals      bool
	storms        int
	scenarios     int
	checks        int
}

// shapes are the eight tasks' documents.
var shapes = map[string]shape{
	"task1": {runs: 5, samples: 130, checks: 14},
	"task2": {runs: 7, samples: 98, refusals: true, checks: 24},
	"task3": {runs: 6, samples: 75, refusals: true, checks: 22},
	"task4": {storms: 4, samples: 80, checks: 20},
	"task5": {checks: 18},
	"task6": {runs: 2, samples: 55, refusals: true, checks: 20},
	"task7": {scenarios: 2, samples: 300, checks: 16},
	"task8": {runs: 6, samples: 82, refusals: true, checks: 26},
}

// Tasks lists the tasks in the order documents cycle through them.
var Tasks = []string{"task1", "task2", "task3", "task4", "task5", "task6", "task7", "task8"}

// Status shares of a cohort: the rest of the documents pass or fail by
// their checks.
const (
	interruptedShare = 0.04 // stopped by SIGINT or SIGTERM: no score
	failShare        = 0.35 // some checks fail
)

// Document returns learner i's document: task Tasks[i%8], its checks'
// verdicts and figures drawn from rng.
func Document(i int, rng *rand.Rand) *results.Document {
	task := Tasks[i%len(Tasks)]
	sh := shapes[task]
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	d := &results.Document{
		Schema: results.Schema, Task: task, Impl: "exercises",
		Started: start, Finished: start.Add(time.Duration(20+rng.IntN(40)) * time.Second),
		TaskSeconds: map[string]float64{task: 20 + 40*rng.Float64()},
		Seed:        rng.Uint64(),
		Env:         results.Env{GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, Time: start, GraderVersion: results.GraderVersion},
		Integrity:   &results.Integrity{FrozenSHA256: "9f2c4e1b7a", Files: 212, Manifest: "sha256:51c0"},
	}
	failing := rng.Float64() < failShare
	for k := range sh.runs {
		d.Runs = append(d.Runs, run(task, k, sh, failing && k == 0, rng))
	}
	for k := range sh.storms {
		d.Storms = append(d.Storms, storm(k, sh, rng))
	}
	for k := range sh.scenarios {
		d.Scenarios = append(d.Scenarios, scenario(k, sh, rng))
	}
	for k := range sh.checks {
		d.Checks = append(d.Checks, check(task, k, d.Runs, failing && k%5 == 1, rng))
	}
	d.Interrupted = rng.Float64() < interruptedShare
	if d.Interrupted {
		// The checks it did not reach are not in it.
		d.Checks = d.Checks[:len(d.Checks)/2]
	}
	d.Total()
	return d
}

func check(task string, k int, runs []*results.Run, fail bool, rng *rand.Rand) results.Check {
	c := results.Check{Task: task, Name: fmt.Sprintf("invariant %d of %s holds under load", k+1, task), MaxScore: float64(1 + k%4)}
	ok := 760 + 80*rng.Float64()
	c.Measured = map[string]float64{"ok": ok, "p99_ms": 900 + 300*rng.Float64(), "dead": float64(rng.IntN(3))}
	c.Expected = map[string]float64{"ok": 800, "p99_ms": 1000, "tolerance": 0.05}
	if len(runs) > 0 {
		c.Run = runs[k%len(runs)].Name
	}
	c.Message = fmt.Sprintf("%.0f successes against the model's 800 (within 5%%, the spread of 40 seeded runs); p99 %.0f ms against 1000 ms; the server's own count of dead work is %g, and a correct limiter keeps it at 0",
		ok, c.Measured["p99_ms"], c.Measured["dead"])
	if fail {
		c.Status = results.StatusFail
		c.Message = "FAILED: " + c.Message
	} else {
		c.Status, c.Score = results.StatusPass, c.MaxScore
	}
	return c
}

func run(task string, k int, sh shape, slow bool, rng *rand.Rand) *results.Run {
	rate := []float64{80, 120, 160, 240, 480, 240, 100}[k%7]
	r := &results.Run{
		Name: fmt.Sprintf("shed %g/s", rate), Task: task, Target: "http://127.0.0.1:41234",
		OfferedRPS: rate, DurationS: 10, TimeoutS: 5, Expected: int64(rate * 10), Issued: int64(rate * 10),
		Reliable: true, Clock: results.ClockVirtual, DrainedS: 1.5 * rng.Float64(),
		Server:        &results.Server{Mode: "shed", Slots: 8, WorkMS: 100, MaxWaiting: 16, DeadlineMS: 800},
		Predicted:     map[string]float64{"ok": 800, "p99_ms": 1000},
		SampleEveryMS: 100, TimelineBinMS: 250,
	}
	if k > 0 {
		r.Name = fmt.Sprintf("%s, run %d", r.Name, k+1)
	}
	r.OK = min(r.Issued, 780+int64(rng.IntN(40)))
	r.GoodputRPS = float64(r.OK) / r.DurationS
	r.Counts = map[results.Outcome]int64{results.OutcomeOK: r.OK, results.OutcomeUnavailable: r.Issued - r.OK}
	r.P50MS, r.P99MS, r.MaxMS = 450+100*rng.Float64(), 950+100*rng.Float64(), 1200+200*rng.Float64()
	if slow {
		r.P99MS *= 3
	}
	r.PickupP99MS, r.SendLagP99MS, r.SendLagMaxMS = 120, 0.01, 0.02
	var st results.ServerStats
	for s := range sh.samples {
		st.Received += int64(rate / 10)
		st.Finished += 8
		st.Waiting, st.InFlight = int64(rng.IntN(16)), 8
		st.MaxWaiting = max(st.MaxWaiting, st.Waiting)
		st.Shed = st.Received - st.Finished - st.Waiting - st.InFlight
		st.CPUS += 0.01
		st.Goroutines = 20 + int64(rng.IntN(30))
		if sh.refusals {
			st.Refusals = &results.Refusals{Shed: results.RefusalCounts{Judged: st.Shed}}
		}
		r.Samples = append(r.Samples, results.Sample{TS: float64(s)/10 + 1e-9*float64(rng.IntN(9000)), Stats: st})
	}
	r.ServerAfterFlood, r.ServerFinal = st, st
	r.Timeline = map[results.Outcome][]int64{}
	for _, o := range results.Outcomes {
		bins := make([]int64, 41)
		for b := range bins {
			bins[b] = int64(rng.IntN(int(rate / 4)))
		}
		r.Timeline[o] = bins
	}
	r.Histograms = map[results.Outcome]string{}
	for _, o := range results.Outcomes {
		h := hdr.New(1, 60_000_000, 3)
		for range 400 {
			h.RecordValue(int64(100_000 + rng.IntN(900_000)))
		}
		b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
		if err != nil {
			panic(err) // a fresh histogram always encodes
		}
		r.Histograms[o] = string(b)
	}
	return r
}

func storm(k int, sh shape, rng *rand.Rand) *results.Storm {
	s := &results.Storm{
		Name: fmt.Sprintf("storm 400, variant %d", k+1), Kind: "storm", Clock: results.ClockVirtual,
		Jitter: k%2 == 0, HonorRetryAfter: k >= 2, MaxTries: 8, BaseMS: 100, CapMS: 10_000,
		Server:  &results.Server{Mode: "shed", Slots: 8, WorkMS: 100, MaxWaiting: 16},
		Clients: 400, Attempts: 900 + int64(rng.IntN(600)), Succeeded: 400,
		LastDoneS: 8 + 10*rng.Float64(), IdealS: 5, BinMS: 100, SampleEveryMS: 100,
		PeakToMean: 1 + 2*rng.Float64(), EmptyShare: rng.Float64() / 4,
	}
	s.ServerReceived = s.Attempts
	var st results.ServerStats
	for i := range sh.samples {
		st.Received += int64(rng.IntN(20))
		st.Finished += 8
		s.ServerSamples = append(s.ServerSamples, results.Sample{TS: float64(i) / 10, Stats: st})
		s.SendsPerBin = append(s.SendsPerBin, int64(rng.IntN(40)))
	}
	return s
}

func scenario(k int, sh shape, rng *rand.Rand) *results.Scenario {
	sc := &results.Scenario{Name: fmt.Sprintf("dead dependency, breaker %v", k == 1), Breaker: k == 1,
		DeadAtS: 5, DeadForS: 10, SlowCallMS: 2000, CallTimeoutS: 1, RecoveredS: 1 + rng.Float64(), FirstRefusalS: -1}
	for i := range sh.samples {
		sc.Samples = append(sc.Samples, results.ScenarioSample{TS: float64(i) / 10, InFlight: int64(rng.IntN(200)),
			HeapMB: 5 + 10*rng.Float64(), DependencyCalls: int64(i * 7)})
	}
	return sc
}

// Write writes n documents, learner i's as dir/learnerNNNNN/results.json,
// drawn from seed, and returns the bytes written.
func Write(dir string, n int, seed uint64) (int64, error) {
	return WriteSigned(dir, n, seed, nil)
}

// WriteSigned is Write with every document signed under key
// (results.Sign), as a class's CI signs them; a nil key signs nothing.
func WriteSigned(dir string, n int, seed uint64, key []byte) (int64, error) {
	rng := rand.New(rand.NewPCG(seed, 0x636f686f7274))
	var total int64
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("learner%05d", i), "results.json")
		d := Document(i, rng)
		if key != nil {
			if err := results.Sign(d, key); err != nil {
				return total, err
			}
		}
		// The bytes results.WriteFile writes (compact), without its fsync per file:
		// a benchmark's cohort need not survive a crash.
		var buf bytes.Buffer
		if err := d.EncodeCompact(&buf); err != nil {
			return total, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return total, err
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return total, err
		}
		total += int64(buf.Len())
	}
	return total, nil
}
