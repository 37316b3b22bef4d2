package reports

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
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

// CohortDoc is one document of a cohort.
type CohortDoc struct {
	Path   string // as found: an argument, or an argument joined with the path under it
	SHA256 string // of the file's bytes, in hex
	Doc    *results.Document
	// Signature is SigSigned or SigUnsigned when the cohort was verified,
	// else SigNotChecked. Forged documents are never counted: they are in
	// Skipped.
	Signature string
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

// LoadCohort reads every results document args name: a file given directly
// (any name), or every file named results.json under a folder, found
// recursively. Paths are read in lexical order. Nothing that is wrong with a
// file stops it or is counted silently: a file it cannot read, malformed or
// truncated JSON, a document of another schema, or a file whose bytes are
// the same as one already read is listed in Skipped with the reason. It
// fails only when args is empty.
//
// When $RATELAB_SIGNING_KEY (results.SigningKeyEnv) is set and not empty,
// every document's signature is checked against it (results.Verify): a
// document is marked signed or unsigned, and a forged one is skipped with
// the reason, never counted. Without the key every document is "not
// checked".
func LoadCohort(args []string) (*Cohort, error) {
	var key []byte
	if k := os.Getenv(results.SigningKeyEnv); k != "" {
		key = []byte(k)
	}
	return loadCohort(args, key)
}

// loadCohort is LoadCohort with the signing key given; nil checks no
// signature.
func loadCohort(args []string, key []byte) (*Cohort, error) {
	if len(args) == 0 {
		return nil, errors.New("reports: cohort: no files or folders given")
	}
	c := &Cohort{Verified: key != nil}
	seen := map[string]string{} // sha256 → first path
	for _, arg := range args {
		paths, skipped := findResults(arg)
		c.Skipped = append(c.Skipped, skipped...)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "cannot read: " + unwrapPath(err)})
				continue
			}
			sum := sha256.Sum256(b)
			hash := hex.EncodeToString(sum[:])
			if first, ok := seen[hash]; ok {
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "duplicate: the same bytes as " + first})
				continue
			}
			doc, err := results.Decode(bytes.NewReader(b))
			if err != nil {
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: err.Error()})
				continue
			}
			seen[hash] = p
			if doc.Practice {
				// Shorter floods, bounds scaled to them: not comparable
				// with graded runs, and not the learner's score.
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "practice run (grade --quick): shortened floods, not a graded result"})
				continue
			}
			sig := SigNotChecked
			if key != nil {
				switch err := results.Verify(doc, key); {
				case err == nil:
					sig = SigSigned
				case errors.Is(err, results.ErrUnsigned):
					sig = SigUnsigned
				case errors.Is(err, results.ErrForged):
					c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "forged: " + err.Error(), Signature: SigForged})
					continue
				default:
					c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "signature could not be checked: " + err.Error()})
					continue
				}
			}
			if err := doc.Consistent(); err != nil {
				// Its verdict cannot be trusted either way: counted nowhere.
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: err.Error(), Signature: sig})
				continue
			}
			c.Docs = append(c.Docs, CohortDoc{Path: p, SHA256: hash, Doc: doc, Signature: sig})
		}
	}
	return c, nil
}

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
	for _, d := range c.Docs {
		doc := d.Doc
		head := []string{d.Path, d.SHA256[:12], d.Signature, doc.Task, doc.Impl, string(doc.Status), fnum(doc.Score), fnum(doc.MaxScore), timeOrEmpty(doc)}
		if len(doc.Checks) == 0 {
			cw.Write(append(head, make([]string, len(checksColumns)-len(head))...))
		}
		for _, ch := range doc.Checks {
			cw.Write(append(slices.Clone(head), ch.Task, ch.Name, string(ch.Status), fnum(ch.Score), fnum(ch.MaxScore), ch.Run,
				kv(ch.Measured), kv(ch.Expected), ch.Message))
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
	for _, d := range c.Docs {
		doc := d.Doc
		s := newSite(doc)
		taskOf := map[*results.Run]string{}
		for id, runs := range s.runs {
			for _, r := range runs {
				taskOf[r] = id
			}
		}
		head := []string{d.Path, d.SHA256[:12], d.Signature, doc.Task, doc.Impl}
		for _, r := range doc.Runs {
			if r == nil {
				continue
			}
			drained := ""
			if r.DrainedS >= 0 {
				drained = fnum(r.DrainedS)
			}
			cw.Write(append(slices.Clone(head), taskOf[r], "flood", r.Name, describeServer(r.Server),
				fnum(r.OfferedRPS), fnum(r.DurationS), fnum(r.TimeoutS), inum(r.Issued), inum(r.OK), fnum(r.GoodputRPS),
				fnum(r.P50MS), fnum(r.P99MS), fnum(r.MaxMS),
				inum(r.Counts[results.OutcomeTooMany]), inum(r.Counts[results.OutcomeUnavailable]), inum(r.Counts[results.OutcomeTimeout]), inum(r.Counts[results.OutcomeOther]),
				optNum(r.Predicted, "ok"), optNum(r.Predicted, "p99_ms"), inum(r.ServerAfterFlood.Waiting), inum(r.ServerFinal.Dead), drained,
				strconv.FormatBool(r.Reliable), "", "", "", ""))
		}
		for _, st := range doc.Storms {
			if st == nil {
				continue
			}
			task := doc.Task
			if _, ok := taskNumber(task); !ok {
				task = ""
			}
			cw.Write(append(slices.Clone(head), task, orDefault(st.Kind, "storm"), st.Name, describeServer(st.Server),
				optFloat(st.OfferedRPS), optFloat(st.DurationS), "", strconv.Itoa(st.Clients), "", "",
				"", "", "", "", "", "", "", "", "", "", "", "", "",
				inum(st.Attempts), inum(st.Succeeded), inum(st.Failed), fnum(st.LastDoneS)))
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

func optNum(m map[string]float64, key string) string {
	if v, ok := m[key]; ok {
		return fnum(v)
	}
	return ""
}

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

func timeOrEmpty(doc *results.Document) string {
	if doc.Finished.IsZero() {
		return ""
	}
	return doc.Finished.UTC().Format("2006-01-02T15:04:05Z")
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
