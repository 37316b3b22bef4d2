package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// A signed document is signed in every layout it may come in: compact (as
// WriteFile writes it now), indented (as it wrote it before), and keys
// reordered by another tool (proven by decoding it whole). An edit after
// signing is forged in each.
func TestCohortSignatureLayouts(t *testing.T) {
	const key = "instructor-secret"
	doc := readTestDoc(t, "alice")
	require.NoError(t, results.Sign(doc, []byte(key)))
	var compact, indented bytes.Buffer
	require.NoError(t, doc.EncodeCompact(&compact))
	require.NoError(t, doc.Encode(&indented))
	var generic map[string]any
	require.NoError(t, json.Unmarshal(compact.Bytes(), &generic))
	reordered, err := json.Marshal(generic)
	require.NoError(t, err)
	require.False(t, results.VerifyBytes(reordered, doc.Signature, []byte(key)), "the test needs a layout the bytes do not prove")

	dir := t.TempDir()
	layouts := map[string][]byte{"compact": compact.Bytes(), "indented": indented.Bytes(), "reordered": reordered}
	for name, b := range layouts {
		write := func(folder string, b []byte) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, folder), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, folder, "results.json"), b, 0o644))
		}
		write(name, b)
		// The learner's own impl raised: the same layout, one value changed.
		edited := bytes.Replace(b, []byte(`"max_score":`+fnum(doc.MaxScore)), []byte(`"max_score":`+fnum(doc.MaxScore+1)), 1)
		edited = bytes.Replace(edited, []byte(`"max_score": `+fnum(doc.MaxScore)), []byte(`"max_score": `+fnum(doc.MaxScore+1)), 1)
		require.NotEqual(t, b, edited, name)
		write(name+"-edited", edited)
	}
	c, err := loadCohort([]string{dir}, []byte(key))
	require.NoError(t, err)
	got := map[string]string{}
	for _, d := range c.Docs {
		got[filepath.Base(filepath.Dir(d.Path))] = d.Signature
	}
	assert.Equal(t, map[string]string{"compact": SigSigned, "indented": SigSigned, "reordered": SigSigned}, got)
	forged := map[string]string{}
	for _, s := range c.Skipped {
		forged[filepath.Base(filepath.Dir(s.Path))] = s.Signature
	}
	assert.Equal(t, map[string]string{"compact-edited": SigForged, "indented-edited": SigForged, "reordered-edited": SigForged}, forged)
}
