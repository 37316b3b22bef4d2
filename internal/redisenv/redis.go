// Package redisenv opens the Redis that task 6 keeps its token buckets in:
// a real server given by URL, a private redis-server started for the
// purpose (StartServer), or an embedded miniredis when there is neither.
// The lab's commands and test suites share it, so that they all use the same
// short timeouts. It reads no environment variables and no flags; callers
// decide where the URL comes from (usually REDIS_URL or a --redis flag).
package redisenv

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Timeout bounds every network step of a client that Open returns: dialing,
// each read and write, and waiting for a free connection in the pool. A rate
// limiter sits in front of every request, so it must give up on a dead or
// stuck Redis within a fraction of a request's own budget rather than the
// five seconds go-redis allows by default.
const Timeout = 200 * time.Millisecond

// Open connects to the Redis at url, such as "redis://127.0.0.1:6379/0" (see
// redis.ParseURL for the syntax), or, when url is "", starts an embedded
// miniredis on a free loopback port and connects to that. It checks the
// connection with a PING bounded by ctx and by 5 × Timeout.
//
// desc says in a few words what was opened, such as "embedded miniredis at
// 127.0.0.1:40123" or "redis at 127.0.0.1:6379", for logs and reports.
// cleanup closes the client and stops the miniredis, if any; call it once
// when done. On error there is nothing to clean up.
//
// The client has the short timeouts described at Timeout (a timeout given in
// the URL, such as ?read_timeout=1s, takes precedence), respects context
// deadlines, and tries a failed dial only once, so a call on a dead server
// fails within about Timeout instead of retrying for seconds.
func Open(ctx context.Context, url string) (client *redis.Client, desc string, cleanup func(), err error) {
	var mr *miniredis.Miniredis
	var opt *redis.Options
	if url == "" {
		mr, err = miniredis.Run()
		if err != nil {
			return nil, "", nil, fmt.Errorf("redisenv: start miniredis: %w", err)
		}
		opt = &redis.Options{Addr: mr.Addr()}
		desc = "embedded miniredis at " + mr.Addr()
	} else {
		opt, err = redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("redisenv: %w", err)
		}
		desc = "redis at " + opt.Addr
	}
	Tune(opt)
	client = redis.NewClient(opt)
	cleanup = func() {
		client.Close()
		if mr != nil {
			mr.Close()
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*Timeout)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("redisenv: ping %s: %w", desc, err)
	}
	return client, desc, cleanup, nil
}

// Tune gives opt the short timeouts that Open uses, leaving alone any that
// are already set: Timeout for dialing, reading, writing and waiting for a
// pooled connection, a single dial attempt per connection, and context
// deadlines respected. Use it when building a client by hand.
func Tune(opt *redis.Options) {
	for _, d := range []*time.Duration{&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout} {
		if *d == 0 {
			*d = Timeout
		}
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = 1
	}
	opt.ContextTimeoutEnabled = true
}
