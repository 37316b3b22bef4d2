package corpus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reference of a made-up package "demo": a Go file, a Lua file and a
// test, which a variant never touches.
const (
	demoGo = `package demo

// Cap returns n, at most limit.
func Cap(n, limit int) int {
	return min(n, limit)
}

// Twice returns 2n.
func Twice(n int) int {
	return 2 * n
}
`
	demoLua = `local n = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
return math.min(n, limit)
`
	demoTest = "package demo\n"
)

// noCap is a patch of demo.go alone.
const noCap = `Cap forgets its limit.

Caught-By: Demo/Caps

diff --git a/solutions/demo/demo.go b/solutions/demo/demo.go
--- a/solutions/demo/demo.go
+++ b/solutions/demo/demo.go
@@ -2,7 +2,7 @@ package demo
 
 // Cap returns n, at most limit.
 func Cap(n, limit int) int {
-	return min(n, limit)
+	return n // WRONG: no limit
 }
 
 // Twice returns 2n.
`

// bothFiles is a patch of the Go and the Lua file, the second hunk of Go at
// its end.
const bothFiles = `Both the Go code and the script forget the limit.
The second line of the description.

Caught-By: Demo/Caps
Caught-By: Lua/Caps

diff --git a/solutions/demo/demo.go b/solutions/demo/demo.go
--- a/solutions/demo/demo.go
+++ b/solutions/demo/demo.go
@@ -7,5 +7,5 @@ func Cap(n, limit int) int {
 
 // Twice returns 2n.
 func Twice(n int) int {
-	return 2 * n
+	return 3 * n
 }
diff --git a/solutions/demo/demo.lua b/solutions/demo/demo.lua
--- a/solutions/demo/demo.lua
+++ b/solutions/demo/demo.lua
@@ -1,3 +1,3 @@
 local n = tonumber(ARGV[1])
 local limit = tonumber(ARGV[2])
-return math.min(n, limit)
+return n
`

// newRoot makes a repository root with the demo reference and the given
// files (repository path → content), and returns it.
func newRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	all := map[string]string{
		"solutions/demo/demo.go":      demoGo,
		"solutions/demo/demo.lua":     demoLua,
		"solutions/demo/demo_test.go": demoTest,
	}
	for p, s := range files {
		all[p] = s
	}
	for p, s := range all {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(s), 0o644))
	}
	return root
}

// loadOne loads the corpus of root, which must hold exactly one variant.
func loadOne(t *testing.T, root string) Variant {
	t.Helper()
	vs, err := Load(root)
	require.NoError(t, err)
	require.Len(t, vs, 1)
	return vs[0]
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestLoadReadsPathAndPreamble(t *testing.T) {
	root := newRoot(t, map[string]string{
		"grader/testdata/wrong/task9/both-files.patch": bothFiles,
		"grader/testdata/wrong/task9/no-cap.patch":     noCap,
		"grader/testdata/broken/task9/no-cap.patch":    strings.Replace(noCap, "Caught-By: Demo/Caps\n", "", 1),
		"grader/testdata/README.md":                    "how to make a variant",
		"grader/testdata/wrong/README.md":              "README files are not variants",
	})
	vs, err := Load(root)
	require.NoError(t, err)
	require.Len(t, vs, 3)

	assert.Equal(t, Variant{
		Kind: Wrong, Task: "task9", Name: "both-files",
		Path:     "grader/testdata/wrong/task9/both-files.patch",
		Package:  "demo",
		Files:    []string{"solutions/demo/demo.go", "solutions/demo/demo.lua"},
		Summary:  "Both the Go code and the script forget the limit.\nThe second line of the description.",
		CaughtBy: []string{"Demo/Caps", "Lua/Caps"},
	}, withoutDiffs(vs[0]))
	assert.Equal(t, "task9/both-files", vs[0].ID())
	assert.Equal(t, "task9/no-cap", vs[1].ID())
	assert.Equal(t, Wrong, vs[1].Kind)
	assert.Equal(t, Broken, vs[2].Kind, "wrong variants come first")
	assert.Empty(t, vs[2].CaughtBy, "a broken variant needs no Caught-By")
}

func withoutDiffs(v Variant) Variant {
	v.diffs = nil
	return v
}

func TestParsePreamble(t *testing.T) {
	for _, tt := range []struct {
		in       string
		summary  string
		caughtBy []string
	}{
		{"What is wrong.\n\nCaught-By: A\n", "What is wrong.", []string{"A"}},
		{"\n  Two\nlines.  \nCaught-By:  A/B  \nCaught-By: C\n\n", "Two\nlines.", []string{"A/B", "C"}},
		{"Caught-By: A\nthe description may follow\n", "the description may follow", []string{"A"}},
		{"Caught-By:\nno subtest named\n", "no subtest named", nil},
		{"caught-by: A\n", "caught-by: A", nil}, // the key is spelt exactly
		{"", "", nil},
		{"Caught-By-Check: shed 240/s: x\n", "", nil}, // a flood check, not a subtest
	} {
		summary, caughtBy, _, _ := parsePreamble(tt.in)
		assert.Equal(t, tt.summary, summary, "parsePreamble(%q) summary", tt.in)
		assert.Equal(t, tt.caughtBy, caughtBy, "parsePreamble(%q) Caught-By", tt.in)
	}
	_, subs, checks, race := parsePreamble("Only in the floods.\n\nCaught-By-Check: shed 240/s: 503s say when to come back\nCaught-By: LineBound\n")
	assert.Equal(t, []string{"shed 240/s: 503s say when to come back"}, checks)
	assert.Equal(t, []string{"LineBound"}, subs)
	assert.Empty(t, race, "no Needs-Race line")
	summary, _, _, race := parsePreamble("No lock.\n\nCaught-By: Concurrent\nNeeds-Race: yes\n")
	assert.Equal(t, "No lock.", summary)
	assert.Equal(t, "yes", race)
}

func TestLoadReadsNeedsRace(t *testing.T) {
	root := newRoot(t, map[string]string{
		"grader/testdata/wrong/task9/no-cap.patch": strings.Replace(noCap, "Caught-By: Demo/Caps\n", "Caught-By: Demo/Caps\nNeeds-Race: yes\n", 1),
	})
	v := loadOne(t, root)
	assert.True(t, v.NeedsRace)
	assert.Equal(t, []string{"Demo/Caps"}, v.CaughtBy)
	assert.NotContains(t, v.Summary, "Needs-Race")
	assert.False(t, loadOne(t, newRoot(t, map[string]string{"grader/testdata/wrong/task9/no-cap.patch": noCap})).NeedsRace, "without the line")
}

func TestApplyOverlaysThePackage(t *testing.T) {
	root := newRoot(t, map[string]string{"grader/testdata/wrong/task9/no-cap.patch": noCap})
	v := loadOne(t, root)
	dir := t.TempDir()
	replace, err := v.Apply(root, dir)
	require.NoError(t, err)

	assert.Equal(t, map[string]string{
		"exercises/demo/demo.go":  filepath.Join(dir, "demo.go"),
		"exercises/demo/demo.lua": filepath.Join(root, "solutions", "demo", "demo.lua"),
	}, replace, "every file of the reference but its tests, patched where the patch says")
	assert.Equal(t, strings.Replace(demoGo, "return min(n, limit)", "return n // WRONG: no limit", 1), read(t, replace["exercises/demo/demo.go"]))
}

func TestApplyChangesSeveralFiles(t *testing.T) {
	root := newRoot(t, map[string]string{"grader/testdata/wrong/task9/both-files.patch": bothFiles})
	replace, err := loadOne(t, root).Apply(root, t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(demoGo, "2 * n", "3 * n", 1), read(t, replace["exercises/demo/demo.go"]))
	assert.Equal(t, strings.Replace(demoLua, "math.min(n, limit)", "n", 1), read(t, replace["exercises/demo/demo.lua"]))
}

func TestApplyTakesAPlainUnifiedDiff(t *testing.T) {
	// diff -u --label a/solutions/demo/demo.go --label b/solutions/demo/demo.go:
	// no "diff --git" line, and the labels keep their a/ and b/.
	plain := strings.Replace(noCap, "diff --git a/solutions/demo/demo.go b/solutions/demo/demo.go\n", "", 1)
	root := newRoot(t, map[string]string{"grader/testdata/wrong/task9/no-cap.patch": plain})
	v := loadOne(t, root)
	assert.Equal(t, []string{"solutions/demo/demo.go"}, v.Files)
	assert.Equal(t, []string{"Demo/Caps"}, v.CaughtBy)
	replace, err := v.Apply(root, t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(demoGo, "return min(n, limit)", "return n // WRONG: no limit", 1), read(t, replace["exercises/demo/demo.go"]))
}

func TestApplyFollowsAMovedHunk(t *testing.T) {
	// The reference gained lines above the hunk and changed a line outside
	// it: the patch still applies, and the change reaches the variant.
	moved := strings.Replace(demoGo, "package demo\n", "// Package demo is a demo.\n//\n// It has a longer comment now.\npackage demo\n", 1)
	moved = strings.Replace(moved, "2 * n", "n + n", 1)
	root := newRoot(t, map[string]string{
		"solutions/demo/demo.go":                   moved,
		"grader/testdata/wrong/task9/no-cap.patch": noCap,
	})
	replace, err := loadOne(t, root).Apply(root, t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(moved, "return min(n, limit)", "return n // WRONG: no limit", 1), read(t, replace["exercises/demo/demo.go"]))
}

func TestApplyReportsAConflict(t *testing.T) {
	for _, tt := range []struct {
		name string
		ref  string // the new demo.go
		want []string
	}{
		{
			name: "a removed line changed",
			ref:  strings.Replace(demoGo, "return min(n, limit)", "return max(0, min(n, limit))", 1),
			want: []string{
				"grader/testdata/wrong/task9/no-cap.patch: solutions/demo/demo.go: hunk 1 of 1 (@@ -2,7 +2,7 @@ package demo) does not apply",
				`line 5 of the reference is "\treturn max(0, min(n, limit))", the hunk expects "\treturn min(n, limit)"`,
			},
		},
		{
			name: "a context line changed",
			ref:  strings.Replace(demoGo, "// Twice returns 2n.", "// Twice doubles n.", 1),
			want: []string{`hunk 1 of 1`, `line 8 of the reference is "// Twice doubles n.", the hunk expects "// Twice returns 2n."`},
		},
		{
			name: "the file is shorter",
			ref:  "package demo\n\n// Cap returns n, at most limit.\n",
			want: []string{`the reference ends at line 3, the hunk expects line 4 to be "func Cap(n, limit int) int {"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := newRoot(t, map[string]string{
				"solutions/demo/demo.go":                   tt.ref,
				"grader/testdata/wrong/task9/no-cap.patch": noCap,
			})
			_, err := loadOne(t, root).Apply(root, t.TempDir())
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestApplyRefusesAPatchThatChangesNothing(t *testing.T) {
	same := strings.Replace(noCap, "+\treturn n // WRONG: no limit", "+\treturn min(n, limit)", 1)
	root := newRoot(t, map[string]string{"grader/testdata/wrong/task9/same.patch": same})
	_, err := loadOne(t, root).Apply(root, t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "grader/testdata/wrong/task9/same.patch: solutions/demo/demo.go: the patched file is the reference itself")
}

func TestLoadRejects(t *testing.T) {
	diffOf := func(p string) string {
		return strings.ReplaceAll(noCap, "solutions/demo/demo.go", p)
	}
	for _, tt := range []struct {
		name  string
		path  string // under grader/testdata
		patch string
		want  string
	}{
		{"an old whole-file copy", "wrong/task9/no-cap/demo.go", demoGo, "wrong/task9/no-cap/demo.go: not a variant"},
		{"a patch outside a task folder", "wrong/no-cap.patch", noCap, "not a variant"},
		{"a folder that is no task", "wrong/bucket/no-cap.patch", noCap, `folder "bucket" is not a task id`},
		{"a capital in the name", "wrong/task9/NoCap.patch", noCap, `name "NoCap"`},
		{"no Caught-By", "wrong/task9/no-cap.patch", strings.Replace(noCap, "Caught-By: Demo/Caps\n", "", 1), "needs at least one \"Caught-By:\" line"},
		{"no description", "wrong/task9/no-cap.patch", strings.Replace(noCap, "Cap forgets its limit.\n", "", 1), "must say what is wrong"},
		{"Needs-Race with another value", "wrong/task9/no-cap.patch", strings.Replace(noCap, "Caught-By: Demo/Caps\n", "Caught-By: Demo/Caps\nNeeds-Race: maybe\n", 1), `Needs-Race: "maybe"`},
		{"Needs-Race on a right variant", "right/task9/no-cap.patch", strings.Replace(noCap, "Caught-By: Demo/Caps\n", "Needs-Race: yes\n", 1), "Needs-Race: is for a wrong variant"},
		{"no diff", "wrong/task9/no-cap.patch", "Only words.\n\nCaught-By: Demo/Caps\n", "no diff in it"},
		{"a path outside solutions", "wrong/task9/no-cap.patch", diffOf("exercises/demo/demo.go"), "exercises/demo/demo.go: want a file of the reference"},
		{"a path without the a/ b/ prefixes' root", "wrong/task9/no-cap.patch", diffOf("demo.go"), "demo.go: want a file of the reference"},
		{"a test file", "wrong/task9/no-cap.patch", diffOf("solutions/demo/demo_test.go"), "not the tests"},
		{"two packages", "wrong/task9/no-cap.patch", noCap + strings.SplitN(diffOf("solutions/other/demo.go"), "\n\n", 3)[2], "changes both solutions/demo and solutions/other"},
		{"a new file", "wrong/task9/no-cap.patch", "New.\n\nCaught-By: X\n\ndiff --git a/solutions/demo/new.go b/solutions/demo/new.go\nnew file mode 100644\n--- /dev/null\n+++ b/solutions/demo/new.go\n@@ -0,0 +1 @@\n+package demo\n", "does not create"},
		{"a hunk without context", "wrong/task9/no-cap.patch", "Bad.\n\nCaught-By: X\n\ndiff --git a/solutions/demo/demo.go b/solutions/demo/demo.go\n--- a/solutions/demo/demo.go\n+++ b/solutions/demo/demo.go\n@@ -1,0 +2 @@\n+// added\n", "has no context"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := newRoot(t, map[string]string{"grader/testdata/" + tt.path: tt.patch})
			_, err := Load(root)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseRejectsAnUnknownKind(t *testing.T) {
	// Load reads only the wrong and broken folders; other test data may sit
	// beside them.
	_, err := parse("grader/testdata/odd/task9/no-cap.patch", []byte(noCap))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `kind "odd"`)
}

func TestLoadJoinsEveryProblem(t *testing.T) {
	root := newRoot(t, map[string]string{
		"grader/testdata/wrong/task9/a/demo.go":      demoGo,
		"grader/testdata/broken/task9/b.patch":       "no diff",
		"grader/testdata/wrong/task9/fine.patch":     noCap,
		"grader/testdata/wrong/task9/no-catch.patch": strings.Replace(noCap, "Caught-By: Demo/Caps\n", "", 1),
	})
	_, err := Load(root)
	require.Error(t, err)
	for _, w := range []string{"wrong/task9/a/demo.go", "broken/task9/b.patch", "wrong/task9/no-catch.patch"} {
		assert.Contains(t, err.Error(), w)
	}
	assert.NotContains(t, err.Error(), "fine.patch")
}

func TestLoadEmpty(t *testing.T) {
	vs, err := Load(t.TempDir())
	require.NoError(t, err)
	assert.Empty(t, vs)
}
