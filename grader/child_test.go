package grader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/harness"
)

// TestWorkersShareOnePort starts four reference servers on one port and
// checks that a flood's connections reach all of them.
func TestWorkersShareOnePort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and floods four workers")
	}
	ctx := context.Background()
	bin, cleanup, err := BuildTool(ctx, repoRoot(t), Solutions, "fakegpu")
	require.NoError(t, err)
	defer cleanup()
	w, err := StartWorkers(ctx, bin, 4, 0, "--mode", "none")
	require.NoError(t, err)
	defer w.Stop()
	require.Len(t, w.StatsURLs, 4)
	// A connection for every request: the kernel spreads connections by
	// a hash of their addresses, and the connections a keep-alive flood
	// opens (about as many as requests in flight, 200/s × 100 ms) left a
	// worker with none in one CI run; with 200 the chance is 4 × (3/4)^200.
	run, err := harness.Flood(ctx, harness.Options{URL: w.URL + "/generate", Rate: 200, Duration: time.Second, NewConnections: true})
	require.NoError(t, err)
	assert.Equal(t, int64(200), run.OK, "4 workers of 80/s serve 200/s")
	var total int64
	for _, u := range w.StatsURLs {
		st, err := harness.HTTPStats(u)(ctx)
		require.NoError(t, err)
		assert.Positive(t, st.Received, "every worker got some of the connections (%s)", u)
		total += st.Received
	}
	assert.Equal(t, int64(200), total)
}
