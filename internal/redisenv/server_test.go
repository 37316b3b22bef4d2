package redisenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func needServer(t *testing.T) {
	t.Helper()
	if !ServerAvailable() {
		t.Skip("no redis-server in PATH")
	}
}

func TestStartServerAnswersAndStops(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	s, err := StartServer(ctx, t.TempDir())
	require.NoError(t, err)
	defer s.Stop()
	assert.NotEmpty(t, s.Version, "INFO server gives the version")

	rdb, desc, cleanup, err := Open(ctx, s.URL)
	require.NoError(t, err)
	defer cleanup()
	assert.Contains(t, desc, s.Addr)
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, s.Version, Version(ctx, rdb))

	exited, _ := s.Exited()
	assert.False(t, exited)
	pid := s.Pid()
	s.Stop()
	s.Stop() // twice is fine
	exited, how := s.Exited()
	assert.True(t, exited, "Exited() after Stop")
	assert.NotEmpty(t, how)
	assert.False(t, alive(pid), "redis-server %d still runs after Stop", pid)
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	assert.Error(t, rdb.Ping(pctx).Err(), "PING after Stop")
}

func TestStartServerEndsWithItsContext(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := StartServer(ctx, t.TempDir())
	require.NoError(t, err)
	pid := s.Pid()
	cancel()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("redis-server still runs 5s after its context ended")
	}
	assert.False(t, alive(pid))
}

func TestStartServerWithoutProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartServer(context.Background(), t.TempDir())
	assert.True(t, errors.Is(err, ErrNoServer), "StartServer without redis-server = %v; want ErrNoServer", err)
	assert.False(t, ServerAvailable())
}
