package model_test

import (
	"fmt"
	"time"

	"ratelab/model"
)

// ExampleOverload compares task 2's policy (FIFO with a 300 ms deadline
// checked at the front) with task 9's refinements on one schedule: a
// fifth of the load interactive, the rest batch, 60 s at twice and six
// times the capacity of 80 requests a second, every client giving up
// after 1 s. Goodput is successes per second; wasted is slot-time spent
// on requests whose client had gone.
func ExampleOverload() {
	policies := []struct {
		name     string
		deadline time.Duration
		line     int
		o        *model.Overload
	}{
		{"line of 16, 300 ms (task 2)", 300 * time.Millisecond, 16, nil},
		{"time-bounded line", 0, 0, &model.Overload{TimeBound: true, ClientDeadlines: true}},
		{"adaptive LIFO", 0, 0, &model.Overload{Order: model.OrderAdaptiveLIFO, AdaptiveAfter: 100 * time.Millisecond, ClientDeadlines: true}},
		{"queue timeout 100/25 ms", 0, 0, &model.Overload{Interval: 100 * time.Millisecond, Target: 25 * time.Millisecond, ClientDeadlines: true}},
		{"priority, time-bounded", 0, 0, &model.Overload{TimeBound: true, ClientDeadlines: true, Priority: true}},
	}
	fmt.Println("load  policy                       goodput/s  interactive  batch  p50 ms  p99 ms  wasted s")
	for _, x := range []float64{2, 6} {
		for _, p := range policies {
			d := 60 * time.Second
			inter := model.SimClient{Name: "i", Rate: 0.2 * x * 80, Duration: d, Timeout: time.Second}
			batch := model.SimClient{Name: "b", Rate: 0.8 * x * 80, Duration: d, Timeout: time.Second, Batch: true}
			s := model.Sim{Slots: 8, Work: 100 * time.Millisecond, Deadline: p.deadline, MaxWaiting: p.line, DropAbandoned: true,
				Clients: []model.SimClient{inter, batch}, Overload: p.o}
			res, err := s.Run()
			if err != nil {
				fmt.Println(err)
				return
			}
			share := func(c int) float64 {
				return 100 * float64(res.Count(c, model.SimOK)) / (s.Clients[c].Rate * d.Seconds())
			}
			fmt.Printf("%gx    %-28s %9.1f  %10.0f%%  %4.0f%%  %6d  %6d  %8.1f\n", x, p.name,
				float64(res.Count(-1, model.SimOK))/d.Seconds(), share(0), share(1),
				res.Quantile(-1, model.SimOK, 0.5).Milliseconds(), res.Quantile(-1, model.SimOK, 0.99).Milliseconds(),
				(time.Duration(res.Stats.Dead) * s.Work).Seconds())
		}
	}
	// Output:
	// load  policy                       goodput/s  interactive  batch  p50 ms  p99 ms  wasted s
	// 2x    line of 16, 300 ms (task 2)       80.3          50%    50%     295     300       0.0
	// 2x    time-bounded line                 81.2          57%    49%     993     998       0.0
	// 2x    adaptive LIFO                     80.7          32%    55%     104     125       0.0
	// 2x    queue timeout 100/25 ms           80.0          56%    48%     118     124       0.0
	// 2x    priority, time-bounded            81.2         100%    38%     984     996       0.0
	// 6x    line of 16, 300 ms (task 2)       80.3          17%    17%     298     300       0.0
	// 6x    time-bounded line                 81.2          19%    16%     997     999       0.0
	// 6x    adaptive LIFO                     81.1          11%    18%     101     249       0.0
	// 6x    queue timeout 100/25 ms           80.1          19%    16%     122     124       0.0
	// 6x    priority, time-bounded            81.2          84%     0%     962     998       0.0
}
