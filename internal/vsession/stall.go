// Watching that virtual time moves: a session whose clock stands still
// for too long of real time is stopped with a message saying why.

package vsession

import (
	"sync/atomic"
	"time"
)

// StallLimit is how long, in real time, a request may go on while the
// bubble's clock does not move before the session gives up on it: the sign
// of a goroutine that never blocks. Work that merely takes real time moves
// the clock now and then (a 10 s flood moves it thousands of times), so
// slow code is not mistaken for stuck code.
const StallLimit = 10 * time.Second

// StallMessage is the Error of the reply a stalled session sends before
// it ends.
const StallMessage = "virtual time stood still: the bubble's clock did not move for 10s of real time while a request was being carried out. Something in the code never blocks: a loop that waits by checking time.Now() or a channel without sleeping keeps a bubble's clock from moving (and burns a core on the wall clock), and so does a Redis script that never returns"

// progress is how a session tells, on the real clock, whether its bubble's
// clock is moving.
type progress struct {
	busy atomic.Bool  // a request is being carried out
	now  atomic.Int64 // the bubble's clock, Unix nanoseconds, as beat last saw it
}

// beatEvery is beat's period in virtual time: off the 10 µs grid of the
// floods' events (ties.Grid) by a nanosecond a beat, so that it
// almost never shares an instant with them.
const beatEvery = 10*time.Millisecond + time.Nanosecond

// beat records the bubble's clock every beatEvery of virtual time while
// on says so (true on, false off), until on is closed. Off, it waits
// without a timer, so that the clock can jump far ahead. It runs inside
// the bubble.
func (p *progress) beat(on <-chan bool) {
	beating := false
	for {
		p.now.Store(time.Now().UnixNano())
		var tick <-chan time.Time
		if beating {
			tick = time.After(beatEvery)
		}
		select {
		case b, ok := <-on:
			if !ok {
				return
			}
			beating = b
		case <-tick:
		}
	}
}

// watch calls stalled if, while a request is being carried out, the
// bubble's clock stays still for limit of real time. It runs outside the
// bubble, until stop is closed.
func (p *progress) watch(stop <-chan struct{}, limit time.Duration, stalled func()) {
	tick := time.NewTicker(limit / 20)
	defer tick.Stop()
	last, since := p.now.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if v := p.now.Load(); v != last || !p.busy.Load() {
			last, since = v, time.Now()
			continue
		}
		if time.Since(since) >= limit {
			stalled()
			return
		}
	}
}
