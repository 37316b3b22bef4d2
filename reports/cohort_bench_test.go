package reports

import (
	"os"
	"strconv"
	"testing"

	"ratelab/internal/cohortgen"
)

// BenchmarkCohort reads a cohort of realistic documents (internal/cohortgen:
// 280 KB on average) and writes its report, as grade cohort does.
// RATELAB_COHORT_N sets how many (default 200); for 10,000 and their time
// and memory, measure the command itself (docs/BENCHMARKS.md).
func BenchmarkCohort(b *testing.B) {
	n := 200
	if s := os.Getenv("RATELAB_COHORT_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("RATELAB_COHORT_N=%q: want a count of documents", s)
		}
		n = v
	}
	dir := b.TempDir()
	size, err := cohortgen.Write(dir, n, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("RATELAB_SIGNING_KEY", "")
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		c, err := LoadCohort([]string{dir})
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Docs) != n {
			b.Fatalf("read %d documents of %d; skipped %v", len(c.Docs), n, c.Skipped[:min(3, len(c.Skipped))])
		}
		if err := WriteCohort(b.TempDir(), c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/document")
}
