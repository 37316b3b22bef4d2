package results

import (
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
