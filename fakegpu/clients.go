// The table of clients the server has seen: who arrived, how they were
// answered, and how long each waited, for /stats' clients section.

package fakegpu

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"ratelab/results"
)

// clientTable counts the answers per client key, for at most
// ClientCapacity keys at once (see ClientCapacity).
type clientTable struct {
	mu   sync.Mutex
	keys map[string]*clientEntry
	// as results.ClientStats
	newKeys, newLimited, forgotten, untracked int64
	otherKeys, extraTokens                    int64
	otherKeyExample                           string
}

type clientEntry struct {
	arrivals                    int64
	requests, limited, admitted int64 // answered
	first, lastAdmit            time.Time
	maxWait                     time.Duration
}

// arrive notes that a request of key arrived at, and returns whether the
// table tracks it, and whether it is the first request of a key the table
// had no entry for (a new key, or one it forgot).
func (t *clientTable) arrive(key string, at time.Time) (tracked, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = make(map[string]*clientEntry, ClientCapacity)
	}
	e := t.keys[key]
	if e == nil {
		if len(t.keys) >= ClientCapacity {
			t.forgetOneOffs()
		}
		if len(t.keys) >= ClientCapacity {
			return false, false
		}
		e = &clientEntry{first: at}
		t.keys[strings.Clone(key)] = e
		t.newKeys++
		first = true
	}
	e.arrivals++
	if at.Before(e.first) {
		e.first = at
	}
	return true, first
}

// forgetOneOffs drops the keys that sent a single request, answered or
// not (an answer that finds no entry counts as untracked). It runs once
// the table is full, and frees the room a flood of one-off keys needs, so
// it costs O(1) per key on average.
func (t *clientTable) forgetOneOffs() {
	for k, e := range t.keys {
		if e.arrivals <= 1 {
			delete(t.keys, k)
			t.forgotten++
		}
	}
}

// answerNotes is what the client table needs of a request's notes.
type answerNotes struct {
	key            string
	tracked, first bool
	arrived        time.Time
	otherKey       string
	tokens         float64
}

// answer notes the answer to a request of key: its status (0 for a
// handler that wrote nothing, which is 200), when it was admitted, and the
// longest wait the limiter reported to it.
func (t *clientTable) answer(n answerNotes, status int, admitted time.Time, maxWait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.first && status == http.StatusTooManyRequests {
		t.newLimited++
	}
	if n.otherKey != "" {
		if t.otherKeys == 0 {
			t.otherKeyExample = fmt.Sprintf("asked about %q for a request of %q", n.otherKey, n.key)
		}
		t.otherKeys++
	}
	if n.tokens > 1 {
		t.extraTokens++
	}
	e := t.keys[n.key]
	if !n.tracked || e == nil {
		t.untracked++
		return
	}
	e.requests++
	e.maxWait = max(e.maxWait, maxWait)
	if status == http.StatusTooManyRequests {
		e.limited++
		return
	}
	e.admitted++
	// The request may have arrived before this entry did: a full table
	// forgets a key that has sent one request, and the next request of
	// the key starts a new entry while the first is still being served.
	// Every admission counted here must lie within the entry's span, or
	// the span is shorter than the one the limiter's grants fall in.
	if n.arrived.Before(e.first) {
		e.first = n.arrived
	}
	if admitted.After(e.lastAdmit) {
		e.lastAdmit = admitted
	}
}

func (t *clientTable) stats() *results.ClientStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := &results.ClientStats{
		Capacity: ClientCapacity, Clients: make([]results.ClientCount, 0, len(t.keys)),
		NewKeys: t.newKeys, NewLimited: t.newLimited, Forgotten: t.forgotten, Untracked: t.untracked,
		OtherKeys: t.otherKeys, OtherKeyExample: t.otherKeyExample, ExtraTokens: t.extraTokens,
	}
	for k, e := range t.keys {
		c := results.ClientCount{
			Key: k, Requests: e.requests, Limited: e.limited, Admitted: e.admitted,
			MaxWaitMS: float64(e.maxWait) / float64(time.Millisecond),
		}
		if e.admitted > 0 {
			c.SpanS = max(0, e.lastAdmit.Sub(e.first).Seconds())
		}
		out.Clients = append(out.Clients, c)
	}
	slices.SortFunc(out.Clients, func(a, b results.ClientCount) int {
		if a.Requests != b.Requests {
			return int(b.Requests - a.Requests)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// clientArrived starts tracking job for its client key.
func (s *Server) clientArrived(j *Job) {
	j.notes.key = j.ClientKey()
	j.notes.tracked, j.notes.first = s.clients.arrive(j.notes.key, j.arrived)
}

// clientAnswered counts job's answer for its client key. A request was
// admitted when the limiter's last grant to it returned or, if it had none,
// when it arrived.
func (s *Server) clientAnswered(j *Job, status int) {
	n := &j.notes
	n.mu.Lock()
	admitted := j.arrived
	if n.granted {
		admitted = n.grantAt
	}
	maxWait := n.maxWait
	seen := answerNotes{key: n.key, tracked: n.tracked, first: n.first, arrived: j.arrived, otherKey: n.otherKey, tokens: n.tokens}
	n.mu.Unlock()
	s.clients.answer(seen, status, admitted, maxWait)
}
