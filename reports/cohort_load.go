package reports

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"time"
	"unique"

	"ratelab/results"
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
//
// Documents are read GOMAXPROCS at a time and each is kept only as the
// summary the comparison needs (CohortDoc), so memory grows with the
// number of documents, not with their size. They are read without their
// series (results.DecodeBrief); a signature, which covers every field, is
// checked on the file's bytes (results.VerifyBytes), by the same workers,
// and only a document that check does not prove signed is decoded whole
// (results.Verify).
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
		readAll(paths, key, func(l loaded) {
			p := l.path
			switch {
			case l.readErr != nil:
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "cannot read: " + unwrapPath(l.readErr)})
				return
			case seen[l.sha256] != "":
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: "duplicate: the same bytes as " + seen[l.sha256]})
				return
			case l.decodeErr != nil:
				c.Skipped = append(c.Skipped, Skipped{Path: p, Reason: l.decodeErr.Error()})
				return
			}
			seen[l.sha256] = p
			if l.skip != nil {
				c.Skipped = append(c.Skipped, *l.skip)
				return
			}
			c.Docs = append(c.Docs, l.doc)
		})
	}
	return c, nil
}

// loaded is what a worker made of one file: an error, a reason to skip
// it, or its summary.
type loaded struct {
	path      string
	readErr   error
	sha256    string
	decodeErr error
	skip      *Skipped
	doc       CohortDoc
}

// readAll reads paths with GOMAXPROCS workers and hands each file's
// result to each in the order of paths, on the calling goroutine. At most
// a few results wait for their turn; every worker has ended when it
// returns.
func readAll(paths []string, key []byte, each func(loaded)) {
	workers := runtime.GOMAXPROCS(0)
	window := make(chan struct{}, 4*workers) // results made but not yet handed on
	out := make([]chan loaded, len(paths))
	for i := range out {
		out[i] = make(chan loaded, 1)
	}
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for i := range paths {
			window <- struct{}{}
			jobs <- i
		}
	}()
	for range workers {
		go func() {
			var buf []byte // the file's bytes, kept for the worker's next file
			for i := range jobs {
				var l loaded
				l, buf = readOne(paths[i], key, buf)
				out[i] <- l
			}
		}()
	}
	for i := range paths {
		l := <-out[i]
		<-window
		each(l)
	}
}

// readOne reads, checks and summarises the document at p, reading it into
// buf, and returns buf for the next file. Whether it is a duplicate is for
// the caller to say, which sees the files in order.
func readOne(p string, key []byte, buf []byte) (loaded, []byte) {
	l := loaded{path: p}
	b, err := readFile(p, buf)
	if err != nil {
		l.readErr = err
		return l, buf
	}
	buf = b
	l.summarize(key, b)
	return l, buf
}

// readFile reads the file at p into buf, grown as needed: a cohort reads
// thousands of files of a few hundred kilobytes, and a fresh buffer for
// each is most of the memory it would touch.
func readFile(p string, buf []byte) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	b := buf[:0]
	if info, err := f.Stat(); err == nil && info.Size() < results.MaxDocumentBytes && int(info.Size())+1 > cap(b) {
		b = make([]byte, 0, info.Size()+512)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return buf, err
		}
		if len(b) > results.MaxDocumentBytes {
			return b, nil // Decode says it is too large
		}
	}
}

// summarize sets l from the file's bytes b: its hash, and its summary or
// why it is not counted. It keeps nothing of b.
func (l *loaded) summarize(key []byte, b []byte) {
	p := l.path
	sum := sha256.Sum256(b)
	l.sha256 = hex.EncodeToString(sum[:])
	doc, err := results.DecodeBrief(b)
	if err != nil {
		l.decodeErr = err
		return
	}
	if doc.Practice {
		// Shorter floods, bounds scaled to them: not comparable with
		// graded runs, and not the learner's score.
		l.skip = &Skipped{Path: p, Reason: "practice run (grade --quick): shortened floods, not a graded result"}
		return
	}
	sig := SigNotChecked
	if key != nil {
		switch err := verify(doc, key, b); {
		case err == nil:
			sig = SigSigned
		case errors.Is(err, results.ErrUnsigned):
			sig = SigUnsigned
		case errors.Is(err, results.ErrForged):
			l.skip = &Skipped{Path: p, Reason: "forged: " + err.Error(), Signature: SigForged}
			return
		default:
			l.skip = &Skipped{Path: p, Reason: "signature could not be checked: " + err.Error()}
			return
		}
	}
	if err := doc.Consistent(); err != nil {
		// Its verdict cannot be trusted either way: counted nowhere.
		l.skip = &Skipped{Path: p, Reason: err.Error(), Signature: sig}
		return
	}
	l.doc = newCohortDoc(p, l.sha256, sig, doc)
}

// verify checks the signature of doc, read by DecodeBrief from the file's
// bytes b, under key, as results.Verify does. A document the grader signed
// is proven so from b (results.VerifyBytes), with no second decode; only a
// document that proof does not cover (another layout, or forged) is
// decoded whole for Verify's verdict. An unsigned one needs neither.
func verify(doc *results.Document, key, b []byte) error {
	switch {
	case doc.Signature == "":
		return results.ErrUnsigned
	case results.VerifyBytes(b, doc.Signature, key):
		return nil
	}
	whole, err := results.Decode(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return results.Verify(whole, key)
}

// cohortCheck is one check of a cohort's document, as the cohort shows it.
type cohortCheck struct {
	task, name      string
	status          results.Status
	score, maxScore float64
	run             string
	// measured and expected are the check's figures as checks.csv writes
	// them (see kv).
	measured, expected string
	message            string
}

// taskScore is one task's verdict in a document, from its checks.
type taskScore struct {
	task       string
	status     results.Status
	score, max float64
}

// cohortRun is one flood of a cohort's document: the figures runs.csv
// writes and the page compares.
type cohortRun struct {
	task, name, server              string
	offeredRPS, durationS, timeoutS float64
	issued, ok                      int64
	goodputRPS, p50MS, p99MS, maxMS float64
	n429, n503, nTimeout, nOther    int64
	predictedOK, predictedP99MS     float64 // NaN where the model gave none
	stillWaiting, dead              int64
	drainedS                        float64 // -1 when the line had not drained
	reliable                        bool
}

// cohortStorm is one storm of a cohort's document.
type cohortStorm struct {
	task, kind, name, server    string
	offeredRPS, durationS       float64
	clients                     int
	attempts, succeeded, failed int64
	lastDoneS                   float64
}

// intern returns s's canonical copy: the names of checks, tasks and runs
// repeat in every document of a cohort and are kept once.
func intern(s string) string { return unique.Make(s).Value() }

// newCohortDoc summarises doc, found at path with those bytes' sha256 and
// signature verdict.
func newCohortDoc(path, sha string, sig string, doc *results.Document) CohortDoc {
	d := CohortDoc{Path: path, SHA256: sha, Signature: sig,
		Task: intern(doc.Task), Impl: intern(doc.Impl), Status: results.Status(intern(string(doc.Status))),
		Score: doc.Score, MaxScore: doc.MaxScore, Finished: doc.Finished, Interrupted: doc.Interrupted}
	if in := doc.Integrity; in != nil {
		d.frozenSHA256 = intern(in.FrozenSHA256)
		d.edited = len(in.Edited) > 0 || len(in.Mismatched) > 0
	}
	d.checks = make([]cohortCheck, 0, len(doc.Checks))
	for _, ch := range doc.Checks {
		d.checks = append(d.checks, cohortCheck{task: intern(ch.Task), name: intern(ch.Name), status: results.Status(intern(string(ch.Status))),
			score: ch.Score, maxScore: ch.MaxScore, run: intern(ch.Run), measured: kv(ch.Measured), expected: kv(ch.Expected), message: ch.Message})
	}
	s := newSite(doc)
	if doc.Interrupted {
		s.tasks = nil // no task of a stopped run has a score: its checks are only those it finished
	}
	for _, id := range s.tasks {
		checks := s.checks(id)
		if len(checks) == 0 {
			continue
		}
		v := taskVerdict(checks)
		d.tasks = append(d.tasks, taskScore{task: intern(id), status: v.Status, score: v.Score, max: v.Max})
	}
	predicted := func(r *results.Run, key string) float64 {
		if v, ok := r.Predicted[key]; ok {
			return v
		}
		return math.NaN()
	}
	for _, r := range doc.Runs {
		if r == nil {
			continue
		}
		d.runs = append(d.runs, cohortRun{task: intern(r.Task), name: intern(r.Name), server: intern(describeServer(r.Server)),
			offeredRPS: r.OfferedRPS, durationS: r.DurationS, timeoutS: r.TimeoutS, issued: r.Issued, ok: r.OK,
			goodputRPS: r.GoodputRPS, p50MS: r.P50MS, p99MS: r.P99MS, maxMS: r.MaxMS,
			n429: r.Counts[results.OutcomeTooMany], n503: r.Counts[results.OutcomeUnavailable],
			nTimeout: r.Counts[results.OutcomeTimeout], nOther: r.Counts[results.OutcomeOther],
			predictedOK: predicted(r, "ok"), predictedP99MS: predicted(r, "p99_ms"),
			stillWaiting: r.ServerAfterFlood.Waiting, dead: r.ServerFinal.Dead, drainedS: r.DrainedS, reliable: r.Reliable})
	}
	task := doc.Task
	if _, ok := taskNumber(task); !ok {
		task = ""
	}
	for _, st := range doc.Storms {
		if st == nil {
			continue
		}
		d.storms = append(d.storms, cohortStorm{task: intern(task), kind: intern(orDefault(st.Kind, "storm")), name: intern(st.Name),
			server: intern(describeServer(st.Server)), offeredRPS: st.OfferedRPS, durationS: st.DurationS, clients: st.Clients,
			attempts: st.Attempts, succeeded: st.Succeeded, failed: st.Failed, lastDoneS: st.LastDoneS})
	}
	return d
}

// finishedText is when d's run finished, as the CSV files and the page
// write it, or "" when the document does not say.
func (d *CohortDoc) finishedText() string {
	if d.Finished.IsZero() {
		return ""
	}
	return d.Finished.UTC().Format(time.RFC3339)
}

// scoreText is d's score as the CSV files write it: empty for an
// interrupted run, which has none.
func (d *CohortDoc) scoreText() string {
	if d.Interrupted {
		return ""
	}
	return fnum(d.Score)
}

// pointsText is d's points as the page writes them, such as "12/40", or
// "–/40" for an interrupted run, which has no score.
func (d *CohortDoc) pointsText() string {
	if d.Interrupted {
		return fmt.Sprintf("–/%g", d.MaxScore)
	}
	return points(d.Score, d.MaxScore)
}
