package results

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds Decode any bytes, seeded with the documents the reports
// are tested on: it never panics, refuses with a message, and a document it
// accepts encodes and decodes again.
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("../reports/testdata/task5.json")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{"", "{}", "[]", `{"schema":"ratelab.results/v1"}`, `{"schema":"ratelab.results/v1","score":"x"}`,
		`{"schema":"ratelab.results/v1","interrupted":true,"score":null}`, `{"schema":"ratelab.results/v1"} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := Decode(bytes.NewReader(b))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		again, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("a decoded document does not encode: %v", err)
		}
		if _, err := Decode(bytes.NewReader(again)); err != nil {
			t.Fatalf("a decoded document, encoded again, does not decode: %v", err)
		}
	})
}
