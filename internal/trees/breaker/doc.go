// Package breaker is the adapter through which programs run task 7's circuit breaker:
// it takes the code from exercises/breaker under the build tag ratelab_ex_breaker,
// and from solutions/breaker without it (see internal/layout). From names the
// tree it took.
package breaker

import "time"

// Settings configure the breaker, field for field as the tree's
// BreakerSettings.
type Settings struct {
	Window       int           // how many of the latest calls are judged
	FailureRatio float64       // opens when more than this share failed
	MinCalls     int           // the fewest calls judged at all
	Cooldown     time.Duration // how long it stays open
	HalfOpenMax  int           // trial calls out at once
}
