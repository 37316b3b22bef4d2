// Package integrity records what a grading was graded with: the SHA-256 of
// every frozen file (internal/layout says which), checked against a release
// manifest where there is one, and against the last commit of a development
// checkout where there is not.
package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"ratelab/internal/layout"
	"ratelab/results"
)

// Manifest lists the SHA-256 of every frozen file: the shared test suites,
// the exercises' test adapters, the grader, the harness and the servers.
type Manifest struct {
	Version int               `json:"version"`
	Files   map[string]string `json:"files"` // repository path → hex SHA-256
}

// HashFrozen returns the SHA-256 of every frozen file under root.
func HashFrozen(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if layout.Skipped(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !layout.Frozen(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	return out, err
}

// WriteManifest hashes the frozen files under root into layout.ManifestPath.
func WriteManifest(root string) (*Manifest, error) {
	files, err := HashFrozen(root)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Version: 1, Files: files}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return m, os.WriteFile(filepath.Join(root, layout.ManifestPath), append(b, '\n'), 0o644)
}

// CheckIntegrity compares the frozen files under root with the release
// manifest. It returns the integrity record for the results, and the files
// that differ (changed, added or missing); with no manifest (a development
// checkout) nothing can differ and the record says so.
func CheckIntegrity(root string) (*results.Integrity, []string, error) {
	files, err := HashFrozen(root)
	if err != nil {
		return nil, nil, err
	}
	rec := &results.Integrity{FrozenSHA256: combined(files), Files: len(files)}
	b, err := os.ReadFile(filepath.Join(root, layout.ManifestPath))
	if errors.Is(err, os.ErrNotExist) {
		rec.Manifest = "none: a development checkout, nothing enforced"
		edited, ok := editedSinceCommit(root)
		if !ok {
			rec.Manifest += "; git could not tell whether frozen files were edited"
		}
		rec.Edited = edited
		return rec, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", layout.ManifestPath, err)
	}
	sum := sha256.Sum256(b)
	rec.Manifest = hex.EncodeToString(sum[:])
	var bad []string
	for path, want := range m.Files {
		if got, ok := files[path]; !ok {
			bad = append(bad, path+" (missing)")
		} else if got != want {
			bad = append(bad, path+" (changed)")
		}
	}
	for path := range files {
		if _, ok := m.Files[path]; !ok && path != layout.ManifestPath {
			bad = append(bad, path+" (added)")
		}
	}
	sort.Strings(bad)
	rec.Mismatched = bad
	return rec, bad, nil
}

// editedSinceCommit lists the frozen files of the git work tree at root
// that differ from its last commit: changed, added (untracked) or deleted.
// ok is false when git cannot tell (no git, or not a git work tree).
func editedSinceCommit(root string) (edited []string, ok bool) {
	cmd := exec.Command("git", "-C", root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	for _, entry := range strings.Split(string(out), "\x00") {
		if len(entry) < 4 {
			continue
		}
		path := entry[3:]
		if layout.Frozen(path) {
			edited = append(edited, path)
		}
	}
	sort.Strings(edited)
	return edited, true
}

// EditedCheck is the check that says a development checkout's score is not
// valid because frozen files differ from the last commit.
func EditedCheck(task string, edited []string) results.Check {
	return results.Check{
		Task: task, Name: "integrity", Status: results.StatusError,
		Message: fmt.Sprintf("frozen tests edited: this score is not valid: %d frozen file(s) differ from the last commit: %s; "+
			"undo the changes (git checkout -- FILE) and grade again",
			len(edited), strings.Join(edited[:min(len(edited), 10)], ", ")),
	}
}

// combined hashes a set of file hashes into one, in path order.
func combined(files map[string]string) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s %s\n", files[p], p)
	}
	return hex.EncodeToString(h.Sum(nil))
}
