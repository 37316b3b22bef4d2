package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxDocumentBytes bounds one results document. Real documents are a few
// hundred kilobytes; anything near this is not one.
const MaxDocumentBytes = 256 << 20

// Decode reads one results document strictly: a single JSON value with
// nothing after it, whose schema is Schema, read whole (at most
// MaxDocumentBytes). Its errors say in a few words what is wrong, for
// people: "empty file", "truncated JSON: ...", "malformed JSON at byte 120:
// ...", "not a JSON object but a JSON array", "no \"schema\" field ...",
// "schema \"x\", want \"ratelab.results/v1\"", or "does not fit schema ...:
// field \"score\" holds a JSON string, want float64".
func Decode(r io.Reader) (*Document, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(b) > MaxDocumentBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a results document", MaxDocumentBytes>>20)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("empty file")
	}
	// The schema first: a document of another version need not decode into
	// this version's types at all, and the reader should hear why.
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, jsonError(err)
	}
	if head.Schema == nil {
		return nil, fmt.Errorf("no \"schema\" field: not a ratelab results document (want schema %q)", Schema)
	}
	if *head.Schema != Schema {
		return nil, fmt.Errorf("schema %q, want %q", *head.Schema, Schema)
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("does not fit schema %s: %w", Schema, jsonError(err))
	}
	return &d, nil
}

// jsonError rewords encoding/json's errors for people.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && strings.Contains(syn.Error(), "unexpected end"):
		return fmt.Errorf("truncated JSON: the file ends at byte %d, before the document does", syn.Offset)
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at byte %d: %w", syn.Offset, err)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("not a JSON object but a JSON %s", typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("field %q holds a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	}
	return fmt.Errorf("malformed JSON: %w", err)
}
