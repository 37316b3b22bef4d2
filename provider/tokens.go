package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"hash/fnv"
	"strings"
	"unicode/utf8"
)

// TextTokens returns how many tokens the fake counts for the text s:
// ⌈runes/4⌉, so "" is 0 tokens, "a" and "abcd" are 1, "abcde" is 2. This is
// the lesson's "about four characters a token" made exact.
func TextTokens(s string) int {
	return (utf8.RuneCountInString(s) + 3) / 4
}

// CountTokens returns the input tokens of p, exactly as the fake counts
// them and as count_tokens reports them: the sum of TextTokens over every
// system block and every content block of every message, in any order.
// Nothing else counts: no framing per message, no role names, and the
// model and max_tokens are free.
func CountTokens(p MessageParams) int {
	n := 0
	for _, b := range p.System {
		n += TextTokens(b.Text)
	}
	for _, m := range p.Messages {
		for _, b := range m.Content {
			n += TextTokens(b.Text)
		}
	}
	return n
}

// A breakpoint is the end of a prefix marked with cache_control.
type breakpoint struct {
	key    string // identifies the prefix: the model and every block up to here
	tokens int    // the prefix's tokens, CountTokens of everything up to here
	ttl    string // TTL5m or TTL1h
	// lookback holds the prefixes that end at the lookbackBlocks-1 blocks
	// before this one, nearest first: where the API looks for a cache hit
	// besides the breakpoint itself.
	lookback []prefix
}

// A prefix is the prompt up to the end of one block.
type prefix struct {
	key    string
	tokens int
}

// lookbackBlocks is how many block boundaries the fake checks for a cache
// hit per breakpoint, the breakpoint's own included, as the API's "about 20
// blocks" of lookback. It is what makes automatic caching work as a
// conversation grows: the last turn's breakpoint is a few blocks back.
const lookbackBlocks = 20

// marked returns the cache_control that applies to a block: its own, or,
// for the last block of the last message, p's top-level one.
func marked(p MessageParams, b TextBlock, last bool) *CacheControl {
	if b.CacheControl != nil {
		return b.CacheControl
	}
	if last {
		return p.CacheControl
	}
	return nil
}

// breakpoints returns the prefixes of p that end in a block with
// cache_control (its own, or the top-level one on the last block), shortest
// first. Blocks are taken in order: the system blocks, then each message's
// blocks.
func breakpoints(p MessageParams) []breakpoint {
	var (
		bps    []breakpoint
		seen   []prefix // every block boundary so far
		h      hash.Hash
		tokens int
	)
	h = sha256.New()
	h.Write([]byte("model\x00" + p.Model + "\x00"))
	add := func(role string, b TextBlock, last bool) {
		tokens += TextTokens(b.Text)
		h.Write([]byte(role + "\x00" + b.Text + "\x00"))
		here := prefix{key: hex.EncodeToString(h.Sum(nil)), tokens: tokens}
		if cc := marked(p, b, last); cc != nil {
			ttl := TTL5m
			if cc.TTL == TTL1h {
				ttl = TTL1h
			}
			var back []prefix
			for i := len(seen) - 1; i >= 0 && len(back) < lookbackBlocks-1; i-- {
				back = append(back, seen[i])
			}
			bps = append(bps, breakpoint{key: here.key, tokens: here.tokens, ttl: ttl, lookback: back})
		}
		seen = append(seen, here)
	}
	for _, b := range p.System {
		add("system", b, false)
	}
	for i, m := range p.Messages {
		h.Write([]byte("turn\x00"))
		for j, b := range m.Content {
			add(m.Role, b, i == len(p.Messages)-1 && j == len(m.Content)-1)
		}
	}
	return bps
}

// CachePrefix returns the cached prefix p asks for: everything up to and
// including its last block with cache_control, or its last block when p has
// a top-level cache_control. key identifies that prefix (the same model and
// blocks give the same key) and tokens is its size. ok is false when p asks
// for no caching.
//
// After a request with that prefix succeeds, the fake serves the prefix from
// its cache for CacheTTL (CacheTTL1h for a ttl of "1h") after each use, if it
// holds at least CacheMinTokens: the tokens count as
// cache_read_input_tokens, which do not count against the input-token
// limit. A later request reads the longest cached prefix that ends at one of
// its breakpoints or at one of the 19 blocks before each.
func CachePrefix(p MessageParams) (key string, tokens int, ok bool) {
	bps := breakpoints(p)
	if len(bps) == 0 {
		return "", 0, false
	}
	last := bps[len(bps)-1]
	return last.key, last.tokens, true
}

// Lengths of a reply the fake writes when max_tokens does not cut it.
const (
	minReply  = 16 // tokens
	replySpan = 48 // a reply has minReply to minReply+replySpan-1 tokens
)

// ReplyTokens returns how many output tokens the fake's reply to p has:
// min(p.MaxTokens, 16 + h mod 48), where h is the 32-bit FNV-1a hash of the
// text of p's last message (its blocks joined). So a reply has 16 to 63
// tokens unless max_tokens cuts it, and the same request always gets the
// same length.
func ReplyTokens(p MessageParams) int {
	h := fnv.New32a()
	if n := len(p.Messages); n > 0 {
		for _, b := range p.Messages[n-1].Content {
			h.Write([]byte(b.Text))
		}
	}
	return min(p.MaxTokens, minReply+int(h.Sum32()%replySpan))
}

// replyFiller is what the fake's replies are made of.
const replyFiller = "Relevance: judged. The document addresses the query in part; " +
	"a reader would find some of what they asked for here. "

// replyText returns a text of exactly tokens tokens (4×tokens ASCII
// characters) made of replyFiller.
func replyText(tokens int) string {
	n := 4 * tokens
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		b.WriteString(replyFiller[:min(len(replyFiller), n-b.Len())])
	}
	return b.String()
}
