package grader

import (
	"fmt"
	"strings"

	"ratelab/results"
)

// clusterRefusal reports whether err, as Redis Cluster words it, refused a
// script for touching a key outside the slot it runs for: CROSSSLOT for
// declared keys of several slots, the other two for keys a script built
// itself.
func clusterRefusal(err string) bool {
	for _, s := range []string{"CROSSSLOT", "non local key", "do not hash to the same slot"} {
		if strings.Contains(err, s) {
			return true
		}
	}
	return false
}

// checkTask6Cluster judges what the cluster stage measured.
func checkTask6Cluster(g *grading, m task6Cluster) {
	record := func(c results.Check, pass bool, f clusterFlood) {
		if f.timeouts > 0 {
			c.Task, c.Status, c.Score = g.task.ID, results.StatusError, 0
			c.Message = fmt.Sprintf("not judged: %d of %d calls got no answer within %v (a busy machine, or a script that blocks Redis for everyone); %s",
				f.timeouts, f.calls, task6ClusterCallTimeout, c.Message)
			g.record(c)
			return
		}
		g.check(c, pass, nil)
	}

	// The script runs at all: no call refused.
	errs := m.spread.errors + m.hot.errors
	calls := m.spread.calls + m.hot.calls
	failed := sumCalls(m.spreadCalls, func(n nodeCalls) int64 { return n.failed + n.refused }) +
		sumCalls(m.hotCalls, func(n nodeCalls) int64 { return n.failed + n.refused })
	first, key := m.spread.firstError, m.spread.errorKey
	if first == "" {
		first, key = m.hot.firstError, m.hot.errorKey
	}
	var msg string
	switch {
	case errs == 0:
		msg = fmt.Sprintf("all %d calls of %s on %s were answered (the primaries' INFO commandstats count %d failed or rejected scripts)", calls, m.file, m.topology, failed)
	case clusterRefusal(first):
		msg = fmt.Sprintf("%d of %d calls of %s failed, such as on key %q: %s. "+
			"On a Redis Cluster each key lives in one of 16,384 hash slots, owned by one primary, and a script runs on the primary of its KEYS; "+
			"every key the script touches must hash to that same slot. Redis hashes only the part of a key in braces when it has one ({alice}), else the whole name. "+
			"The plumbing names each bucket %s<client> with no braces, so your script must touch KEYS[1] alone: keep tokens and ts as fields of that one hash. "+
			"(A limiter that needs several keys per client puts the client id in braces in each, such as ratelab:{alice}:tokens and ratelab:{alice}:ts, and passes them all in KEYS.) "+
			"The primaries' INFO commandstats count %d failed or rejected scripts",
			errs, calls, m.file, key, first, task6KeyPrefix, failed)
	default:
		msg = fmt.Sprintf("%d of %d calls of %s on %s failed, such as on key %q: %s (the primaries' INFO commandstats count %d failed or rejected scripts)",
			errs, calls, m.file, m.topology, key, first, failed)
	}
	record(results.Check{
		Name: task6CheckClusterRuns, MaxScore: 1, Message: msg,
		Measured: map[string]float64{"calls": float64(calls), "errors": float64(errs), "failed_scripts": float64(failed)},
		Expected: map[string]float64{"errors": 0},
	}, errs == 0, joinFloods(m.spread, m.hot))

	// Every client of the spread flood within its bound.
	over, worst, worstBound := 0, clientTally{}, 0.0
	short := 0 // clients given less than their burst
	for _, c := range m.spread.clients {
		b := m.spread.bound(c)
		if float64(c.admitted) > b {
			over++
			if float64(c.admitted)-b > float64(worst.admitted)-worstBound {
				worst, worstBound = c, b
			}
		}
		if c.admitted < int64(m.spread.burst) && c.admitted+c.refused > int64(m.spread.burst) {
			short++
		}
	}
	n := len(m.spread.clients)
	switch {
	case over > 0:
		msg = fmt.Sprintf("%d of %d clients got more than burst + rate × time, such as %q: %d admitted, bound %.1f = %g + %g/s × %.2f s; want none over: the cluster holds each client's bucket on one primary, which runs its script atomically",
			over, n, worst.id, worst.admitted, worstBound, m.spread.burst, m.spread.rate, worst.lastEnd.Sub(worst.firstSend).Seconds())
	case short > 0:
		msg = fmt.Sprintf("%d of %d clients were refused within their first %g calls; want a full bucket (the burst) for a client never seen", short, n, m.spread.burst)
	default:
		msg = fmt.Sprintf("all %d clients, each sending %g/s to a bucket of %g/s and burst %g from %d workers for %v, stayed within burst + rate × time and got at least their burst",
			n, task6ClusterSendRate, m.spread.rate, m.spread.burst, task6Workers, task6ClusterDuration)
	}
	record(results.Check{
		Name: task6CheckClusterBound, MaxScore: 1, Message: msg,
		Measured: map[string]float64{"clients": float64(n), "clients_over_bound": float64(over), "clients_short_of_burst": float64(short)},
		Expected: map[string]float64{"clients_over_bound": 0, "clients_short_of_burst": 0},
	}, over == 0 && short == 0 && n > 0, m.spread)

	// The spread over the primaries, from their own records.
	total := sumCalls(m.spreadCalls, func(n nodeCalls) int64 { return n.calls })
	least := 1.0
	var shares []string
	measured := map[string]float64{"scripts": float64(total)}
	for i, nc := range m.spreadCalls {
		share := 0.0
		if total > 0 {
			share = float64(nc.calls) / float64(total)
		}
		least = min(least, share)
		shares = append(shares, fmt.Sprintf("%s (slots %d-%d) %d (%.0f%%)", nc.addr, nc.slots[0], nc.slots[1], nc.calls, 100*share))
		measured[fmt.Sprintf("primary%d_share", i+1)] = share
		measured[fmt.Sprintf("primary%d_scripts", i+1)] = float64(nc.calls)
		measured[fmt.Sprintf("primary%d_first_slot", i+1)] = float64(nc.slots[0])
		measured[fmt.Sprintf("primary%d_last_slot", i+1)] = float64(nc.slots[1])
	}
	msg = fmt.Sprintf("the %d clients' scripts, as each primary's INFO commandstats counts them: %s; want each primary ≥ %.0f%%: a client's key decides its primary, so many clients share the work",
		n, strings.Join(shares, ", "), 100*task6SpreadMin)
	record(results.Check{
		Name: task6CheckClusterSpread, MaxScore: 1, Message: msg, Measured: measured,
		Expected: map[string]float64{"share_min": task6SpreadMin},
	}, total > 0 && least >= task6SpreadMin, m.spread)

	// The hot client.
	var hot clientTally
	if len(m.hot.clients) == 1 {
		hot = m.hot.clients[0]
	}
	b := m.hot.bound(hot)
	var onOwner, elsewhere int64
	var others []string
	hotMeasured := map[string]float64{"ok": float64(hot.admitted), "hot_slot": float64(m.hotSlot)}
	for i, nc := range m.hotCalls {
		hotMeasured[fmt.Sprintf("primary%d_scripts", i+1)] = float64(nc.calls)
		if nc.addr == m.hotNode {
			onOwner = nc.calls
			continue
		}
		elsewhere += nc.calls
		others = append(others, fmt.Sprintf("%d", nc.calls))
	}
	pass := float64(hot.admitted) <= b && onOwner > 0 && elsewhere == 0
	hotMeasured["scripts_on_owner"], hotMeasured["scripts_elsewhere"] = float64(onOwner), float64(elsewhere)
	msg = fmt.Sprintf("one client at %.0f/s from %d workers: %d admitted; want ≤ %.1f = %g + %g/s × %.2f s. Its key %s%s is in slot %d, so all %d of its scripts ran on %s (the other primaries ran %s): "+
		"one key lives on one primary, so a hot client gains nothing from more primaries",
		task6Rate, task6Workers, hot.admitted, b, m.hot.burst, m.hot.rate, hot.lastEnd.Sub(hot.firstSend).Seconds(),
		task6KeyPrefix, hot.id, m.hotSlot, onOwner, m.hotNode, strings.Join(others, " and "))
	record(results.Check{
		Name: task6CheckClusterHot, MaxScore: 1, Message: msg,
		Measured: hotMeasured,
		Expected: map[string]float64{"ok_max": b, "scripts_elsewhere": 0},
	}, pass, m.hot)
}

// sumCalls sums f over every primary.
func sumCalls(ns []nodeCalls, f func(nodeCalls) int64) int64 {
	var t int64
	for _, n := range ns {
		t += f(n)
	}
	return t
}

// joinFloods adds up two floods' call counts (for the check that judges
// both).
func joinFloods(a, b clusterFlood) clusterFlood {
	return clusterFlood{calls: a.calls + b.calls, errors: a.errors + b.errors, timeouts: a.timeouts + b.timeouts}
}
