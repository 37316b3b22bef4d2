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
}

// breakpoints returns the prefixes of p that end in a block with
// cache_control, shortest first. Blocks are taken in order: the system
// blocks, then each message's blocks.
func breakpoints(p MessageParams) []breakpoint {
	var (
		bps    []breakpoint
		h      hash.Hash
		tokens int
	)
	h = sha256.New()
	h.Write([]byte("model\x00" + p.Model + "\x00"))
	add := func(role string, b TextBlock) {
		tokens += TextTokens(b.Text)
		h.Write([]byte(role + "\x00" + b.Text + "\x00"))
		if b.CacheControl != nil {
			bps = append(bps, breakpoint{key: hex.EncodeToString(h.Sum(nil)), tokens: tokens})
		}
	}
	for _, b := range p.System {
		add("system", b)
	}
	for _, m := range p.Messages {
		h.Write([]byte("turn\x00"))
		for _, b := range m.Content {
			add(m.Role, b)
		}
	}
	return bps
}

// CachePrefix returns the cached prefix p asks for: everything up to and
// including its last block with cache_control. key identifies that prefix
// (the same model and blocks give the same key) and tokens is its size.
// ok is false when no block has cache_control.
//
// After a request with that prefix succeeds, the fake serves the prefix from
// its cache for CacheTTL after each use, if it holds at least
// CacheMinTokens: the tokens count as cache_read_input_tokens, which do not
// count against the input-token limit.
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
