// The per-key account: its token buckets, its prompt cache, and how a
// request is admitted and settled against them.

package provider

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"ratelab/results"
)

// account is the state of one API key.
type account struct {
	mu                        sync.Mutex
	requests, input, output   bucket
	cache                     map[string]cacheEntry // prefix key → its entry
	admitted                  int                   // requests admitted, for the spend limit
	stats                     results.APIKeyStats
	requestsPM, inPM, outPM   float64 // the limits per minute, for the headers
	cacheMin                  int
	cacheTTL, cacheTTL1h      time.Duration
	spendLimit                int
	baseLatency, tokenLatency time.Duration
	batches                   []*batch    // in order of creation
	faults                    *faultState // nil without a fault plan
}

func (s *Server) account(key string) *account {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.keys[key]; a != nil {
		return a
	}
	now := time.Now()
	c := s.cfg
	a := &account{
		requests:     newBucket(c.RequestsPerMinute, c.capacity(c.RequestsPerMinute), now),
		input:        newBucket(c.InputTokensPerMinute, c.capacity(c.InputTokensPerMinute), now),
		output:       newBucket(c.OutputTokensPerMinute, c.capacity(c.OutputTokensPerMinute), now),
		cache:        make(map[string]cacheEntry),
		requestsPM:   c.RequestsPerMinute,
		inPM:         c.InputTokensPerMinute,
		outPM:        c.OutputTokensPerMinute,
		cacheMin:     c.CacheMinTokens,
		cacheTTL:     c.CacheTTL,
		cacheTTL1h:   c.CacheTTL1h,
		spendLimit:   c.SpendLimit,
		baseLatency:  c.BaseLatency,
		tokenLatency: c.PerTokenLatency,
	}
	s.keys[key] = a
	return a
}

// cacheEntry is one cached prefix.
type cacheEntry struct {
	expires time.Time
	ttl     time.Duration // how far each use pushes expires
}

// ttl is how long a prefix written with the TTL name lives.
func (a *account) ttl(name string) time.Duration {
	if name == TTL1h {
		return a.cacheTTL1h
	}
	return a.cacheTTL
}

// store caches a prefix for ttl from now, keeping a longer life it has.
func (a *account) store(key string, now time.Time, ttl time.Duration) {
	e := a.cache[key]
	e.ttl = max(e.ttl, ttl)
	if exp := now.Add(ttl); exp.After(e.expires) {
		e.expires = exp
	}
	a.cache[key] = e
}

// bucket is a token bucket that may go into debt: a request is admitted
// when the bucket holds min(cost, capacity), and then the whole cost is
// taken. A request bigger than the bucket can therefore pass when the bucket
// is full, and the debt delays whoever comes next, so the long-run rate
// holds whatever the sizes.
type bucket struct {
	rate     float64   // per second
	capacity float64   // the most it holds
	tokens   float64   // held at last; negative while in debt
	last     time.Time // when tokens was brought up to date
}

func newBucket(perMinute, capacity float64, now time.Time) bucket {
	return bucket{rate: perMinute / 60, capacity: capacity, tokens: capacity, last: now}
}

// advance adds what dripped in since last, capped at the capacity. A now
// before last changes nothing.
func (b *bucket) advance(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.capacity, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// wait returns how long until the bucket holds min(n, capacity), 0 if it
// does now. Call advance first.
func (b *bucket) wait(n float64) time.Duration {
	need := min(n, b.capacity)
	if b.tokens >= need {
		return 0
	}
	return time.Duration(math.Ceil((need - b.tokens) / b.rate * 1e9))
}

// give returns n to the bucket (n < 0 takes), capped at the capacity.
func (b *bucket) give(n float64) { b.tokens = min(b.capacity, b.tokens+n) }

// remaining is what the headers report: the whole tokens held, never below 0.
func (b *bucket) remaining() int64 { return int64(math.Floor(max(0, b.tokens))) }

// reset returns when the bucket will be full if nothing is taken.
func (b *bucket) reset(now time.Time) time.Time {
	if b.tokens >= b.capacity {
		return now
	}
	return now.Add(time.Duration(math.Ceil((b.capacity - b.tokens) / b.rate * 1e9)))
}

// resetFormat is RFC 3339 with milliseconds, which time.RFC3339 parses.
const resetFormat = "2006-01-02T15:04:05.000Z07:00"

// setHeaders brings the buckets up to now and writes the nine rate-limit
// headers. Call with a.mu held.
func (a *account) setHeaders(h http.Header, now time.Time) {
	for _, x := range []struct {
		b                       *bucket
		perMinute               float64
		limit, remaining, reset string
	}{
		{&a.requests, a.requestsPM, HeaderRequestsLimit, HeaderRequestsRemaining, HeaderRequestsReset},
		{&a.input, a.inPM, HeaderInputTokensLimit, HeaderInputTokensRemaining, HeaderInputTokensReset},
		{&a.output, a.outPM, HeaderOutputTokensLimit, HeaderOutputTokensRemaining, HeaderOutputTokensReset},
	} {
		x.b.advance(now)
		h.Set(x.limit, strconv.FormatInt(int64(x.perMinute), 10))
		h.Set(x.remaining, strconv.FormatInt(x.b.remaining(), 10))
		h.Set(x.reset, x.b.reset(now).UTC().Format(resetFormat))
	}
}

// admission is the fate of one request at the door.
type admission struct {
	spend     bool          // refused: spend limit
	wait      time.Duration // refused by a bucket: the longest of their waits
	limitedBy string        // the bucket with that wait, for the message
	usage     Usage         // admitted: the input side of the usage
	writes    []breakpoint  // admitted: prefixes to cache once the reply is done
}

// admit decides whether p may go now and, if so, charges it. Call with
// a.mu held.
func (a *account) admit(now time.Time, req parsed) admission {
	p := req.p
	a.requests.advance(now)
	a.input.advance(now)
	a.output.advance(now)
	if a.spendLimit > 0 && a.admitted >= a.spendLimit {
		a.stats.SpendLimited++
		return admission{spend: true}
	}

	// Caching: the longest prefix still cached that ends at a breakpoint,
	// or at one of the blocks just before one, is read for free; the last
	// marked prefix, if longer and big enough, is written (and charged) and
	// becomes readable once this reply is done. Tokens written up to the
	// last 1h breakpoint are written for an hour, the rest for 5 minutes.
	bps := req.breakpoints
	read := 0
	var readKey string
	hit := func(c prefix) {
		if e, ok := a.cache[c.key]; ok && now.Before(e.expires) && c.tokens > read {
			read, readKey = c.tokens, c.key
		}
	}
	for _, bp := range bps {
		hit(prefix{key: bp.key, tokens: bp.tokens})
		for _, c := range bp.lookback {
			hit(c)
		}
	}
	creation, creation1h := 0, 0
	var writes []breakpoint
	if n := len(bps); n > 0 && bps[n-1].tokens > read && bps[n-1].tokens >= a.cacheMin {
		creation = bps[n-1].tokens - read
		for _, bp := range bps {
			if bp.tokens > read && bp.tokens >= a.cacheMin {
				writes = append(writes, bp)
				if bp.ttl == TTL1h {
					creation1h = bp.tokens - read
				}
			}
		}
	}
	total := req.tokens
	uncached := total - read

	var adm admission
	for _, x := range []struct {
		b       *bucket
		n       float64
		name    string
		counter *int64
	}{
		{&a.requests, 1, "requests", &a.stats.LimitedByRequests},
		{&a.input, float64(uncached), "input tokens", &a.stats.LimitedByInputTokens},
		{&a.output, float64(p.MaxTokens), "output tokens", &a.stats.LimitedByOutputTokens},
	} {
		if w := x.b.wait(x.n); w > 0 {
			*x.counter++
			if w > adm.wait {
				adm.wait, adm.limitedBy = w, x.name
			}
		}
	}
	if adm.wait > 0 {
		a.stats.RateLimited++
		return adm
	}

	a.requests.give(-1)
	a.input.give(-float64(uncached))
	a.output.give(-float64(p.MaxTokens))
	a.admitted++
	if readKey != "" {
		a.store(readKey, now, a.cache[readKey].ttl)
	}
	adm.usage = Usage{
		InputTokens: total - read - creation, CacheCreationInputTokens: creation, CacheReadInputTokens: read,
		CacheCreation: CacheCreation{Ephemeral5mInputTokens: creation - creation1h, Ephemeral1hInputTokens: creation1h},
	}
	adm.writes = writes
	a.stats.InputTokens += int64(adm.usage.InputTokens)
	a.stats.CacheCreationInputTokens += int64(creation)
	a.stats.CacheReadInputTokens += int64(read)
	a.stats.InFlight++
	a.stats.MaxInFlight = max(a.stats.MaxInFlight, a.stats.InFlight)
	return adm
}

// finish settles an admitted request that generated out of its maxTokens:
// the output bucket gets back what was not used, and the prefixes it wrote
// become readable if it completed. Call with a.mu held.
func (a *account) finish(now time.Time, maxTokens, out int, completed bool, writes []breakpoint) {
	a.output.advance(now)
	a.output.give(float64(maxTokens - out))
	a.stats.InFlight--
	a.stats.OutputTokens += int64(out)
	if !completed {
		a.stats.Cancelled++
		return
	}
	a.stats.Completed++
	if len(a.cache) > 256 {
		for k, e := range a.cache {
			if !now.Before(e.expires) {
				delete(a.cache, k)
			}
		}
	}
	for _, bp := range writes {
		a.store(bp.key, now, a.ttl(bp.ttl))
	}
}
