package model_test

import (
	"fmt"
	"math"
	"time"

	"ratelab/model"
)

// The unprotected server of the lesson's first experiment: 8 slots of
// 100 ms (80 requests per second), clients that give up after 1 s, and
// 10 s of traffic. Past capacity, the more is offered, the less succeeds.
// The closed form treats the line as a fluid; the simulation serves whole
// requests, eight at a time, and gains the few that the fluid rounds away.
func ExampleUnprotected() {
	for _, rate := range []float64{120, 160, 240} {
		m := model.Unprotected{Capacity: 80, Work: 100 * time.Millisecond, Timeout: time.Second, Rate: rate, Duration: 10 * time.Second}
		s := model.Sim{Slots: 8, Work: m.Work, Clients: []model.SimClient{{Name: "flood", Rate: rate, Duration: m.Duration, Timeout: m.Timeout}}}
		r, err := s.Run()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%.0f/s: %.0f of %.0f succeed (simulated: %d)\n", rate, m.Successes(), m.Total(), r.Count(0, model.SimOK))
	}
	// Output:
	// 120/s: 216 of 1200 succeed (simulated: 216)
	// 160/s: 144 of 1600 succeed (simulated: 144)
	// 240/s: 108 of 2400 succeed (simulated: 112)
}

// The same server shedding load: a line of at most 16 waiting requests
// in front of the 8 slots, so that nothing waits longer than it can be
// served within the client's timeout. Goodput stays at capacity however
// much is offered.
func ExampleSim_shedding() {
	for _, rate := range []float64{240, 480} {
		s := model.Sim{
			Slots: 8, Work: 100 * time.Millisecond, MaxWaiting: 16, DropAbandoned: true,
			Clients: []model.SimClient{{Name: "flood", Rate: rate, Duration: 10 * time.Second, Timeout: time.Second}},
		}
		r, err := s.Run()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%.0f/s: %d succeed, %d shed\n", rate, r.Count(0, model.SimOK), r.Stats.Shed)
	}
	// Output:
	// 240/s: 816 succeed, 1584 shed
	// 480/s: 816 succeed, 3984 shed
}

// A client's spike against its own bucket: a full bucket admits its burst
// at once and then its rate, whatever is sent.
func ExampleBucketAdmits() {
	var spike []time.Duration
	for i := range 30 {
		spike = append(spike, time.Duration(i)*10*time.Microsecond)
	}
	fmt.Println(model.BucketAdmits(spike, 4, 10))

	// 10 s of a steady 200/s against 70/s with a burst of 20.
	var steady []time.Duration
	for i := range 2000 {
		steady = append(steady, time.Duration(i)*5*time.Millisecond)
	}
	fmt.Println(model.BucketAdmits(steady, 70, 20), "of at most", math.Floor(20+70*10))
	// Output:
	// 10
	// 719 of at most 720
}
