package compare

import (
	"slices"
	"strings"

	"ratelab/results"
)

// figureKey names one figure across documents.
type figureKey struct{ section, item, key string }

// extracted is every figure of one side's documents, one value per graded
// run, and every check's statuses.
type extracted struct {
	order   []figureKey
	values  map[figureKey][]float64
	virtual map[figureKey]bool // every value came from virtual time

	checkOrder [][2]string
	statuses   map[[2]string][]results.Status

	repeats    int
	allVirtual bool // every timed record of every document is virtual
}

// extract reads every figure of in's documents.
func extract(in *Input) *extracted {
	e := &extracted{values: map[figureKey][]float64{}, virtual: map[figureKey]bool{}, statuses: map[[2]string][]results.Status{}}
	timed, virtual := 0, 0
	for _, d := range in.Docs {
		e.repeats += max(1, d.Repeat)
		t, v := clocks(d)
		timed, virtual = timed+t, virtual+v
	}
	e.allVirtual = timed > 0 && timed == virtual
	for _, d := range in.Docs {
		e.document(d)
	}
	return e
}

// add records one value of figure k.
func (e *extracted) add(k figureKey, v float64, virtual bool) {
	if _, ok := e.values[k]; !ok {
		e.order = append(e.order, k)
		e.virtual[k] = true
	}
	e.values[k] = append(e.values[k], v)
	e.virtual[k] = e.virtual[k] && virtual && !wallOnly(k.key)
}

// record adds every figure of one record (a run, a storm, ...).
func (e *extracted) record(section, item string, rec any, virtual bool) {
	for _, kv := range figures(rec) {
		e.add(figureKey{section, item, kv.key}, kv.value, virtual)
	}
}

// document adds d's figures and verdicts.
func (e *extracted) document(d *results.Document) {
	t, v := clocks(d)
	docVirtual := t > 0 && t == v
	interrupted := d.Interrupted || d.Status == results.StatusInterrupted

	// The score: none for an interrupted run; one per repeat of a
	// combined document, from its checks' repeats.
	if !interrupted {
		if d.Repeat > 1 {
			per := make([]float64, d.Repeat)
			for _, c := range d.Checks {
				for _, r := range c.Repeats {
					if r.Repeat >= 1 && r.Repeat <= d.Repeat {
						per[r.Repeat-1] += r.Score
					}
				}
			}
			for _, s := range per {
				e.add(figureKey{"score", "", "score"}, s, docVirtual)
			}
		} else {
			e.add(figureKey{"score", "", "score"}, d.Score, docVirtual)
		}
	}

	runClock := map[string]bool{}
	for _, r := range d.Runs {
		if r != nil {
			runClock[r.Name] = r.IsVirtual()
		}
	}
	for _, sc := range d.Scenarios {
		if sc != nil && sc.Run != nil {
			runClock[sc.Run.Name] = sc.Run.IsVirtual()
		}
	}
	all := d.Task == "all"
	for _, c := range d.Checks {
		k := [2]string{c.Task, c.Name}
		if _, ok := e.statuses[k]; !ok {
			e.checkOrder = append(e.checkOrder, k)
		}
		virtual, named := runClock[c.Run]
		if !named {
			virtual = docVirtual
		}
		item := itemName(c.Task, c.Name, all)
		if len(c.Repeats) == 0 {
			e.statuses[k] = append(e.statuses[k], c.Status)
			for _, key := range sortedKeys(c.Measured) {
				e.add(figureKey{"check", item, key}, c.Measured[key], virtual)
			}
			continue
		}
		for _, r := range c.Repeats {
			e.statuses[k] = append(e.statuses[k], r.Status)
			for _, key := range sortedKeys(r.Measured) {
				e.add(figureKey{"check", item, key}, r.Measured[key], virtual)
			}
		}
	}

	for _, r := range d.Runs {
		if r != nil && !r.Interrupted {
			e.record("run", baseName(r.Name), r, r.IsVirtual())
		}
	}
	for _, st := range d.Storms {
		if st != nil {
			e.record("storm", baseName(st.Name), st, st.Clock == results.ClockVirtual)
		}
	}
	for _, sc := range d.Scenarios {
		if sc != nil && (sc.Run == nil || !sc.Run.Interrupted) {
			e.record("scenario", baseName(sc.Name), sc, sc.Run != nil && sc.Run.IsVirtual())
		}
	}
	for _, p := range d.BucketPlays {
		if p != nil {
			e.record("play", baseName(p.Name), p, p.Clock == results.ClockVirtual)
		}
	}
	for _, c := range d.Counting {
		if c != nil {
			e.record("counting", c.Tree, c, c.Clock == results.ClockVirtual)
		}
	}
	if d.Judge != nil {
		e.record("judge", d.Judge.Client, d.Judge, d.Judge.Clock == results.ClockVirtual)
	}
}

// clocks counts d's timed records (floods, storms, scenarios, plays,
// counting and judge records) and those of them measured in virtual time.
func clocks(d *results.Document) (timed, virtual int) {
	count := func(c results.Clock) {
		timed++
		if c == results.ClockVirtual {
			virtual++
		}
	}
	for _, r := range d.Runs {
		if r != nil {
			count(r.Clock)
		}
	}
	for _, st := range d.Storms {
		if st != nil {
			count(st.Clock)
		}
	}
	for _, sc := range d.Scenarios {
		if sc != nil && sc.Run != nil {
			count(sc.Run.Clock)
		}
	}
	for _, p := range d.BucketPlays {
		if p != nil {
			count(p.Clock)
		}
	}
	for _, c := range d.Counting {
		if c != nil {
			count(c.Clock)
		}
	}
	if d.Judge != nil {
		count(d.Judge.Clock)
	}
	return timed, virtual
}

// wallOnly reports whether a figure is measured on the wall clock whatever
// its record's clock: a real process's idle CPU and memory, which a
// virtual-time grading still measures for real (see the README), so its
// repeats vary as the machine does.
func wallOnly(key string) bool {
	for _, w := range []string{"idle.", "memory_before.", "memory_mid.", "memory_after.", "cpu_s", "cpu_share", "heap", "bytes", "goroutines"} {
		if strings.Contains(key, w) {
			return true
		}
	}
	return false
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
