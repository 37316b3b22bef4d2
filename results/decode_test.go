package results

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecode(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{``, "empty file"},
		{"  \n", "empty file"},
		{`{"schema": "ratelab.results/v1", "runs": [`, "truncated JSON: the file ends at byte 42"},
		{`{"schema": "ratelab.results/v1"} trailing`, "malformed JSON at byte 34"},
		{`{"schema": "ratelab.results/v1",,}`, "malformed JSON at byte 33: invalid character ','"},
		{`{"task": "task1"}`, `no "schema" field`},
		{`{"schema": "ratelab.results/v2"}`, `schema "ratelab.results/v2", want "ratelab.results/v1"`},
		{`{"schema": "ratelab.results/v1", "score": "high"}`, `does not fit schema ratelab.results/v1: field "score" holds a JSON string, want float64`},
		{`"hello"`, "not a JSON object but a JSON string"},
		{`[1, 2]`, "not a JSON object but a JSON array"},
	} {
		_, err := Decode(strings.NewReader(tt.in))
		assert.ErrorContains(t, err, tt.want, "Decode(%q)", tt.in)
	}
	doc, err := Decode(strings.NewReader(`{"schema": "ratelab.results/v1", "task": "task1"}`))
	require.NoError(t, err)
	assert.Equal(t, Schema, doc.Schema)
	assert.Equal(t, "task1", doc.Task)
}

func TestDecodeTooLarge(t *testing.T) {
	_, err := Decode(strings.NewReader(strings.Repeat(" ", MaxDocumentBytes+1)))
	assert.ErrorContains(t, err, "larger than 256 MiB")
}
