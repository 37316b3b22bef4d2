package model

import (
	"ratelab/model/ties"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucketAdmits(t *testing.T) {
	spike := func(at time.Duration, n int) []time.Duration {
		var a []time.Duration
		for i := range n {
			a = append(a, at+time.Duration(i)*ties.Grid)
		}
		return a
	}
	steady := func(rate float64, d time.Duration) []time.Duration {
		var a []time.Duration
		for seq := range uint64(rate * d.Seconds()) {
			a = append(a, ties.Send(rate, seq))
		}
		return a
	}
	tests := []struct {
		name     string
		arrivals []time.Duration
		want     int
	}{
		{"a spike of 30 against burst 10", spike(time.Second, 30), 10},
		{"two spikes 6 s apart: full again", append(spike(6*time.Second, 30), spike(12*time.Second, 30)...), 20},
		{"two spikes 1 s apart: 4 tokens back", append(spike(6*time.Second, 30), spike(7*time.Second, 30)...), 14},
		// From the first request at 1/6 s to the last at 10 s: 10 + 4 × 9.83 = 49.3.
		{"steady 6/s for 10 s", steady(6, 10*time.Second), 49},
		{"steady 3/s never waits", steady(3, 10*time.Second), 30},
		{"nothing", nil, 0},
	}
	for _, tt := range tests {
		if got := BucketAdmits(tt.arrivals, 4, 10); got != tt.want {
			t.Errorf("BucketAdmits(%s, 4, 10) = %d; want %d", tt.name, got, tt.want)
		}
	}
}

// The replay is the simulation's bucket: a steady client at 6/s against
// rate 4, burst 10, admitted as many times in both.
func TestBucketAdmitsIsTheSimulation(t *testing.T) {
	for _, rate := range []float64{3, 6, 9.5, 40} {
		s := Sim{Slots: 1000, Work: time.Millisecond, BucketRate: 4, BucketBurst: 10,
			Clients: []SimClient{{Name: "c", Rate: rate, Duration: 10 * time.Second, Timeout: time.Second}}}
		res, err := s.Run()
		require.NoError(t, err)
		var a []time.Duration
		for seq := range uint64(rate * 10) {
			a = append(a, ties.Send(rate, seq))
		}
		assert.Equal(t, res.Count(-1, SimOK), BucketAdmits(a, 4, 10), "at %v/s", rate)
	}
}
