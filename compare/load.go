package compare

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"ratelab/results"
)

// Input is one side of a comparison: a results document, or the repeated
// runs of one task found in a folder, as Load read them.
type Input struct {
	// Path is the file or folder as it was given.
	Path string
	// Files are the results documents read, in lexical order; Docs holds
	// them decoded, in the same order.
	Files []string
	Docs  []*results.Document
}

// Load reads one side of a comparison. path is a results document (a
// results.json that a grade run wrote, or any file holding one), a run's
// folder holding results.json, or a folder of repeated runs: every file
// named results.json below it, in lexical order of their paths. Every
// document must decode (results.Decode) and grade the same task with the
// same tree; the error names the file that does not.
func Load(path string) (*Input, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file or folder", path)
	}
	if err != nil {
		return nil, err // names the path
	}
	in := &Input{Path: path}
	switch {
	case !info.IsDir():
		in.Files = []string{path}
	case isFile(filepath.Join(path, "results.json")):
		in.Files = []string{filepath.Join(path, "results.json")}
	default:
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() == "results.json" {
				in.Files = append(in.Files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		slices.Sort(in.Files)
		if len(in.Files) == 0 {
			return nil, fmt.Errorf("%s: no results.json in this folder or below it", path)
		}
	}
	for _, f := range in.Files {
		d, err := readDocument(f)
		if err != nil {
			return nil, err
		}
		if first := in.Docs; len(first) > 0 && (d.Task != first[0].Task || d.Impl != first[0].Impl) {
			return nil, fmt.Errorf("%s: grades %s (%s), but %s grades %s (%s): a folder of repeats holds one task's runs",
				f, d.Task, d.Impl, in.Files[0], first[0].Task, first[0].Impl)
		}
		in.Docs = append(in.Docs, d)
	}
	return in, nil
}

// readDocument decodes the results document in file f.
func readDocument(f string) (*results.Document, error) {
	r, err := os.Open(f)
	if err != nil {
		return nil, err // names the file
	}
	defer r.Close()
	d, err := results.Decode(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	return d, nil
}

func isFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}

// errNoDocuments is Compare's error for an input with nothing in it.
var errNoDocuments = errors.New("compare: no results documents")
