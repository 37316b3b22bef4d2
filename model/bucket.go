package model

import (
	"math"
	"time"
)

// BucketAdmits replays arrivals (instants from a common start, in
// order) of one client against a token bucket of rate tokens per second
// and burst tokens, as the simulation's buckets do: the bucket is full at
// the client's first request, refills lazily up to burst, and admits a
// request when it holds at least one token, taking it. It returns how
// many were admitted.
//
// It is the lesson's token-bucket play as arithmetic: a spike of 30 sent
// 10 µs apart to a full bucket of burst 10 refilling 4 per second admits
// exactly 10 (the spike lasts 0.29 ms, 0.00116 of a token).
func BucketAdmits(arrivals []time.Duration, rate, burst float64) int {
	admitted := 0
	tokens := burst
	for i, at := range arrivals {
		if i > 0 {
			tokens = math.Min(burst, tokens+rate*(at-arrivals[i-1]).Seconds())
		}
		if tokens < 1 {
			continue
		}
		tokens--
		admitted++
	}
	return admitted
}
