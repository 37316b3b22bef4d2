package results

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// VerifyBytes proves a signature from the file's bytes, in both layouts
// the grader has written, and never proves an edited or foreign one.
func TestVerifyBytes(t *testing.T) {
	key := []byte("instructor secret")
	for _, interrupted := range []bool{false, true} {
		d := sampleDoc()
		// An interrupted document's null score is written after the
		// signature: the signature is not always the last member.
		d.Interrupted = interrupted
		d.Total()
		require.NoError(t, Sign(d, key))
		var compact, indented bytes.Buffer
		require.NoError(t, d.EncodeCompact(&compact))
		require.NoError(t, d.Encode(&indented))
		for name, b := range map[string][]byte{"compact": compact.Bytes(), "indented": indented.Bytes()} {
			assert.True(t, VerifyBytes(b, d.Signature, key), "%s, interrupted %v", name, interrupted)
			assert.False(t, VerifyBytes(b, d.Signature, []byte("another key")), name)
			edited := bytes.Replace(b, []byte(`"exercises"`), []byte(`"solutions"`), 1)
			require.NotEqual(t, b, edited)
			assert.False(t, VerifyBytes(edited, d.Signature, key), "%s: edited after signing", name)
			doubled := bytes.Replace(b, []byte(`"schema":`), []byte(`"signature":"`+d.Signature+`","schema":`), 1)
			assert.False(t, VerifyBytes(doubled, d.Signature, key), "%s: a second signature member", name)
		}
		assert.False(t, VerifyBytes(compact.Bytes(), "not hex", key))
		assert.False(t, VerifyBytes(compact.Bytes(), d.Signature[:10], key))

		// Another layout of the same document (its keys reordered, as a
		// map would) is not proven from its bytes, but Verify, decoding
		// it, still accepts it: that is the caller's fallback.
		var generic map[string]any
		require.NoError(t, json.Unmarshal(compact.Bytes(), &generic))
		reordered, err := json.Marshal(generic)
		require.NoError(t, err)
		assert.False(t, VerifyBytes(reordered, d.Signature, key))
		back, err := Decode(bytes.NewReader(reordered))
		require.NoError(t, err)
		assert.NoError(t, Verify(back, key))
	}
}

// A file WriteFile wrote is compact, decodes to the document, and is
// EncodeCompact's bytes.
func TestWriteFileCompact(t *testing.T) {
	d := sampleDoc()
	path := t.TempDir() + "/results.json"
	require.NoError(t, WriteFile(path, d, false))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var want bytes.Buffer
	require.NoError(t, d.EncodeCompact(&want))
	assert.Equal(t, want.Bytes(), b)
	assert.Equal(t, 1, bytes.Count(b, []byte("\n")), "one line")
	back, err := Decode(bytes.NewReader(b))
	require.NoError(t, err)
	brief, err := DecodeBrief(b)
	require.NoError(t, err)
	assert.Equal(t, d.Checks, back.Checks)
	assert.Equal(t, d.Checks, brief.Checks)
}

// appendCompact makes of well-formed JSON what json.Compact makes of it.
func TestAppendCompact(t *testing.T) {
	var doc bytes.Buffer
	require.NoError(t, sampleDoc().Encode(&doc))
	for _, in := range []string{
		doc.String(),
		`{ "a b" : [ 1 , 2.5e3 , "x \" y" , "ends in a backslash \\" , "\\\"" ], "c":{ } }`,
		"[\n\t\"tab\\tand\\nnewline escaped\",\r\n  true , null ,\"é ü ✓\"\n]\n",
		`""`, `"  "`, `  7  `,
	} {
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, []byte(in)))
		assert.Equal(t, want.String(), string(appendCompact(nil, []byte(in))), in)
	}
}

// FuzzAppendCompact: on any well-formed JSON, appendCompact makes what
// json.Compact makes.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range []string{`{ "a" : [ 1, "x \" y" ] }`, "[\n\t\"\\\\\" , null ]", `" \\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, b))
		assert.Equal(t, want.String(), string(appendCompact(nil, b)))
	})
}
