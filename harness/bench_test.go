package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkFloodAccuracy measures how well the load generator keeps its
// schedule against a handler that does nothing, so that only the generator
// is measured. It reports issued/expected (1 is perfect) and the send lag
// p99 and max in milliseconds. Run it with -benchtime 1x: one flood of 2 s
// per rate. Record results in docs/BENCHMARKS.md.
func BenchmarkFloodAccuracy(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ts.Close()
	for _, rate := range []float64{1000, 5000} {
		b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
			var issued, expected int64
			var lagP99, lagMax float64
			for b.Loop() {
				run, err := Flood(context.Background(), Options{URL: ts.URL, Rate: rate, Duration: 2 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				issued += run.Issued
				expected += run.Expected
				lagP99 = max(lagP99, run.SendLagP99MS)
				lagMax = max(lagMax, run.SendLagMaxMS)
			}
			b.ReportMetric(float64(issued)/float64(expected), "issued/expected")
			b.ReportMetric(lagP99, "lag-p99-ms")
			b.ReportMetric(lagMax, "lag-max-ms")
		})
	}
}
