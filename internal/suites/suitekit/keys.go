package suitekit

import (
	mrand "math/rand/v2"
	"strconv"
	"strings"

	"pgregory.net/rapid"
)

// MaxKeyBytes is the longest key KeySet and RandomKeys draw: longer than
// any prefix a limiter might keep of a key, and short enough that a few
// thousand such keys cost little memory.
const MaxKeyBytes = 1 << 10

// KeySet draws n distinct client keys (n ≥ 1) from everything a contract
// that takes a key as a string allows: any bytes, of any length up to
// MaxKeyBytes. Beside keys of every shape (empty, printable, API-key-like,
// invalid UTF-8, NUL bytes, long), it draws keys that are distinct but
// close to one drawn before, where a limiter that normalises or shortens
// keys would merge two clients: the same letters in another case, the
// same text with a space before or after, the same long prefix with
// another last byte, the same accented letter composed and decomposed, the
// same text with a NUL byte appended. With rapid a failing set shrinks
// towards short plain keys.
func KeySet(n int) *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		return keysFrom(n, func(bound int) int { return rapid.IntRange(0, bound-1).Draw(t, "key choice") })
	})
}

// RandomKeys is KeySet for the checks that draw from a *rand.Rand (Rand)
// rather than with rapid: n distinct keys of the same shapes.
func RandomKeys(rng *mrand.Rand, n int) []string {
	return keysFrom(n, rng.IntN)
}

// keysFrom builds n distinct keys, each choice drawn by pick(bound), a
// number in [0, bound).
func keysFrom(n int, pick func(bound int) int) []string {
	keys := make([]string, 0, n)
	seen := make(map[string]bool, n)
	for len(keys) < n {
		var k string
		if len(keys) > 0 && pick(2) == 0 {
			k = nearKey(keys[pick(len(keys))], pick)
		} else {
			k = freshKey(pick)
		}
		for seen[k] { // keep the set distinct: a byte more always is
			k += string(rune('a' + pick(26)))
		}
		seen[k] = true
		keys = append(keys, k)
	}
	return keys
}

// freshKey draws a key of one of the shapes clients use, or of none.
func freshKey(pick func(int) int) string {
	switch pick(8) {
	case 0:
		return "client-" + strconv.Itoa(pick(1000)) // shrinks to this
	case 1:
		return ""
	case 2:
		return strconv.Itoa(pick(256)) + "." + strconv.Itoa(pick(256)) + "." + strconv.Itoa(pick(256)) + "." + strconv.Itoa(pick(256))
	case 3:
		const hex = "0123456789abcdef"
		b := []byte("sk-")
		for range 32 {
			b = append(b, hex[pick(16)])
		}
		return string(b)
	case 4: // any bytes: NUL, invalid UTF-8, control characters
		b := make([]byte, pick(24))
		for i := range b {
			b[i] = byte(pick(256))
		}
		return string(b)
	case 5: // long, with a repeated prefix such as a tenant's path
		return strings.Repeat("tenant/", 1+pick(MaxKeyBytes/8)) + strconv.Itoa(pick(10))
	case 6:
		return "Ünïcödé-" + strconv.Itoa(pick(100))
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, 1+pick(12))
	for i := range b {
		b[i] = letters[pick(len(letters))]
	}
	return string(b)
}

// nearKey returns a key that differs from k in a way a limiter that
// normalises or shortens keys would not see.
func nearKey(k string, pick func(int) int) string {
	switch pick(6) {
	case 0: // another case: swap the case of every letter (or add one)
		if swapped := swapCase(k); swapped != k {
			return swapped
		}
		return k + "A"
	case 1:
		return k + " "
	case 2:
		return " " + k
	case 3: // a long shared prefix, then another last byte
		long := k
		for len(long) < 300 {
			long += "/" + k + "-padding"
		}
		long = long[:min(len(long), MaxKeyBytes-1)]
		return long + string(rune('0'+pick(10)))
	case 4: // é composed (U+00E9) against e and a combining acute (U+0301)
		if strings.Contains(k, "\u00e9") {
			return strings.Replace(k, "\u00e9", "e\u0301", 1)
		}
		return k + "\u00e9"
	}
	return k + "\x00"
}

// swapCase turns ASCII lower case into upper case and back.
func swapCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// QuoteKey quotes key for a failure message as %q does, but with the
// middle of a key longer than 64 bytes left out and its length given, so
// that a message stays readable; the ends, where KeySet's long keys
// differ, are kept.
func QuoteKey(key string) string {
	if len(key) <= 64 {
		return strconv.Quote(key)
	}
	return strconv.Quote(key[:24]) + "+…" + strconv.Itoa(len(key)-48) + " bytes…+" + strconv.Quote(key[len(key)-24:])
}
