// Package model holds the lesson's predictions, against which the grader
// checks what the floods measured: closed forms such as [Unprotected] and
// [BucketAdmits], and [Sim], a discrete-event simulation of the fake GPU
// server that covers shedding, deadlines, buckets and retries. Virtual-time
// floods match [Sim] exactly; wall-clock floods match it within the noise
// bands the grader states.
package model

import (
	"math"
	"time"
)

// Unprotected describes a flood of an unprotected server: an unbounded FIFO
// line in front of Capacity requests per second, each taking Work, and
// clients that give up after Timeout.
type Unprotected struct {
	Capacity float64       // C, requests per second the server finishes
	Work     time.Duration // S, time one request holds a slot
	Timeout  time.Duration // T, the client's timeout
	Rate     float64       // λ, requests per second offered
	Duration time.Duration // D, how long requests are sent
}

// Window returns how long, from the start of the flood, arrivals still get
// an answer in time: the line grows at λ−C per second, so a request
// arriving at t waits (λ−C)·t/C and succeeds while that plus S is within T,
// that is for t < C·(T−S)/(λ−C). Below capacity every arrival succeeds and
// Window returns +Inf.
func (m Unprotected) Window() time.Duration {
	if m.Rate <= m.Capacity {
		return time.Duration(math.MaxInt64)
	}
	s := m.Capacity * (m.Timeout - m.Work).Seconds() / (m.Rate - m.Capacity)
	return time.Duration(math.Max(s, 0) * float64(time.Second))
}

// Successes returns how many requests get an answer within their timeout:
// λ·min(Window, D).
func (m Unprotected) Successes() float64 {
	w := math.Min(m.Window().Seconds(), m.Duration.Seconds())
	return m.Rate * w
}

// Total returns how many requests the flood sends: floor(λ·D).
func (m Unprotected) Total() float64 { return math.Floor(m.Rate * m.Duration.Seconds()) }

// Latency returns the predicted latency of the request at quantile q (0 to
// 1) of arrival order, for clients that wait however long it takes: a request
// arriving at t waits (λ−C)·t/C in line, then works for S. Requests are
// answered in arrival order, so the latency quantile is the arrival quantile.
func (m Unprotected) Latency(q float64) time.Duration {
	t := q * m.Duration.Seconds()
	wait := math.Max(m.Rate-m.Capacity, 0) * t / m.Capacity
	return time.Duration((wait + m.Work.Seconds()) * float64(time.Second))
}

// Backlog returns how many requests still wait in line when sending stops:
// (λ−C)·D, or 0 below capacity.
func (m Unprotected) Backlog() float64 {
	return math.Max(m.Rate-m.Capacity, 0) * m.Duration.Seconds()
}
