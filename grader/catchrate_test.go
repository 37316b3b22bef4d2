package grader

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"ratelab/grader/corpus"
	"ratelab/internal/redisenv"
	"ratelab/internal/suites/suitekit"
)

// catchRateEnv names the environment variable that turns on
// TestCatchRate and says over how many seeds it runs each wrong variant.
const catchRateEnv = "RATELAB_CATCHRATE"

// TestCatchRate measures how reliably the unit suites catch the corpus:
// each wrong variant's suite is built once and run on $RATELAB_CATCHRATE
// seeds drawn from the run's seed, and every Caught-By subtest must fail on
// every one of them. A check that catches a wrong variant on most seeds
// but not all passes the corpus tests on most runs and then fails one in
// CI (breakersuite's Model missed min-calls-since-creation on 7 seeds in
// 100); this finds such checks before a run does. It takes about as long
// as the corpus's unit variants times the seeds, so it runs only when
// asked, as in docs/VALIDITY.md:
//
//	RATELAB_CATCHRATE=20 go test -count=1 -timeout 60m -run TestCatchRate ./grader/
func TestCatchRate(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(catchRateEnv))
	if n <= 0 {
		t.Skipf("set %s to a number of seeds to measure how reliably each wrong variant is caught", catchRateEnv)
	}
	all, replace := loadCorpus(t, corpus.Wrong)
	redisURL := "off"
	if redisenv.ServerAvailable() {
		srv, err := redisenv.StartServer(context.Background(), t.TempDir())
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		redisURL = srv.URL
	}
	rng := suitekit.Rand(t)
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rng.Uint64() >> 1
	}
	t.Logf("%d seeds a variant, drawn from seed %d", n, suitekit.Seed())
	for _, v := range all {
		if len(v.CaughtBy) == 0 {
			continue
		}
		t.Run(v.ID(), func(t *testing.T) {
			t.Parallel()
			task, ok := Lookup(v.Task)
			require.True(t, ok)
			if needsRealRedis(v.CaughtBy) && redisURL == "off" {
				t.Skip("caught only by task 6's Redis/ checks, and no redis-server is installed")
			}
			bin := buildSuite(t, task, replace[v.ID()])
			names := make([]string, len(v.CaughtBy))
			for i, sub := range v.CaughtBy {
				names[i] = task.Unit.Test + "/" + sub
			}
			missed := map[string][]uint64{}
			for _, seed := range seeds {
				passed := runSuite(t, task, bin, seed, redisURL, names)
				for _, sub := range v.CaughtBy {
					if passed[task.Unit.Test+"/"+sub] {
						missed[sub] = append(missed[sub], seed)
					}
				}
			}
			for sub, ss := range missed {
				t.Errorf("%s passed on %d of %d seeds, such as %d (replay: grade %s --seed %d with this variant)",
					sub, len(ss), n, ss[0], task.ID, ss[0])
			}
		})
	}
}

// buildSuite compiles the task's unit suite on the exercises tree with
// replace overlaid, with the race detector as the grader runs it, and
// returns the test binary.
func buildSuite(t *testing.T, task Task, replace map[string]string) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	overlay, err := writeOverlay(dir, root, replace)
	require.NoError(t, err)
	bin := filepath.Join(dir, "suite.test")
	args := []string{"test", "-c", "-race", "-o", bin, "-tags=exercises"}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	args = append(args, "./"+filepath.ToSlash(filepath.Join(string(Exercises), task.Unit.Package)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, err := goCommand(ctx, root, dir, args...)
	require.NoError(t, err)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the suite: %s", out)
	return bin
}

// resultRE matches go test -v's verdict line of a test.
var resultRE = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)

// runSuite runs the subtests names of bin with seed and returns those that
// passed.
func runSuite(t *testing.T, task Task, bin string, seed uint64, redisURL string, names []string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.v", "-test.count=1", "-test.timeout=90s",
		"-test.run="+skipPattern(names),
		fmt.Sprintf("-rapid.seed=%d", seed), "-rapid.nofailfile")
	cmd.Dir = filepath.Join(repoRoot(t), string(Exercises), task.Unit.Package)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", SeedEnv, seed), "REDIS_URL="+redisURL)
	ownProcessGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // a wrong variant fails: the verdict lines say which subtests
	passed := map[string]bool{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if m := resultRE.FindStringSubmatch(sc.Text()); m != nil && m[1] == "PASS" {
			passed[m[2]] = true
		}
	}
	return passed
}
