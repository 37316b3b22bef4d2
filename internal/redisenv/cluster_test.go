package redisenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterFormsRunsScriptsAndCloses forms a cluster, runs a script whose
// two keys share a hash tag, sees Redis refuse one whose keys do not
// (CROSSSLOT), and checks that Close leaves no node running and no folder.
func TestClusterFormsRunsScriptsAndCloses(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	c, err := StartCluster(ctx, t.TempDir())
	require.NoError(t, err)
	pids := c.Pids()
	defer c.Close()
	require.Len(t, c.Nodes, 2*ClusterPrimaries)
	for _, n := range c.Nodes {
		info, err := n.Client.Do(ctx, "CLUSTER", "INFO").Text()
		require.NoError(t, err)
		assert.Equal(t, "ok", infoField(info, "cluster_state"), n.Addr)
	}

	const script = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('GET', KEYS[2])"
	got, err := c.Client.Eval(ctx, script, []string{"ratelab:{alice}:tokens", "ratelab:{alice}:ts"}, "7").Text()
	require.NoError(t, err, "EVAL of two keys with one hash tag")
	assert.Equal(t, "7", got)
	_, err = c.Client.Eval(ctx, script, []string{"ratelab:alice:tokens", "ratelab:alice:ts"}, "7").Result()
	require.Error(t, err, "EVAL of two keys without a hash tag")
	assert.True(t, strings.HasPrefix(err.Error(), "CROSSSLOT"), "EVAL without a hash tag = %v; want CROSSSLOT", err)

	// The keys of many clients land on every primary.
	seen := map[string]bool{}
	for i := range 64 {
		key := "ratelab:bucket:" + strings.Repeat("x", i)
		slot, err := c.Client.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		seen[c.NodeOfSlot(int(slot)).Addr] = true
	}
	assert.Len(t, seen, ClusterPrimaries)

	dir := c.Dir
	c.Close()
	c.Close() // twice is fine
	for _, pid := range pids {
		assert.False(t, alive(pid), "redis-server %d still runs after Close", pid)
	}
	assert.NoDirExists(t, dir)
}

// TestClusterEndsWithItsContext cancels the context a cluster was started
// with, as Ctrl-C does: every node goes.
func TestClusterEndsWithItsContext(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCluster(ctx, t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	cancel()
	for _, n := range c.Nodes {
		select {
		case <-n.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("node %s still runs 5s after its context ended", n.Addr)
		}
	}
	for _, pid := range c.Pids() {
		assert.False(t, alive(pid))
	}
}

func TestClusterWithoutProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartCluster(context.Background(), t.TempDir())
	assert.True(t, errors.Is(err, ErrNoServer), "StartCluster without redis-server = %v; want ErrNoServer", err)
}

var _ redis.Scripter = (*redis.ClusterClient)(nil)
