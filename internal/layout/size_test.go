package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a non-test Go file may have outside
// internal/suites (whose frozen suites are one file a task): past it, a
// file holds more than one responsibility and should be split.
const maxLines = 600

// TestNoFileTooLong keeps every non-test Go file of the module, outside
// internal/suites and the learner's trees, under maxLines.
func TestNoFileTooLong(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (hidden(rel) || rel == Runs || rel == "internal/suites") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || test(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		seen++
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, more than %d: split it by responsibility", rel, n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have found the module's code, not an empty folder.
	if seen < 100 {
		t.Fatalf("found %d Go files under %s, want the whole module", seen, root)
	}
}
