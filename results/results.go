// Package results is the data every grade run produces: one [Document] per
// run, with its [Check] values, the floods behind them ([Run]) and the
// machine they ran on. The JSON form is versioned by [Schema] and described
// in docs/RESULTS.md; [Decode] reads it back strictly. Reports and cohort
// views read nothing else.
package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Schema names the version of the JSON layout. Readers must refuse documents
// whose schema they do not know.
const Schema = "ratelab.results/v1"

// Status is the verdict of a check or of a whole document.
type Status string

// The statuses. A check that could not run (for example because an earlier
// stage failed) is StatusSkip and scores 0; StatusError means the grader
// itself, or the machine, failed, and says nothing about the learner's code.
// StatusInconclusive is a check graded several times (grade --repeat) whose
// repeats disagreed, some passing and some failing: it scores 0, its
// message lists every repeat's verdict and values, and, like StatusError,
// it says the measurement was too noisy to judge rather than that the
// learner's code is wrong. See Combine. StatusInterrupted is a document's
// status only: the run was stopped (SIGINT, SIGTERM) before it ended, so it
// has no score and no verdict; its finished checks keep theirs.
const (
	StatusPass         Status = "pass"
	StatusFail         Status = "fail"
	StatusSkip         Status = "skip"
	StatusError        Status = "error"
	StatusInconclusive Status = "inconclusive"
	StatusInterrupted  Status = "interrupted"
)

// Document is one grade run.
type Document struct {
	Schema string `json:"schema"`
	Task   string `json:"task"`   // "task1", or "all"
	Impl   string `json:"impl"`   // "exercises" or "solutions"
	Status Status `json:"status"` // pass, fail, inconclusive, error or interrupted
	// Score is the points of the checks passed; 0 in memory and null in
	// JSON for an interrupted document, which has no score.
	Score    float64   `json:"score"`
	MaxScore float64   `json:"max_score"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Interrupted is true when the run was stopped (Ctrl-C) before the end;
	// its checks and runs are whatever had completed.
	Interrupted bool `json:"interrupted,omitempty"`
	// Practice is true for a practice run (grade --quick): shorter floods,
	// with bounds scaled to them. Its score is not the graded one.
	Practice bool `json:"practice,omitempty"`
	// TaskSeconds is how long each task's grading took, in seconds, by
	// task id.
	TaskSeconds map[string]float64 `json:"task_seconds,omitempty"`
	// Seed is the seed of every random input the unit suites drew (grade
	// --seed N replays them); 0 when no suite ran.
	Seed uint64 `json:"seed,omitempty"`
	// Repeat is how many times each task was graded and combined into this
	// document (grade --repeat N, see Combine); 0 when it was graded once.
	Repeat    int         `json:"repeat,omitempty"`
	Notes     []string    `json:"notes,omitempty"`
	Checks    []Check     `json:"checks"`
	Runs      []*Run      `json:"runs"`
	Storms    []*Storm    `json:"storms,omitempty"`
	Scenarios []*Scenario `json:"scenarios,omitempty"`
	// Counting is task 8's measurements of its four limiters, one per
	// repeat.
	Counting []*Counting `json:"counting,omitempty"`
	// BucketPlays are the lesson's token-bucket plays on the fake GPU
	// (task 8; scenario.PlayResult), when measured.
	BucketPlays []*BucketPlay `json:"bucket_plays,omitempty"`
	// Judge is task 5's judge report (schema ratelab.judge/v1).
	Judge *JudgeReport `json:"judge,omitempty"`
	// Redis is the Redis that judged task 6, its unit checks' Redis/ half
	// and its floods.
	Redis *Redis `json:"redis,omitempty"`
	// Cluster is the Redis Cluster of task 6's cluster checks, and the
	// failover it went through, when they ran.
	Cluster *Cluster `json:"cluster,omitempty"`
	Env     Env      `json:"env"`
	// Integrity records the hashes of the frozen files the grader ran with.
	Integrity *Integrity `json:"integrity,omitempty"`
	// Signature is an HMAC of the rest of the document, when the grader had
	// a signing key (see Sign).
	Signature string `json:"signature,omitempty"`
}

// Check is one graded statement about the learner's work, such as
// "successes at 120/s match the model".
type Check struct {
	Task     string  `json:"task"`
	Name     string  `json:"name"`
	Status   Status  `json:"status"`
	Score    float64 `json:"score"`
	MaxScore float64 `json:"max_score"`
	// Message says what was measured against what, and why the tolerance is
	// as wide as it is.
	Message string `json:"message"`
	// Measured and Expected are the numbers behind the verdict, with units in
	// their keys (for example "ok", "p99_ms").
	Measured map[string]float64 `json:"measured,omitempty"`
	Expected map[string]float64 `json:"expected,omitempty"`
	// Run names the flood the check was measured on, if any.
	Run string `json:"run,omitempty"`
	// Repeats holds every repeat's verdict and measurements when the check
	// was graded several times (see Combine), in repeat order; a repeat
	// that did not reach the check is left out.
	Repeats []RepeatValue `json:"repeats,omitempty"`
}

// Redis describes the Redis that judged task 6.
type Redis struct {
	// Kind is where it came from: RedisPrivate, RedisGiven or
	// RedisEmbedded.
	Kind string `json:"kind"`
	// Version is the server's redis_version, such as "7.0.15"; empty for
	// miniredis.
	Version string `json:"version,omitempty"`
	// URL is where it listened, with any password redacted.
	URL string `json:"url"`
	// Unit is true when the unit suite's Redis/ checks ran on it; on
	// miniredis they are skipped and only the Miniredis/ half judges.
	Unit bool `json:"unit"`
}

// The kinds of Redis that judge task 6.
const (
	// RedisPrivate is a redis-server the grader started for the grading on
	// a free loopback port, and stopped at its end: the default wherever
	// redis-server is installed.
	RedisPrivate = "private"
	// RedisGiven is the server that grade --redis URL (or REDIS_URL) named.
	RedisGiven = "given"
	// RedisEmbedded is an embedded miniredis, the fallback when no
	// redis-server is installed. Its Lua is not Redis's.
	RedisEmbedded = "miniredis"
)

// Env describes where a document was produced.
type Env struct {
	GoVersion     string    `json:"go_version"`
	OS            string    `json:"os"`
	Arch          string    `json:"arch"`
	CPUs          int       `json:"cpus"`
	GOMAXPROCS    int       `json:"gomaxprocs"`
	Commit        string    `json:"commit,omitempty"`
	Time          time.Time `json:"time"`
	GraderVersion string    `json:"grader_version"`
}

// GraderVersion is the version of the grader that wrote a document.
const GraderVersion = "0.1.0"

// CurrentEnv describes this process and machine. commit may be empty.
func CurrentEnv(commit string) Env {
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Env{
		GoVersion:     runtime.Version(),
		OS:            runtime.GOOS,
		Arch:          runtime.GOARCH,
		CPUs:          runtime.NumCPU(),
		GOMAXPROCS:    runtime.GOMAXPROCS(0),
		Commit:        commit,
		Time:          time.Now().UTC(),
		GraderVersion: GraderVersion,
	}
}

// Total adds up the checks' scores and sets the document's status: error if
// any check errored, else fail if any check failed or was skipped (or has a
// status this version does not know), else inconclusive if any check's
// repeats disagreed, else pass. An interrupted document is interrupted,
// whatever its checks say, and scores nothing: part of a grading is not a
// verdict, neither a pass nor a fail.
// A failure outranks an inconclusive check because it is a verdict on the
// learner's code whatever the noise; an error outranks both because the
// grader or the machine could not be trusted at all.
func (d *Document) Total() {
	d.Score, d.MaxScore = 0, 0
	d.Status = StatusPass
	for _, c := range d.Checks {
		d.Score += c.Score
		d.MaxScore += c.MaxScore
		if s := docStatus(c.Status); statusRank[s] > statusRank[d.Status] {
			d.Status = s
		}
	}
	if d.Interrupted {
		d.Status = StatusInterrupted
		d.Score = 0
	}
}

// Consistent reports whether d's status and score are what its checks
// give: every check's score fits its status (all of its points for a pass,
// none otherwise), and d's status, score and maximum are what Total
// computes from the checks. A document that fails this was edited by hand
// or written by something other than the grader; its verdict cannot be
// trusted either way.
func (d *Document) Consistent() error {
	var bad []string
	for _, c := range d.Checks {
		switch {
		case c.Status == StatusPass && c.Score != c.MaxScore:
			bad = append(bad, fmt.Sprintf("check %q passed with %g of %g points", c.Name, c.Score, c.MaxScore))
		case c.Status != StatusPass && c.Score != 0:
			bad = append(bad, fmt.Sprintf("check %q is %s but scored %g", c.Name, c.Status, c.Score))
		case c.Score < 0 || c.MaxScore < 0 || math.IsNaN(c.Score) || math.IsNaN(c.MaxScore):
			bad = append(bad, fmt.Sprintf("check %q has points %g of %g", c.Name, c.Score, c.MaxScore))
		}
	}
	want := Document{Checks: d.Checks, Interrupted: d.Interrupted}
	want.Total()
	if want.Status != d.Status || want.Score != d.Score || want.MaxScore != d.MaxScore {
		bad = append(bad, fmt.Sprintf("it says %s, %g/%g, but its checks give %s, %g/%g",
			d.Status, d.Score, d.MaxScore, want.Status, want.Score, want.MaxScore))
	}
	if len(bad) > 0 {
		return fmt.Errorf("inconsistent: %s", strings.Join(bad[:min(len(bad), 3)], "; "))
	}
	return nil
}

// statusRank orders the document statuses by precedence in Total.
var statusRank = map[Status]int{StatusPass: 0, StatusInconclusive: 1, StatusFail: 2, StatusError: 3, StatusInterrupted: 4}

// docStatus is what one check's status makes of its document's: a skip,
// or a status this version does not know, is a fail.
func docStatus(s Status) Status {
	switch s {
	case StatusPass, StatusInconclusive, StatusFail, StatusError:
		return s
	}
	return StatusFail
}

// Encode writes d as indented JSON, for people reading it on a terminal
// (grade --json).
func (d *Document) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// EncodeCompact writes d as compact JSON, json.Marshal's bytes and a
// newline: the form WriteFile gives a results.json. The indentation of
// Encode is more than half of an indented document's bytes (a task 2
// document is 646 KB indented, 273 KB compact), and no reader needs it:
// the fields, their order and their values are the same, so a reader of
// either form reads both, and a signature (Sign) covers exactly these
// bytes, with the signature member left out.
func (d *Document) EncodeCompact(w io.Writer) error {
	return json.NewEncoder(w).Encode(d)
}

// ErrExists is returned by WriteFile when the file exists and overwriting
// was not asked for.
var ErrExists = errors.New("file exists")

// WriteFile writes d to path atomically, compact (EncodeCompact): to a
// temporary file in the same folder, then renamed over path, so a reader
// never sees half a document.
// It refuses to replace an existing file unless overwrite is true.
func WriteFile(path string, d *Document, overwrite bool) error {
	if !overwrite {
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("write %s: %w (choose another --out, or pass --force)", path, ErrExists)
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, ".results-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after a successful rename
	if err := d.EncodeCompact(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// documentWire is Document without its methods, for MarshalJSON.
type documentWire Document

// MarshalJSON encodes d as its fields say, except that an interrupted
// document's score is null: it has none, and 0 would read as a verdict.
// Decoding needs no counterpart: null leaves Score at 0.
func (d Document) MarshalJSON() ([]byte, error) {
	if !d.Interrupted {
		return json.Marshal(documentWire(d))
	}
	return json.Marshal(struct {
		documentWire
		Score *float64 `json:"score"`
	}{documentWire: documentWire(d)})
}
