package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/fakegpu"
)

// The grader starts this program with a Config's Args: its command line
// must give back that Config, beside the listening flags.
func TestParseFlagsArgs(t *testing.T) {
	shed := fakegpu.DefaultConfig()
	shed.Mode, shed.MaxWaiting, shed.Deadline, shed.SpreadRetryAfter = fakegpu.ModeShed, 2000, 0, true
	redis := fakegpu.DefaultConfig()
	redis.Mode, redis.Redis, redis.BucketRate, redis.BucketBurst, redis.Work = fakegpu.ModeRedis, "redis://127.0.0.1:6379", 35.5, 7, 250*time.Millisecond
	for _, cfg := range []fakegpu.Config{fakegpu.DefaultConfig(), shed, redis} {
		args := append([]string{"--port", "0", "--stats-port", "0"}, cfg.Args()...)
		o, err := parseFlags(args)
		require.NoError(t, err, "parseFlags(%q)", args)
		assert.Equal(t, cfg, o.cfg, "parseFlags(%q).cfg", args)
		assert.Equal(t, 0, o.statsPort, "parseFlags(%q).statsPort", args)
	}
}

func TestParseFlagsDefaults(t *testing.T) {
	o, err := parseFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, options{cfg: fakegpu.DefaultConfig(), statsPort: -1}, o)
	_, err = parseFlags([]string{"--mode", "fast"})
	assert.ErrorContains(t, err, `unknown mode "fast"`)
}
