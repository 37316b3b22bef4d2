package grader

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"ratelab/results"
)

// task5Strategy is one strategy of the judge: 2,000 judgments of 3,000
// input tokens (2,900 of them the same instructions) against 400 requests
// and 400,000 input tokens a second; completed of them answered, after
// attempts requests of which rejected got 429, in wall seconds.
func task5Strategy(name string, completed, attempts, rejected int64, wall float64) results.JudgeStrategy {
	s := results.JudgeStrategy{
		Name: name, Key: "key-" + name, N: 2000,
		Completed: completed, Attempts: attempts, Rejected429: rejected, Lost: 2000 - completed,
		WallSeconds: wall, MostSeconds: 0.98 * wall,
		// Uncached: 2,000 × 3,000 / 400,000 = 15 s of input tokens,
		// 2,000 / 400 = 5 s of requests.
		RequestsMinSeconds: 5, InputTokensMinSeconds: 15, MinSeconds: 15, MinBoundBy: "input_tokens",
	}
	if name == "polite-cached" {
		// Cached, the instructions are written once and read for free:
		// (2,900 + 2,000 × 100) / 400,000 = 0.51 s of input tokens, so
		// the requests bind.
		s.InputTokensMinSeconds, s.MinSeconds, s.MinBoundBy = 0.50725, 5, "requests"
	}
	if attempts > 0 {
		s.RejectedFraction = float64(rejected) / float64(attempts)
	}
	s.Ratio = wall / s.MinSeconds
	return s
}

// task5Judged is the judge as measured on a 2-core machine with the
// reference client: polite all done in 15.2 s without a 429, polite-cached
// in 5.55 s with 10 429s in 2,010 attempts (the worst of eight runs), naive
// losing most of its judgments to 429s.
func task5Judged() map[string]results.JudgeStrategy {
	by := map[string]results.JudgeStrategy{}
	for _, s := range []results.JudgeStrategy{
		task5Strategy("naive", 520, 6000, 5480, 5.6),
		task5Strategy("sleep1", 2000, 14200, 12200, 24.5),
		task5Strategy("polite", 2000, 2000, 0, 15.2),
		task5Strategy("polite-cached", 2000, 2010, 10, 5.55),
	} {
		by[s.Name] = s
	}
	return by
}

const (
	task5CheckMinimum  = "judge: the polite client finishes near the minimum"
	task5CheckRejected = "judge: the polite client is almost never rejected"
	task5CheckCache    = "judge: caching the prefix speeds it up as the minimum predicts"
)

func TestTask5JudgeChecks(t *testing.T) {
	all := []string{task5CheckMinimum, task5CheckRejected, task5CheckCache}
	tests := []struct {
		name   string
		change func(by map[string]results.JudgeStrategy)
		fail   []string // the checks that must fail; the others pass
	}{
		{"the reference", func(map[string]results.JudgeStrategy) {}, nil},
		// The slowest reference runs measured: 15.3 s and 5.6 s.
		{"the reference, slowest runs", func(by map[string]results.JudgeStrategy) {
			by["polite"] = task5Strategy("polite", 2000, 2000, 0, 15.3)
			by["polite-cached"] = task5Strategy("polite-cached", 2000, 2010, 10, 5.6)
		}, nil},
		// A CI run of the reference on the wall clock: 9 of the cached
		// run's 2,009 attempts refused, one of them near the end, whose
		// Retry-After of a second (and jitter) took the run from about
		// 5.3 s to 6.4 s, while 98% of it was done at 5.2 s.
		{"the reference, a judgment refused at the end", func(by map[string]results.JudgeStrategy) {
			c := task5Strategy("polite-cached", 2000, 2009, 9, 6.4)
			c.MostSeconds = 5.2
			by["polite-cached"] = c
		}, nil},
		// wrong/task5/paces-with-headroom: both buckets at 80% of the
		// limits, so every run takes 1.25 times its minimum: 18.9 s and
		// 6.3 s (the speed-up is kept, 3.0×, and nothing is refused).
		{"paces at 80% of the limits", func(by map[string]results.JudgeStrategy) {
			by["polite"] = task5Strategy("polite", 2000, 2000, 0, 18.9)
			by["polite-cached"] = task5Strategy("polite-cached", 2000, 2000, 0, 6.3)
		}, []string{task5CheckMinimum}},
		// wrong/task5/rpm-only: input tokens are not paced, so the client
		// sends 400 prompts of 3,000 tokens a second, three times what the
		// API admits. The API refuses two of three; retries with backoff
		// finish most judgments late, and 126 give up after six attempts.
		// Cached, input tokens hardly count and the run is as the
		// reference's.
		{"input tokens not paced", func(by map[string]results.JudgeStrategy) {
			by["polite"] = task5Strategy("polite", 1874, 9800, 7700, 24.3)
		}, []string{task5CheckMinimum, task5CheckRejected}},
		// A client that treats 529 as final (not retried): the fake API's
		// random overloads lose 9 judgments of 2,000, in a run otherwise
		// on time. Both polite checks want every judgment done.
		{"529 not retried", func(by map[string]results.JudgeStrategy) {
			p := task5Strategy("polite", 1991, 2000, 0, 15.2)
			p.Overloaded529 = 9
			by["polite"] = p
		}, []string{task5CheckMinimum, task5CheckRejected}},
		// A client that deadlocks after a while (its pacing lock never
		// given back): the judge stops each strategy at its time limit.
		{"stuck until the time limit", func(by map[string]results.JudgeStrategy) {
			for _, name := range []string{"polite", "polite-cached"} {
				p := task5Strategy(name, 37, 37, 0, task5Limit.Seconds())
				p.TimedOut, p.Error = true, "stopped after 4m0s"
				by[name] = p
			}
		}, []string{task5CheckMinimum, task5CheckRejected, task5CheckCache}},
		// wrong/task5/burst-one-second: each bucket holds a second of its
		// refill. Uncached, the first 133 prompts (400,000 tokens) go out
		// at once into an API bucket of a tenth of a second (13 prompts),
		// and about 120 are refused and retried; cached, the first 100
		// requests (MaxInFlight) meet a bucket of 40, and about 60 are.
		// Pacing keeps the rest of each run on time.
		{"a burst of a whole second", func(by map[string]results.JudgeStrategy) {
			by["polite"] = task5Strategy("polite", 2000, 2130, 130, 15.6)
			by["polite-cached"] = task5Strategy("polite-cached", 2000, 2062, 62, 5.8)
		}, []string{task5CheckRejected}},
		// A client that paces input tokens but not requests: uncached,
		// the tokens bind (133 requests a second, under the 400 allowed)
		// and the run is perfect; cached, a prompt costs 100 tokens and
		// nothing holds it to 400 requests a second, so the API refuses
		// most attempts and the retries finish late.
		{"requests not paced", func(by map[string]results.JudgeStrategy) {
			by["polite-cached"] = task5Strategy("polite-cached", 2000, 5100, 3100, 7.9)
		}, []string{task5CheckRejected, task5CheckCache}},
		// wrong/task5/cache-ignored: the cached prefix is still charged in
		// full, so the cached run is paced by input tokens like the
		// uncached one: 15.2 s, no faster, where the minimum predicts 3×.
		{"the cached prefix charged in full", func(by map[string]results.JudgeStrategy) {
			by["polite-cached"] = task5Strategy("polite-cached", 2000, 2000, 0, 15.2)
		}, []string{task5CheckCache}},
		// The cached strategy missing from the report (the judge failed
		// before it ran): nothing predicts a speed-up and nothing shows one.
		{"no cached run", func(by map[string]results.JudgeStrategy) {
			delete(by, "polite-cached")
		}, []string{task5CheckRejected, task5CheckCache}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			by := task5Judged()
			tt.change(by)
			for _, name := range all {
				c := judged(t, 5, name, func(g *grading) { checkTask5(g, by) })
				want := wantStatus(name, tt.fail)
				assert.Equal(t, want, c.Status, "%s: %s", name, c.Message)
				if want == results.StatusFail {
					assert.Zero(t, c.Score, name)
				} else {
					assert.Equal(t, c.MaxScore, c.Score, name)
				}
			}
		})
	}
}

// task5Faults is a polite-faults run of the reference, as the API counted
// it in virtual time: 300 judgments, 12 faults of each kind, all retried.
func task5Faults() results.JudgeStrategy {
	f := &results.APIFaultStats{
		Plan:     results.APIFaultPlan{Every: 6, Kinds: results.FaultKinds, RetryAfterSeconds: 1},
		Injected: map[string]int64{}, Retried: map[string]int64{},
		RetryAfterSent: 12, MinRetryAfterGapMS: 1059, RetryAfterMS: 1000, MaxStalled: 4,
	}
	for _, k := range results.FaultKinds {
		f.Injected[k], f.Retried[k] = 12, 12
	}
	return results.JudgeStrategy{
		Name: "polite-faults", N: 300, Completed: 300, Attempts: 360, WallSeconds: 8.9, MaxInFlight: 8,
		Server: results.APIKeyStats{Requests: 360, Completed: 300, MaxInFlight: 8, Faults: f},
	}
}

func TestTask5FaultChecks(t *testing.T) {
	all := []string{task5FaultsComplete, task5FaultsInFlight, task5FaultsRetryAfter}
	done := func(s results.JudgeStrategy) bool {
		return s.N > 0 && s.Completed == int64(s.N) && !s.TimedOut && s.Error == ""
	}
	tests := []struct {
		name   string
		change func(s *results.JudgeStrategy)
		fail   []string
	}{
		{"the reference", func(*results.JudgeStrategy) {}, nil},
		// wrong/task5/bare-429-is-final: the 12 judgments refused with a
		// 429 without retry-after are lost.
		{"a bare 429 taken as final", func(s *results.JudgeStrategy) {
			s.Completed, s.Server.Faults.Retried[results.FaultRateLimitBare] = 288, 0
		}, []string{task5FaultsComplete}},
		// wrong/task5/unbounded-in-flight: the slot is given back before
		// the request is sent.
		{"unbounded in flight", func(s *results.JudgeStrategy) { s.Server.MaxInFlight = 97 }, []string{task5FaultsInFlight}},
		// wrong/task5/ignores-retry-after: retried after the backoff alone.
		{"retry-after ignored", func(s *results.JudgeStrategy) {
			s.Server.Faults.RetriedEarly, s.Server.Faults.MinRetryAfterGapMS = 11, 37
		}, []string{task5FaultsRetryAfter}},
		// A 429 with retry-after never retried at all.
		{"retry-after answers never retried", func(s *results.JudgeStrategy) {
			s.Completed, s.Server.Faults.Retried[results.FaultRateLimit], s.Server.Faults.MinRetryAfterGapMS = 288, 0, -1
		}, []string{task5FaultsComplete, task5FaultsRetryAfter}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := task5Faults()
			tt.change(&s)
			for _, name := range all {
				c := judged(t, 5, name, func(g *grading) { checkTask5Faults(g, s, done) })
				assert.Equal(t, wantStatus(name, tt.fail), c.Status, "%s: %s", name, c.Message)
			}
		})
	}
	// A client that panics in Create sends nothing, so no fault is
	// injected: its fault, not the grader's.
	s := task5Faults()
	s.Completed, s.Server.Requests, s.Error = 0, 0, "Create panicked: not implemented"
	s.Server.Faults.Injected, s.Server.Faults.Retried = map[string]int64{}, map[string]int64{}
	for _, name := range all {
		c := judged(t, 5, name, func(g *grading) { checkTask5Faults(g, s, done) })
		assert.Equal(t, results.StatusFail, c.Status, "%s: %s", name, c.Message)
		assert.Contains(t, c.Message, "sent only 0 requests")
	}
	// A path the flood never took leaves every check not judged: the
	// grader's fault, never a pass.
	for _, change := range []func(s *results.JudgeStrategy){
		func(s *results.JudgeStrategy) { s.Server.Faults.Injected[results.FaultTimeout] = 0 },
		func(s *results.JudgeStrategy) { s.Server.Faults = nil },
	} {
		s := task5Faults()
		change(&s)
		for _, name := range all {
			c := judged(t, 5, name, func(g *grading) { checkTask5Faults(g, s, done) })
			assert.Equal(t, results.StatusError, c.Status, "%s: %s", name, c.Message)
			assert.Contains(t, c.Message, "defect of the grader")
		}
	}
}
