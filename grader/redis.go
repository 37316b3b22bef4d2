package grader

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"ratelab/internal/redisenv"
	"ratelab/results"
)

// RedisOff as Options.RedisURL makes an embedded miniredis judge task 6.
const RedisOff = "off"

// judgeRedis is the Redis that judges task 6, in its unit stage (the suite's
// Redis/ checks) and its floods: the server --redis named; else a private
// redis-server the grader starts under its scratch folder on a free
// loopback port, in a process group of its own, and stops on every way out
// (Ctrl-C included: it ends with the grading's context); else, when
// redis-server is not installed, an embedded miniredis.
type judgeRedis struct {
	kind    string // results.RedisGiven, RedisPrivate or RedisEmbedded
	url     string
	version string
	srv     *redisenv.Server     // the private server
	mr      *miniredis.Miniredis // the embedded one
	rdb     *redis.Client        // the grader's own client, for PING and SCAN
}

// openRedis opens the Redis that judges task 6 and records which one it is
// in the document (a note, and Document.Redis).
func (g *grading) openRedis(ctx context.Context) (*judgeRedis, error) {
	r := &judgeRedis{}
	var fallback string // why miniredis judges
	switch {
	case g.opts.RedisURL == RedisOff:
		fallback = "--redis off"
	case g.opts.RedisURL != "":
		r.kind, r.url = results.RedisGiven, g.opts.RedisURL
	case redisenv.ServerAvailable():
		srv, err := redisenv.StartServer(ctx, filepath.Join(g.tmp, "redis"))
		if err == nil {
			r.kind, r.url, r.version, r.srv = results.RedisPrivate, srv.URL, srv.Version, srv
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fallback = fmt.Sprintf("a private redis-server would not start (%v)", err)
	default:
		fallback = "no redis-server is installed"
	}
	if r.kind == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("start miniredis: %w", err)
		}
		r.kind, r.url, r.mr = results.RedisEmbedded, "redis://"+mr.Addr(), mr
	}
	opt, err := redis.ParseURL(r.url)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	redisenv.Tune(opt)
	opt.MaxRetries = -1 // one try: a server that went away must show at once
	r.rdb = redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*redisenv.Timeout)
	defer cancel()
	if err := r.rdb.Ping(pctx).Err(); err != nil {
		r.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the Redis at %s (--redis) does not answer PING: %w; start it, or grade without --redis to use a private redis-server", redact(r.url), err)
	}
	if r.kind == results.RedisGiven {
		r.version = redisenv.Version(pctx, r.rdb)
	}
	g.doc.Redis = &results.Redis{Kind: r.kind, Version: r.version, URL: redact(r.url), Unit: r.kind != results.RedisEmbedded}
	note := "task 6 judged by " + r.String()
	if on := g.runner().floodsRedis(r); on != "" {
		note = "task 6's unit suite judged by " + r.String() + "; its floods by " + on
	}
	if fallback != "" {
		note += " (" + fallback + "; miniredis's Lua is not Redis's, so the unit suite's Redis/ checks were skipped: install Redis, or pass --redis URL, to be judged by a real one)"
	}
	g.doc.Notes = append(g.doc.Notes, note)
	g.logf("  redis: %s", note)
	return r, nil
}

// String says which Redis this is, for notes and messages.
func (r *judgeRedis) String() string {
	switch r.kind {
	case results.RedisPrivate:
		return fmt.Sprintf("a private redis-server %s at %s (started by the grader)", r.version, r.srv.Addr)
	case results.RedisGiven:
		v := ""
		if r.version != "" {
			v = " " + r.version
		}
		return fmt.Sprintf("the Redis%s at %s (--redis)", v, redact(r.url))
	}
	return "an embedded miniredis at " + strings.TrimPrefix(r.url, "redis://")
}

// unitURL is the REDIS_URL the unit suite runs its Redis/ checks on: ""
// (off) for miniredis, which its Miniredis/ checks cover.
func (r *judgeRedis) unitURL() string {
	if r == nil || r.kind == results.RedisEmbedded {
		return ""
	}
	return r.url
}

// close stops whatever openRedis started.
func (r *judgeRedis) close() {
	if r.rdb != nil {
		r.rdb.Close()
	}
	if r.srv != nil {
		r.srv.Stop()
	}
	if r.mr != nil {
		r.mr.Close()
	}
}

// flush empties a Redis that belongs to the grading (private or embedded),
// so that the keyspace after a flood holds only what the limiter wrote; a
// given server is left alone.
func (r *judgeRedis) flush(ctx context.Context) error {
	if r.kind == results.RedisGiven {
		return nil
	}
	return r.rdb.FlushAll(ctx).Err()
}

// idle lets d pass: miniredis's TTLs only count down when told to.
func (r *judgeRedis) idle(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	if r.mr != nil {
		r.mr.FastForward(d)
	}
	return nil
}

// health reports whether Redis still answers: gone says what happened to a
// Redis that went away (a private server that exited, or a PING refused or
// cut); slow is the error of a PING that was not answered in time.
func (r *judgeRedis) health(ctx context.Context) (gone string, slow error) {
	if r.srv != nil {
		if exited, how := r.srv.Exited(); exited {
			return fmt.Sprintf("Redis at %s stopped answering during the flood (the private redis-server exited: %s)", redact(r.url), how), nil
		}
	}
	pctx, cancel := context.WithTimeout(ctx, redisenv.Timeout)
	defer cancel()
	err := r.rdb.Ping(pctx).Err()
	switch {
	case err == nil || ctx.Err() != nil:
		return "", nil
	case refused(err):
		return fmt.Sprintf("Redis at %s stopped answering during the flood (%v)", redact(r.url), err), nil
	}
	return "", err
}

// refused reports whether err says nobody answers at the address any more
// (connection refused, reset or closed), as opposed to a slow answer.
func refused(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection refused")
}

// keyspace lists the keys that match pattern ("*" for all) with their PTTL.
// It stops after max keys.
func (r *judgeRedis) keyspace(ctx context.Context, pattern string, max int) ([]redisenv.KeyTTL, error) {
	return redisenv.Keyspace(ctx, r.rdb, pattern, max)
}

// redact returns u without its password.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}
