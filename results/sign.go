package results

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
)

// Integrity records what the grader checked of itself: the hashes of the
// frozen files (tests, grader, harness, servers) it ran with.
type Integrity struct {
	// FrozenSHA256 is one hash over every frozen file's hash and path.
	FrozenSHA256 string `json:"frozen_sha256"`
	Files        int    `json:"files"`
	// Manifest is the SHA-256 of the release manifest compared against, or
	// a note that there was none.
	Manifest string `json:"manifest"`
	// Mismatched lists frozen files that differ from the manifest.
	Mismatched []string `json:"mismatched,omitempty"`
	// Edited lists, in a development checkout (no manifest), the frozen
	// files that differ from the last commit: a score graded with them is
	// not valid.
	Edited []string `json:"edited,omitempty"`
}

// SigningKeyEnv names the environment variable holding the key that signs
// results (an instructor sets it as a CI secret).
const SigningKeyEnv = "RATELAB_SIGNING_KEY"

// Sign sets doc.Signature to the hex HMAC-SHA256, under key, of the
// document's JSON with an empty signature.
func Sign(doc *Document, key []byte) error {
	mac, err := docMAC(doc, key)
	if err != nil {
		return err
	}
	doc.Signature = hex.EncodeToString(mac)
	return nil
}

// ErrUnsigned and ErrForged are Verify's verdicts on a bad signature.
var (
	ErrUnsigned = errors.New("results are not signed")
	ErrForged   = errors.New("results signature does not match: edited or signed with another key")
)

// Verify checks doc.Signature under key.
func Verify(doc *Document, key []byte) error {
	if doc.Signature == "" {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(doc.Signature)
	if err != nil {
		return ErrForged
	}
	want, err := docMAC(doc, key)
	if err != nil {
		return err
	}
	if !hmac.Equal(got, want) {
		return ErrForged
	}
	return nil
}

func docMAC(doc *Document, key []byte) ([]byte, error) {
	c := *doc
	c.Signature = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil), nil
}

// VerifyBytes reports whether b, the bytes of a results document file, are
// signed under key with sig, the document's own signature (as Decode or
// DecodeBrief read it), without decoding b. It takes the HMAC of b,
// compacted, with its one member "signature":sig left out: the bytes Sign
// signed, for any document the grader wrote, compact (WriteFile) or
// indented (Encode, and WriteFile before it wrote compact). So a reader of
// thousands of signed documents need not decode each whole to re-encode it.
//
// true is a proof: only the key's holder makes that HMAC. false is not a
// verdict: the file may hold the signed document in another layout (keys
// reordered, numbers written otherwise), which Verify, re-encoding the
// decoded document, still accepts. Ask Verify then.
func VerifyBytes(b []byte, sig string, key []byte) bool {
	want, err := hex.DecodeString(sig)
	if err != nil || len(want) != sha256.Size {
		return false
	}
	b = bytes.TrimRight(b, " \t\r\n")
	if bytes.IndexByte(b, '\n') >= 0 {
		// Indented: json.Marshal writes no newline, not even in a string,
		// where it escapes it.
		b = appendCompact(make([]byte, 0, len(b)/2), b)
	}
	member := []byte(`"signature":"` + sig + `"`)
	at := bytes.Index(b, member)
	if at < 0 || bytes.Contains(b[at+len(member):], member) {
		return false // none, or a second one: not what Sign writes
	}
	// Where Sign's bytes had no signature member there was a comma before
	// it or after it, unless it was the only member.
	before, after := b[:at], b[at+len(member):]
	switch {
	case len(before) > 0 && before[len(before)-1] == ',':
		before = before[:len(before)-1]
	case len(after) > 0 && after[0] == ',':
		after = after[1:]
	}
	m := hmac.New(sha256.New, key)
	m.Write(before)
	m.Write(after)
	return hmac.Equal(m.Sum(nil), want)
}

// appendCompact appends b to dst without the whitespace outside its
// strings: what json.Compact makes of well-formed JSON, several times as
// fast, for it checks no grammar. Bytes that are not JSON give bytes no
// signature matches, which is all VerifyBytes asks of them.
func appendCompact(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			// Copy the string whole, its closing quote included: the first
			// quote that no backslash escapes.
			j := i + 1
			for j < len(b) {
				k := bytes.IndexAny(b[j:], `"\\`)
				if k < 0 {
					j = len(b)
					break
				}
				j += k
				if b[j] == '"' {
					j++
					break
				}
				j += 2 // a backslash and the byte it escapes
			}
			j = min(j, len(b))
			dst = append(dst, b[i:j]...)
			i = j
		default:
			// A run of bytes outside strings up to the next space or quote.
			j := i + 1
			for j < len(b) && b[j] != '"' && b[j] > ' ' {
				j++
			}
			dst = append(dst, b[i:j]...)
			i = j
		}
	}
	return dst
}
