package grader

import (
	"fmt"
	"math"
	"slices"
	"time"

	"ratelab/fakegpu"
	"ratelab/model"
)

// Expectations come from two models. The closed form (model.Unprotected)
// covers the unprotected server and the bucket's hard bound b + r·T. Where
// there is no closed form (the shedding server's successes and p99, the
// long line with a deadline, the bucket in front of shedding, the retry
// storms) the grader asks the discrete-event simulation (model.Sim) of the
// same server under the same flood, and states its tolerance around the
// simulated value. Simulations are deterministic and take milliseconds.

// QuickDuration is how long each flood sends in a practice run (--quick).
const QuickDuration = 3 * time.Second

// floodDuration returns how long a flood the lesson runs for d sends in
// this grading: d, or QuickDuration in a practice run.
func (g *grading) floodDuration(d time.Duration) time.Duration {
	if g.opts.Quick {
		return QuickDuration
	}
	return d
}

// simFlood simulates cfg's server under open-loop clients, each with its
// own name (and so its own bucket in the bucket modes).
func simFlood(cfg fakegpu.Config, clients ...model.SimClient) (*model.SimResult, error) {
	s := cfg.Sim()
	s.Clients = clients
	res, err := s.Run()
	if err != nil {
		return nil, fmt.Errorf("simulate %s: %w", cfg.Mode, err)
	}
	return res, nil
}

// simOne simulates one client sending rate per second for d, each request
// giving up after timeout, and returns its successes and their p99.
func simOne(cfg fakegpu.Config, rate float64, d, timeout time.Duration) (ok int, p99 time.Duration, err error) {
	res, err := simFlood(cfg, model.SimClient{Name: "flood", Rate: rate, Duration: d, Timeout: timeout})
	if err != nil {
		return 0, 0, err
	}
	return res.Count(-1, model.SimOK), res.Quantile(-1, model.SimOK, 0.99), nil
}

// stormSeeds is how many seeds a jittered storm is simulated with: jitter
// is random, so one seed says little about how long a storm may take.
const stormSeeds = 41

// stormForecast is the simulation of a storm over stormSeeds seeds.
type stormForecast struct {
	// Median and High (the 39th of 41, about the 95th percentile) of the
	// time the last client was done, and of the attempts sent.
	MedianS, HighS               float64
	MedianAttempts, HighAttempts float64
	GaveUp                       int // clients that gave up, at the median seed
}

// simStorm simulates clients all sending at once against cfg's server and
// retrying with full jitter or none, as task 4's storm does.
func simStorm(cfg fakegpu.Config, clients, tries int, base, ceiling time.Duration, jitter bool) (stormForecast, error) {
	seeds := stormSeeds
	if !jitter {
		seeds = 1 // nothing random: every seed gives the same storm
	}
	var times, attempts []float64
	var gaveUp []int
	for seed := range seeds {
		// All clients within a millisecond, as the storm starts them.
		res, err := simFlood(cfg, model.SimClient{
			Name: "storm", Rate: float64(clients) * 1000, Duration: time.Millisecond, Timeout: 30 * time.Second,
			Retry: model.Retry{MaxAttempts: tries, Base: base, Cap: ceiling, Jitter: jitter, Seed: uint64(seed + 1)},
		})
		if err != nil {
			return stormForecast{}, err
		}
		times = append(times, res.ClientsDone.Seconds())
		attempts = append(attempts, float64(res.Attempts()))
		gaveUp = append(gaveUp, len(res.Requests)-res.Count(-1, model.SimOK))
	}
	slices.Sort(times)
	slices.Sort(attempts)
	slices.Sort(gaveUp)
	mid, high := len(times)/2, int(math.Ceil(0.95*float64(len(times))))-1
	return stormForecast{
		MedianS: times[mid], HighS: times[high],
		MedianAttempts: attempts[mid], HighAttempts: attempts[high],
		GaveUp: gaveUp[mid],
	}, nil
}
