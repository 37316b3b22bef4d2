package reports

import (
	"encoding/csv"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"ratelab/results"
)

// Cohort is many results documents side by side: a class's submissions, or
// one learner's runs over a week. Build one with LoadCohort.
type Cohort struct {
	Docs    []CohortDoc
	Skipped []Skipped
	// Verified is true when the documents' signatures were checked, against
	// the key in $RATELAB_SIGNING_KEY.
	Verified bool
}

// CohortDoc is one document of a cohort, as much of it as the comparison
// reads: its verdict here, its checks, floods and storms summarised in
// unexported fields. A cohort of 10,000 documents keeps these, never the
// documents themselves.
type CohortDoc struct {
	Path   string // as found: an argument, or an argument joined with the path under it
	SHA256 string // of the file's bytes, in hex
	// Signature is SigSigned or SigUnsigned when the cohort was verified,
	// else SigNotChecked. Forged documents are never counted: they are in
	// Skipped.
	Signature string

	// The document's own fields of the same names.
	Task, Impl      string
	Status          results.Status
	Score, MaxScore float64
	Finished        time.Time
	// Interrupted is true for a run stopped by SIGINT or SIGTERM: its
	// status is interrupted, it has no score, and it is counted as neither
	// a pass nor a fail.
	Interrupted bool

	frozenSHA256 string // Integrity.FrozenSHA256
	edited       bool   // its frozen files were edited or did not match the manifest
	checks       []cohortCheck
	tasks        []taskScore // per task with checks, in task order
	runs         []cohortRun
	storms       []cohortStorm
}

// Skipped is a file a cohort did not count, and why.
type Skipped struct {
	Path   string
	Reason string
	// Signature is SigForged for a document whose signature does not match,
	// else empty: the file was not read far enough to check it.
	Signature string
}

// What a cohort says of each file's signature.
const (
	SigSigned     = "signed"      // signed with the key: written by a grader that held it, and unchanged
	SigUnsigned   = "unsigned"    // no signature: anyone could have written or edited it
	SigForged     = "forged"      // a signature that does not match: edited, or signed with another key
	SigNotChecked = "not checked" // no key was given to check with
)

// signatureCount counts the cohort's files by signature verdict, forged
// ones among the skipped included.
func (c *Cohort) signatureCount() map[string]int {
	n := map[string]int{}
	for _, d := range c.Docs {
		n[d.Signature]++
	}
	for _, s := range c.Skipped {
		if s.Signature != "" {
			n[s.Signature]++
		}
	}
	return n
}

// findResults lists the files arg names, in lexical order.
func findResults(arg string) ([]string, []Skipped) {
	info, err := os.Stat(arg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, []Skipped{{Path: arg, Reason: "no such file or folder"}}
		}
		return nil, []Skipped{{Path: arg, Reason: unwrapPath(err)}}
	}
	if !info.IsDir() {
		return []string{arg}, nil
	}
	var paths []string
	var skipped []Skipped
	err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			skipped = append(skipped, Skipped{Path: p, Reason: "cannot read: " + unwrapPath(err)})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && d.Name() == "results.json" {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		skipped = append(skipped, Skipped{Path: arg, Reason: unwrapPath(err)})
	}
	if len(paths) == 0 && len(skipped) == 0 {
		skipped = append(skipped, Skipped{Path: arg, Reason: "holds no file named results.json"})
	}
	sort.Strings(paths)
	return paths, skipped
}

// unwrapPath drops the path a *fs.PathError repeats.
func unwrapPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// CSV columns, in order. docs/REPORTS.md describes them.
var (
	checksColumns = []string{"file", "sha256", "signature", "doc_task", "impl", "doc_status", "doc_score", "doc_max_score", "finished",
		"task", "check", "status", "score", "max_score", "run", "measured", "expected", "message"}
	runsColumns = []string{"file", "sha256", "signature", "doc_task", "impl", "task", "kind", "run", "server",
		"offered_rps", "duration_s", "timeout_s", "issued", "ok", "goodput_rps", "p50_ms", "p99_ms", "max_ms",
		"n_429", "n_503", "n_timeout", "n_other", "predicted_ok", "predicted_p99_ms", "still_waiting", "dead", "drained_s", "reliable",
		"attempts", "succeeded", "failed", "last_done_s"}
	skippedColumns = []string{"file", "reason", "signature"}
)

// WriteChecksCSV writes one row per document and check (a document without
// checks still gets one row, its check columns empty).
func (c *Cohort) WriteChecksCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(checksColumns)
	row := make([]string, 0, len(checksColumns))
	for i := range c.Docs {
		d := &c.Docs[i]
		row = append(row[:0], d.Path, d.SHA256[:12], d.Signature, d.Task, d.Impl, string(d.Status), d.scoreText(), fnum(d.MaxScore), d.finishedText())
		head := len(row)
		if len(d.checks) == 0 {
			cw.Write(append(row, make([]string, len(checksColumns)-head)...))
		}
		for _, ch := range d.checks {
			cw.Write(append(row[:head], ch.task, ch.name, string(ch.status), fnum(ch.score), fnum(ch.maxScore), ch.run,
				ch.measured, ch.expected, ch.message))
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteRunsCSV writes one row per document and flood, then one per
// document and storm, with the measurements the cohort compares.
func (c *Cohort) WriteRunsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(runsColumns)
	row := make([]string, 0, len(runsColumns))
	for i := range c.Docs {
		d := &c.Docs[i]
		row = append(row[:0], d.Path, d.SHA256[:12], d.Signature, d.Task, d.Impl)
		head := len(row)
		for _, r := range d.runs {
			drained := ""
			if r.drainedS >= 0 {
				drained = fnum(r.drainedS)
			}
			cw.Write(append(row[:head], r.task, "flood", r.name, r.server,
				fnum(r.offeredRPS), fnum(r.durationS), fnum(r.timeoutS), inum(r.issued), inum(r.ok), fnum(r.goodputRPS),
				fnum(r.p50MS), fnum(r.p99MS), fnum(r.maxMS),
				inum(r.n429), inum(r.n503), inum(r.nTimeout), inum(r.nOther),
				fnum(r.predictedOK), fnum(r.predictedP99MS), inum(r.stillWaiting), inum(r.dead), drained,
				strconv.FormatBool(r.reliable), "", "", "", ""))
		}
		for _, st := range d.storms {
			cw.Write(append(row[:head], st.task, st.kind, st.name, st.server,
				optFloat(st.offeredRPS), optFloat(st.durationS), "", strconv.Itoa(st.clients), "", "",
				"", "", "", "", "", "", "", "", "", "", "", "", "",
				inum(st.attempts), inum(st.succeeded), inum(st.failed), fnum(st.lastDoneS)))
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteSkippedCSV writes one row per skipped file, with the reason, and
// "forged" in the signature column for a forged document.
func (c *Cohort) WriteSkippedCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(skippedColumns)
	for _, s := range c.Skipped {
		cw.Write([]string{s.Path, s.Reason, s.Signature})
	}
	cw.Flush()
	return cw.Error()
}

func fnum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func inum(v int64) string { return strconv.FormatInt(v, 10) }

func optFloat(v float64) string {
	if v == 0 {
		return ""
	}
	return fnum(v)
}

// kv writes a map as "key=value; key=value", keys sorted.
func kv(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + fnum(m[k])
	}
	return strings.Join(parts, "; ")
}

// Statistics for the cohort page.

// quantile returns the q quantile (0 to 1) of sorted values by linear
// interpolation between closest ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// spread summarises one measurement across a cohort.
type spread struct {
	N                  int
	Min, Q1, Med, Q3   float64
	Max                float64
	Low, High          float64 // the outlier fences
	WhiskLo, WhiskHigh float64 // the most extreme values inside the fences
}

// outlierMinN is the fewest values the cohort judges outliers among.
const outlierMinN = 4

// summarize computes the quartiles and Tukey's fences, 1.5 interquartile
// ranges beyond the quartiles. So that a cohort whose values all agree does
// not call every small difference an outlier, the range is taken as at
// least 5% of the median.
func summarize(values []float64) spread {
	v := slices.Clone(values)
	slices.Sort(v)
	s := spread{N: len(v)}
	if len(v) == 0 {
		return s
	}
	s.Min, s.Max = v[0], v[len(v)-1]
	s.Q1, s.Med, s.Q3 = quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75)
	iqr := math.Max(s.Q3-s.Q1, 0.05*math.Abs(s.Med))
	s.Low, s.High = s.Q1-1.5*iqr, s.Q3+1.5*iqr
	if len(v) < outlierMinN {
		s.Low, s.High = math.Inf(-1), math.Inf(1)
	}
	s.WhiskLo, s.WhiskHigh = s.Max, s.Min
	for _, x := range v {
		if x >= s.Low && x <= s.High {
			s.WhiskLo, s.WhiskHigh = math.Min(s.WhiskLo, x), math.Max(s.WhiskHigh, x)
		}
	}
	return s
}

func (s spread) outlier(x float64) bool { return x < s.Low || x > s.High }
