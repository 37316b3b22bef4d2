package reports

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"ratelab/fakegpu"
	"ratelab/model"
	"ratelab/results"
)

// goodputModel holds the model's goodput against offered load for every
// choice of overload duration and client timeout the page's sliders offer,
// precomputed here so the page needs no model of its own: a slider only
// swaps the lines' data.
type goodputModel struct {
	Durations []string `json:"durations"` // the sliders' labels
	Timeouts  []string `json:"timeouts"`
	// Lines maps a series id to its points for each choice:
	// Lines[id][duration][timeout] = [[offered, goodput], ...].
	Lines map[string][][][][2]float64 `json:"lines"`

	durations, timeouts []time.Duration
}

// The model's series on a goodput chart.
const (
	seriesUnprotected = "model-none" // the closed form: model.Unprotected
	seriesShed        = "model-shed" // the simulated shedding server
)

// Choices the sliders always offer, besides the floods' own: the lesson's
// "drag the overload duration out to a minute", and timeouts from impatient
// to patient.
var (
	modelDurations = []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute}
	modelTimeouts  = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}
)

// shedFactors are the offered loads, in multiples of capacity, at which the
// shedding server is simulated; between them the line is straight.
var shedFactors = []float64{0, 0.5, 1, 1.1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8}

// goodputGrid returns the model's lines from 0 to xmax requests per second,
// for the floods' durations and timeouts besides the usual choices. Lines
// are cached on the site, so two pages of one document share them.
func (s *site) goodputGrid(xmax float64, runs []*results.Run) *goodputModel {
	durs := slices.Clone(modelDurations)
	tmos := slices.Clone(modelTimeouts)
	for _, r := range runs {
		if r == nil {
			continue
		}
		if d := seconds(r.DurationS); d > 0 && d <= 10*time.Minute {
			durs = append(durs, d)
		}
		if t := seconds(r.TimeoutS); t > 0 && t <= 10*time.Minute {
			tmos = append(tmos, t)
		}
	}
	slices.Sort(durs)
	slices.Sort(tmos)
	durs, tmos = slices.Compact(durs), slices.Compact(tmos)
	key := fmt.Sprint(xmax, durs, tmos)
	if m, ok := s.grids[key]; ok {
		return m
	}
	m := computeGrid(shedConfig(), xmax, durs, tmos)
	s.grids[key] = m
	return m
}

func seconds(s float64) time.Duration {
	if math.IsNaN(s) || s <= 0 || s > 1e6 {
		return 0
	}
	return time.Duration(math.Round(s*1000)) * time.Millisecond
}

// computeGrid fills a goodputModel for the lesson's server cfg: the closed
// form for the unprotected server, and the discrete-event simulation for
// the shedding one (line cfg.MaxWaiting, deadline cfg.Deadline). The
// simulations run on every core; the result does not depend on their order.
func computeGrid(cfg fakegpu.Config, xmax float64, durs, tmos []time.Duration) *goodputModel {
	m := &goodputModel{durations: durs, timeouts: tmos, Lines: map[string][][][][2]float64{}}
	for _, d := range durs {
		m.Durations = append(m.Durations, durationLabel(d))
	}
	for _, t := range tmos {
		m.Timeouts = append(m.Timeouts, durationLabel(t))
	}
	capacity := cfg.Capacity()
	none := make([][][][2]float64, len(durs))
	shed := make([][][][2]float64, len(durs))
	type job struct{ i, j, k int }
	var jobs []job
	var rates []float64
	for _, f := range shedFactors {
		if r := f * capacity; r <= xmax {
			rates = append(rates, r)
		}
	}
	for i, d := range durs {
		none[i] = make([][][2]float64, len(tmos))
		shed[i] = make([][][2]float64, len(tmos))
		for j, t := range tmos {
			none[i][j] = unprotectedLine(cfg, xmax, d, t)
			shed[i][j] = make([][2]float64, len(rates))
			for k := range rates {
				jobs = append(jobs, job{i, j, k})
			}
		}
	}
	work := make(chan job)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range work {
				rate, d, t := rates[jb.k], durs[jb.i], tmos[jb.j]
				shed[jb.i][jb.j][jb.k] = [2]float64{num(rate), num(simGoodput(cfg, rate, d, t))}
			}
		}()
	}
	for _, jb := range jobs {
		work <- jb
	}
	close(work)
	wg.Wait()
	m.Lines[seriesUnprotected] = none
	m.Lines[seriesShed] = shed
	return m
}

// unprotectedLine is the closed form's goodput, successes / D, from 0 to
// xmax, with a point exactly at capacity where the line turns.
func unprotectedLine(cfg fakegpu.Config, xmax float64, d, t time.Duration) [][2]float64 {
	const steps = 120
	capacity := cfg.Capacity()
	var pts [][2]float64
	add := func(rate float64) {
		if rate == 0 {
			pts = append(pts, [2]float64{0, 0})
			return
		}
		m := model.Unprotected{Capacity: capacity, Work: cfg.Work, Timeout: t, Rate: rate, Duration: d}
		pts = append(pts, [2]float64{num(rate), num(m.Successes() / d.Seconds())})
	}
	for k := 0; k <= steps; k++ {
		rate := xmax * float64(k) / steps
		prev := xmax * float64(k-1) / steps
		if k > 0 && prev < capacity && rate > capacity {
			add(capacity)
		}
		add(rate)
	}
	return pts
}

// simGoodput simulates the shedding server of cfg under one flood and
// returns its successes per second of sending.
func simGoodput(cfg fakegpu.Config, rate float64, d, t time.Duration) float64 {
	if rate == 0 {
		return 0
	}
	s := cfg.Sim()
	s.Clients = []model.SimClient{{Name: "flood", Rate: rate, Duration: d, Timeout: t}}
	res, err := s.Run()
	if err != nil {
		return math.NaN()
	}
	return float64(res.Count(-1, model.SimOK)) / d.Seconds()
}

// shedConfig is the lesson's shedding server.
func shedConfig() fakegpu.Config {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = fakegpu.ModeShed
	return cfg
}

// durationLabel writes a slider's value: "500 ms", "10 s", "1 min".
func durationLabel(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// index returns the position of v in vs, or 0.
func index(vs []time.Duration, v time.Duration) int {
	if i := slices.Index(vs, v); i >= 0 {
		return i
	}
	return 0
}
