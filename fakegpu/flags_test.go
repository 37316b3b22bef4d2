package fakegpu

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configs are servers the grader starts, and one with every setting off
// its default.
func configs() map[string]Config {
	shed := DefaultConfig()
	shed.Mode = ModeShed
	long := shed
	long.MaxWaiting, long.Deadline = 2000, 0
	spread := shed
	spread.SpreadRetryAfter = true
	bucket := DefaultConfig()
	bucket.Mode = ModeBucket
	redis := bucket
	redis.Mode, redis.Redis = ModeRedis, "redis://127.0.0.1:6379"
	odd := Config{Slots: 3, Work: 1500 * time.Microsecond, Mode: ModeBucket, MaxWaiting: 0, Deadline: 1234567 * time.Nanosecond,
		BucketRate: 0.1, BucketBurst: 1.5, SpreadRetryAfter: true, Redis: "redis://user:secret@host:1/2",
		Counting: "log", CountingLimit: 7, CountingWindow: 3 * time.Second}
	return map[string]Config{"default": DefaultConfig(), "shed": shed, "long line, no deadline": long, "spread": spread,
		"bucket": bucket, "redis": redis, "every setting off its default": odd}
}

// The flags Args writes, parsed by the flags RegisterFlags defines on top
// of the defaults, give back the same configuration.
func TestArgsRoundTrip(t *testing.T) {
	for name, c := range configs() {
		t.Run(name, func(t *testing.T) {
			got := DefaultConfig()
			fs := flag.NewFlagSet("fakegpu", flag.ContinueOnError)
			got.RegisterFlags(fs)
			require.NoError(t, fs.Parse(c.Args()), "parse %v", c.Args())
			assert.Equal(t, c, got, "parse(%v)", c.Args())
		})
	}
}

func TestArgs(t *testing.T) {
	c := DefaultConfig()
	c.Mode, c.MaxWaiting, c.Deadline = ModeShed, 2000, 0
	assert.Equal(t, []string{"--burst=20", "--counting=", "--counting-limit=0", "--counting-window=0s", "--deadline=0s", "--max-waiting=2000", "--mode=shed", "--rate=70",
		"--redis=", "--slots=8", "--spread-retry-after=false", "--work=100ms"}, c.Args())
}

func TestModeFlag(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("fakegpu", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	assert.ErrorContains(t, fs.Parse([]string{"--mode", "fast"}), `unknown mode "fast"`)
	require.NoError(t, fs.Parse([]string{"--mode", "redis"}))
	assert.Equal(t, ModeRedis, c.Mode)
}

// Record and FromRecord carry every setting through the results document,
// but the Redis password.
func TestRecordRoundTrip(t *testing.T) {
	for name, c := range configs() {
		t.Run(name, func(t *testing.T) {
			rec := c.Record()
			got, ok := FromRecord(&rec)
			require.True(t, ok, "FromRecord(%+v)", rec)
			if c.Redis == "redis://user:secret@host:1/2" {
				assert.Equal(t, "redis://user:xxxxx@host:1/2", rec.Redis, "the recorded Redis URL")
				c.Redis = rec.Redis
			}
			assert.Equal(t, c, got, "FromRecord(%+v)", rec)
		})
	}
}

func TestFromRecordUnknown(t *testing.T) {
	_, ok := FromRecord(nil)
	assert.False(t, ok, "FromRecord(nil)")
	old := DefaultConfig().Record()
	old.Mode, old.Description = "", "--mode shed"
	_, ok = FromRecord(&old)
	assert.False(t, ok, "FromRecord of an old document's description")
	future := DefaultConfig().Record()
	future.Mode = "quantum"
	_, ok = FromRecord(&future)
	assert.False(t, ok, "FromRecord of an unknown mode")
}
