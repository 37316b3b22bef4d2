// BROKEN (task 2, panics): every function panics with a plain error; each check must fail with the panic's message and the grader must not crash.

package shedding

import (
	"net/http"
	"time"

	"ratelab/fakegpu"
)

func RetryAfterSeconds(d time.Duration) int { panic("boom in RetryAfterSeconds") }

func DrainTime(waiting int, cfg fakegpu.Config) time.Duration { panic("boom in DrainTime") }

func Admit(w http.ResponseWriter, r *http.Request, job *fakegpu.Job) {
	var m map[string]int
	m["x"]++ // assignment to entry in nil map
}
