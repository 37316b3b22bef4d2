// BROKEN (task 2, data-race): counts requests in a plain global from every handler at once; the race detector must catch it.

package shedding

import (
	"net/http"
	"time"

	"ratelab/fakegpu"
	"ratelab/lab"
)

var served int

func RetryAfterSeconds(d time.Duration) int {
	if d <= time.Second {
		return 1
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int(s)
}

func DrainTime(waiting int, cfg fakegpu.Config) time.Duration {
	if waiting <= 0 {
		return 0
	}
	if time.Duration(waiting) > lab.InfDuration/cfg.Work {
		return lab.InfDuration
	}
	return time.Duration(waiting) * cfg.Work / time.Duration(cfg.Slots)
}

func Admit(w http.ResponseWriter, r *http.Request, job *fakegpu.Job) {
	served++ // unsynchronised: a data race between concurrent requests
	if err := job.Acquire(r.Context()); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	job.Work()
	job.Release()
	fakegpu.WriteOK(w)
}
