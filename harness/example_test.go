package harness_test

import (
	"context"
	"fmt"
	"time"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/results"
)

// A second of traffic at half the server's capacity, against a fresh fake
// GPU in this process: every request is served, and the server's own
// counts agree with what the client saw.
func ExampleFlood() {
	srv, err := fakegpu.New(fakegpu.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	in, err := fakegpu.Listen(srv, "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Close()
	run, err := harness.Flood(context.Background(), harness.Options{
		URL: in.URL + "/generate", Rate: 40, Duration: time.Second, Stats: harness.ServerStats(srv),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("sent %d, %d ok, the server finished %d\n", run.Issued, run.Counts[results.OutcomeOK], run.ServerFinal.Finished)
	// Output: sent 40, 40 ok, the server finished 40
}

// A schedule is fixed before a flood starts: here spikes of 30 requests
// every 6 s, the arrivals a bursty client sends. A spike's requests leave
// one grid step (10 µs) apart, so that no two share an instant.
func ExampleNewSchedule() {
	s, err := harness.NewSchedule(harness.Pattern{Kind: harness.PatternSpikes, Spike: 30, Every: 6 * time.Second}, 0, 12*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Count(), "requests")
	fmt.Println("the first spike starts at", s.Due(0), "and ends at", s.Due(29))
	fmt.Println("the second starts at", s.Due(30))
	// Output:
	// 60 requests
	// the first spike starts at 6s and ends at 6.00029s
	// the second starts at 12s
}
