package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server of every task: 8 slots of 100 ms, 80 requests a second.
const (
	olSlots = 8
	olWork  = 100 * time.Millisecond
	olCap   = 80.0
)

// olSim is the fake GPU server under clients, with policy o.
func olSim(o *Overload, clients ...SimClient) Sim {
	return Sim{Slots: olSlots, Work: olWork, DropAbandoned: true, Clients: clients, Overload: o}
}

// olClient sends rate requests a second for d, each giving up after 1 s.
func olClient(name string, rate float64, d time.Duration, batch bool) SimClient {
	return SimClient{Name: name, Rate: rate, Duration: d, Timeout: time.Second, Batch: batch}
}

func runOverload(t *testing.T, s Sim) *SimResult {
	t.Helper()
	res, err := s.Run()
	require.NoError(t, err)
	return res
}

// A zero Overload is no Overload: the same outcome for every request.
func TestOverloadZeroChangesNothing(t *testing.T) {
	for _, s := range []Sim{
		{Slots: 8, Work: olWork, Clients: []SimClient{{Rate: 240, Duration: 10 * time.Second, Timeout: time.Second}}},
		{Slots: 8, Work: olWork, MaxWaiting: 16, Deadline: 300 * time.Millisecond, DropAbandoned: true,
			Clients: []SimClient{{Rate: 480, Duration: 10 * time.Second, Timeout: time.Second}}},
		{Slots: 8, Work: olWork, DropAbandoned: true, BucketRate: 1, BucketBurst: 20,
			Clients: []SimClient{{Name: "a", Rate: 3, Duration: 10 * time.Second, Timeout: time.Second}, {Name: "b", Rate: 200, Duration: 10 * time.Second, Timeout: time.Second, Batch: true}}},
		{Slots: 8, Work: olWork, DropAbandoned: true,
			Clients: []SimClient{{Name: "i", Rate: 160, Duration: 5 * time.Second, Timeout: time.Second}, {Name: "b", Rate: 160, Duration: 5 * time.Second, Timeout: time.Second, Batch: true}}},
	} {
		without := runOverload(t, s)
		s.Overload = &Overload{}
		with := runOverload(t, s)
		assert.Equal(t, without.Stats, with.Stats)
		assert.Equal(t, without.Requests, with.Requests)
	}
}

// Bounding the line in time gives task 2's line of 16 when every client's
// deadline is 300 ms: (300 − 100) ms × 8 slots / 100 ms, and nobody let in
// gives up. A flood's first eight requests take the slots within 17 ms of
// each other, and the slots keep that phase, freeing eight at a time: the
// line comes in whole rows, so 250 ms gives 16 as well (the second row
// starts about 116 ms on and ends before 250 ms; a third would not).
func TestTimeBoundIsTask2sLine(t *testing.T) {
	for _, c := range []struct {
		deadline time.Duration
		line     int
	}{{300 * time.Millisecond, 16}, {301 * time.Millisecond, 16}, {900 * time.Millisecond, 64}, {250 * time.Millisecond, 16}} {
		cl := olClient("a", 480, 10*time.Second, false)
		cl.Timeout = c.deadline
		res := runOverload(t, olSim(&Overload{TimeBound: true}, cl))
		assert.Equal(t, c.line, res.Stats.MaxWaiting, "deadline %s", c.deadline)
		assert.Zero(t, res.Count(-1, SimTimeout), "deadline %s: nobody let in gives up", c.deadline)
	}
}

// The queue timeout keeps goodput at capacity six times over it, and each
// success waited at most Interval, and at most Target once the line stood.
func TestQueueTimeoutUnderSixTimesCapacity(t *testing.T) {
	o := &Overload{Interval: 100 * time.Millisecond, Target: 25 * time.Millisecond}
	d := 60 * time.Second
	res := runOverload(t, olSim(o, olClient("a", 6*olCap, d, false)))
	ok := res.Count(-1, SimOK)
	assert.GreaterOrEqual(t, float64(ok), 0.99*olCap*d.Seconds(), "goodput at capacity")
	assert.Positive(t, res.Stats.QueueTimedOut)
	late := 0
	for _, q := range res.Requests {
		if q.Outcome == SimOK {
			assert.LessOrEqual(t, q.Waited, o.Interval)
			if q.Sent > time.Second && q.Waited > o.Target {
				late++
			}
		}
	}
	assert.Zero(t, late, "a standing line lets nobody wait past Target")
	fifo := runOverload(t, olSim(nil, olClient("a", 6*olCap, d, false)))
	assert.Less(t, res.Quantile(-1, SimOK, 0.5), fifo.Quantile(-1, SimOK, 0.5)/4, "successes come far sooner than behind an unbounded line")
}

// Adaptive LIFO serves oldest first while the line does not stand, and
// under sustained overload its successes come sooner than FIFO's.
func TestAdaptiveLIFO(t *testing.T) {
	burst := olClient("burst", 400, 200*time.Millisecond, false) // 80 at once: a line that drains in a second
	o := &Overload{Order: OrderAdaptiveLIFO, AdaptiveAfter: 2 * time.Second}
	res := runOverload(t, olSim(o, burst))
	var last time.Duration
	for _, q := range res.Requests { // ordered by Sent
		if q.Outcome == SimOK {
			start := q.Sent + q.Waited
			assert.GreaterOrEqual(t, start, last, "FIFO order while the line stands less than AdaptiveAfter")
			last = start
		}
	}
	d := 60 * time.Second
	o = &Overload{Order: OrderAdaptiveLIFO, AdaptiveAfter: 100 * time.Millisecond}
	lifo := runOverload(t, olSim(o, olClient("a", 2*olCap, d, false)))
	fifo := runOverload(t, olSim(nil, olClient("a", 2*olCap, d, false)))
	assert.Less(t, lifo.Quantile(-1, SimOK, 0.5), fifo.Quantile(-1, SimOK, 0.5)/4)
	assert.GreaterOrEqual(t, float64(lifo.Count(-1, SimOK)), 0.99*olCap*d.Seconds(), "goodput at capacity")
}

// Client deadlines: no slot-time goes to a request whose client will have
// gone, where the server that works on what it accepted wastes most of it.
func TestClientDeadlinesWasteNoWork(t *testing.T) {
	d := 20 * time.Second
	s := olSim(&Overload{ClientDeadlines: true}, olClient("a", 3*olCap, d, false))
	s.DropAbandoned = false
	res := runOverload(t, s)
	assert.Zero(t, res.Stats.Dead)
	s.Overload = nil
	blind := runOverload(t, s)
	assert.Greater(t, blind.Stats.Dead, blind.Count(-1, SimOK), "the blind server spends most slot-time on clients that left")
	assert.Greater(t, res.Count(-1, SimOK), 4*blind.Count(-1, SimOK))
}

// Priority: at twice capacity with a fifth of it interactive, every
// interactive request is served and batch takes the shedding; at six
// times, interactive alone is over capacity and takes every slot; below
// capacity batch is served too.
func TestPriorityShedsBatchFirst(t *testing.T) {
	o := &Overload{TimeBound: true, ClientDeadlines: true, Priority: true}
	d := 60 * time.Second
	for _, x := range []float64{2, 6} {
		res := runOverload(t, olSim(o, olClient("i", 0.2*x*olCap, d, false), olClient("b", 0.8*x*olCap, d, true)))
		want := min(0.2*x*olCap, olCap) * d.Seconds()
		assert.GreaterOrEqual(t, float64(res.Count(0, SimOK)), 0.99*want, "%gx: interactive served", x)
		assert.GreaterOrEqual(t, float64(res.Count(-1, SimOK)), 0.98*olCap*d.Seconds(), "%gx: goodput at capacity", x)
		if x == 2 {
			assert.Positive(t, res.Count(1, SimOK), "batch gets what interactive leaves")
		}
	}
	calm := runOverload(t, olSim(o, olClient("i", 0.2*0.8*olCap, d, false), olClient("b", 0.8*0.8*olCap, d, true)))
	assert.Equal(t, len(calm.Requests), calm.Count(-1, SimOK), "below capacity everyone is served")
}

// The per-client cap: a greedy client holds at most its cap, and a polite
// one beside it is served in full.
func TestPerClientInFlight(t *testing.T) {
	o := &Overload{PerClientInFlight: 3}
	d := 30 * time.Second
	res := runOverload(t, olSim(o, olClient("greedy", 6*olCap, d, false), olClient("polite", 0.25*olCap, d, false)))
	assert.Equal(t, 3, res.Stats.MaxClientInFlight)
	assert.Equal(t, int(0.25*olCap*d.Seconds()), res.Count(1, SimOK))
	assert.Positive(t, res.Stats.InFlightLimited)
}

// Priority with the time bound: an interactive request let in is never
// one that times out, even when batch clients are patient and wait long.
func TestPriorityAdmitsOnlyWhatFinishes(t *testing.T) {
	o := &Overload{TimeBound: true, ClientDeadlines: true, Priority: true}
	d := 20 * time.Second
	i := olClient("i", 2*olCap, d, false)
	i.Timeout = 301 * time.Millisecond
	b := olClient("b", 2*olCap, d, true)
	b.Timeout = 5 * time.Second
	res := runOverload(t, olSim(o, i, b))
	assert.Zero(t, res.Count(0, SimTimeout), "an interactive request let in finishes before its deadline")
	assert.GreaterOrEqual(t, float64(res.Count(0, SimOK)), 0.99*olCap*d.Seconds(), "interactive alone fills the server")
	assert.Zero(t, res.Stats.Dead)
}

// A burst that takes every slot at once: the time bound lets in only what
// the staggered slot ends can serve before the deadline.
func TestTimeBoundOnABurst(t *testing.T) {
	c := olClient("a", 2000, 10*time.Millisecond, false) // 20 at once
	c.Timeout = 250 * time.Millisecond
	res := runOverload(t, olSim(&Overload{TimeBound: true}, c))
	assert.Zero(t, res.Count(-1, SimTimeout), "nobody let in gives up")
	assert.Equal(t, 16, res.Count(-1, SimOK), "two rows of 8 slots fit in 250 ms")
}
