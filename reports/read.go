package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"ratelab/results"
)

// maxDocumentBytes bounds one results file. Real documents are a few
// hundred kilobytes; anything near this is not one.
const maxDocumentBytes = 256 << 20

// ReadDocument reads one results document strictly: a single JSON value
// with nothing after it, whose schema is the one this grader writes. Its
// errors say in a few words what is wrong: "truncated JSON ...", "malformed
// JSON at byte 120: ...", "schema \"x\", want \"ratelab.results/v1\"".
func ReadDocument(r io.Reader) (*results.Document, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return parseDocument(b)
}

func parseDocument(b []byte) (*results.Document, error) {
	if len(b) > maxDocumentBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a results document", maxDocumentBytes>>20)
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
		return nil, fmt.Errorf("no \"schema\" field: not a ratelab results document (want schema %q)", results.Schema)
	}
	if *head.Schema != results.Schema {
		return nil, fmt.Errorf("schema %q, want %q", *head.Schema, results.Schema)
	}
	var d results.Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("does not fit schema %s: %w", results.Schema, jsonError(err))
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
		return fmt.Errorf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("not a JSON object but a JSON %s", typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("field %q holds a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	}
	return fmt.Errorf("malformed JSON: %w", err)
}
