package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"ratelab/results"
)

func TestCheckTask3Fairness(t *testing.T) {
	const name = "fairness: the interactive client is served beside a backfill"
	// flood is the fairness flood of 10 s: a backfill client at 240/s and
	// an interactive one at 10/s. The simulation serves 99 of the
	// interactive client's 100, so the floor is 99 − 4 = 95.
	flood := func(backfillOK, interactiveOK int64) (backfill, interactive *results.Run) {
		backfill = &results.Run{Name: "backfill 240/s", Issued: 2400, OK: backfillOK, Reliable: true,
			Predicted: map[string]float64{"ok": 718, "ok_bound": 720}}
		interactive = &results.Run{Name: "interactive 10/s", Issued: 100, OK: interactiveOK, Reliable: true,
			Predicted: map[string]float64{"ok": 99}}
		return backfill, interactive
	}
	for _, tt := range []struct {
		name                      string
		backfillOK, interactiveOK int64
		status                    results.Status
	}{
		// The reference: each client its own bucket; the prototype served
		// 98 to 99 of 100 over four runs.
		{"a bucket per client", 718, 98, results.StatusPass},
		{"a bucket per client, a few requests meeting a full line", 717, 95, results.StatusPass},
		// wrong/task3/shared-bucket-untested: one bucket for every key.
		// Once the backfill has emptied it, a token drips in every 14.3 ms
		// and goes to whoever asks first: the backfill sends 24 times as
		// often, so the interactive client gets about 10/250 of the 70
		// tokens a second, some 28 of its 100 (a third or less), and the
		// backfill the rest.
		{"one bucket shared by every client", 692, 28, results.StatusFail},
		// A limiter that admits everything, such as one that reads the
		// rate per millisecond (70,000 tokens a second): only shedding is
		// left, which refuses the interactive client as often as anyone.
		// 80 of the 250 requests a second are served, the interactive
		// client's share a third of what it sent.
		{"no limiter, only shedding", 770, 32, results.StatusFail},
		// An interactive client that sent nothing cannot show anything.
		{"nothing sent", 718, 0, results.StatusFail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			backfill, interactive := flood(tt.backfillOK, tt.interactiveOK)
			if tt.name == "nothing sent" {
				interactive.Issued = 0
			}
			c := judged(t, 3, name, func(g *grading) { checkTask3Fairness(g, backfill, interactive) })
			assert.Equal(t, tt.status, c.Status, c.Message)
		})
	}
	// A flood whose generator fell behind is not judged, whoever it was.
	backfill, interactive := flood(692, 28)
	backfill.Reliable = false
	c := judged(t, 3, name, func(g *grading) { checkTask3Fairness(g, backfill, interactive) })
	assert.Equal(t, results.StatusError, c.Status, c.Message)
	assert.Equal(t, "backfill 240/s", c.Run)
}
