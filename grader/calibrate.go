package grader

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"ratelab/harness"
)

// Calibration is the grader's self-check of the machine before it floods:
// can the load generator keep the lesson's rates, and do timers fire on
// time? A machine that cannot would make a correct exercise look wrong.
type Calibration struct {
	OK            bool
	Issued        int64
	Expected      int64
	SendLagP99MS  float64
	SleepOverMS   float64 // mean overshoot of a 100 ms sleep
	Reason        string
	CalibrateRate float64
}

// Calibration limits. The floods need every request sent on time (within 5
// ms at p99, as harness marks reliable runs) at up to 480/s, and the fake
// GPU's 100 ms of work must not overrun by more than a few percent, or the
// capacity the model assumes (80/s) is not the server's.
const (
	calibrateRate     = 480.0
	calibrateDuration = time.Second
	maxSleepOver      = 5 * time.Millisecond
)

// calibrateTries is how many times Calibrate measures before it gives up:
// a process's first flood pays for starting goroutines and connections,
// and a passing moment of load on a 2-core machine should not stop a
// grading run. A machine that is really too slow fails every try.
const calibrateTries = 3

// Calibrate floods a do-nothing handler at 480/s for 1 s and times twenty
// 100 ms sleeps, up to three times until one passes. It takes 3 to 9 s.
func Calibrate(ctx context.Context) (*Calibration, error) {
	var c *Calibration
	for range calibrateTries {
		var err error
		if c, err = calibrateOnce(ctx); err != nil || c.OK {
			return c, err
		}
	}
	return c, nil
}

func calibrateOnce(ctx context.Context) (*Calibration, error) {
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ts.Close()
	run, err := harness.Flood(ctx, harness.Options{URL: ts.URL, Rate: calibrateRate, Duration: calibrateDuration})
	if err != nil {
		return nil, err
	}
	var over time.Duration
	const sleeps = 20
	for range sleeps {
		start := time.Now()
		time.Sleep(100 * time.Millisecond)
		over += time.Since(start) - 100*time.Millisecond
	}
	c := &Calibration{
		OK: true, Issued: run.Issued, Expected: run.Expected, SendLagP99MS: run.SendLagP99MS,
		SleepOverMS: float64(over/sleeps) / float64(time.Millisecond), CalibrateRate: calibrateRate,
	}
	switch {
	case !run.Reliable:
		c.OK = false
		c.Reason = fmt.Sprintf("the load generator cannot keep %g requests/s here: %v", calibrateRate, run.Warnings)
	case time.Duration(c.SleepOverMS*float64(time.Millisecond)) > maxSleepOver:
		c.OK = false
		c.Reason = fmt.Sprintf("timers here overshoot a 100 ms sleep by %.1f ms on average (want at most %s), so the fake GPU would run below its 80/s", c.SleepOverMS, maxSleepOver)
	}
	return c, nil
}
