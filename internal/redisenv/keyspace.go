package redisenv

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyTTL is one key of a Redis keyspace and its PTTL as Redis answered it
// (negative for a key without an expiry).
type KeyTTL struct {
	Key  string        `json:"key"`
	PTTL time.Duration `json:"pttl"`
}

// Keyspace lists the keys of rdb that match pattern ("*" for all) with
// their PTTL: SCAN, then PTTL of each key in pipelines of 500. It stops
// after max keys; a key that expired between SCAN and PTTL is left out.
func Keyspace(ctx context.Context, rdb *redis.Client, pattern string, max int) ([]KeyTTL, error) {
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) && len(keys) < max {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("SCAN: %w", err)
	}
	out := make([]KeyTTL, 0, len(keys))
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		cmds := make([]*redis.DurationCmd, len(batch))
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				cmds[i] = p.PTTL(ctx, k)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("PTTL: %w", err)
		}
		for i, c := range cmds {
			if c.Val() == -2 {
				continue // expired between SCAN and PTTL
			}
			out = append(out, KeyTTL{Key: batch[i], PTTL: c.Val()})
		}
	}
	return out, nil
}
