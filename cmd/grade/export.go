package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"ratelab/grader"
	"ratelab/internal/layout"
	"ratelab/internal/release"
)

var cmdExport = &command{
	Name:      "export",
	UsageLine: "export DIR",
	Short:     "write a learner template repository (for instructors)",
	Long: `Export writes a learner template of this repository into DIR, which must
not exist or be empty: the repository's tracked files (git ls-files; every
file when git is missing) without the reference solutions/, the grader's
corpus of wrong code (grader/testdata/), the grader's self-checks
(grader/*_test.go), the project's own CI (.github/workflows/ci.yml, .ci/),
local runs (ratelab-runs/) and the instructors' pages.

In the copy every internal/trees/*/solutions.go is deleted and the build
line of its exercises.go twin removed, and a file under exercises/ that imports
ratelab/solutions/<pkg> imports ratelab/exercises/<pkg> instead (each such
change is printed): the template builds with the learner's code and never
refers to solutions/. The learners' workflow
(template/.github/workflows/classroom.yml) becomes
.github/workflows/classroom.yml, template/README.md becomes README.md,
template/.gitattributes (LF endings for the frozen files) becomes
.gitattributes, and the release manifest grader/manifest.json is written
last: the template's grader refuses to score a tree whose frozen files
changed.

Files git does not track are left out, and counted on stderr. See
docs/CLASSROOM.md.`,
	Run: noFlags(runExport),
}

func runExport(_ context.Context, args []string) error {
	if len(args) != 1 {
		return usagef("want one folder to write the template into, such as 'grade export ../ratelab-template'")
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	st, err := release.Export(root, args[0])
	var de *release.DirError
	if errors.As(err, &de) {
		return usageError{err.Error()}
	}
	if err != nil {
		return err
	}
	for _, r := range st.Rewired {
		fmt.Fprintln(stdout, r)
	}
	if n := len(st.Untracked); n > 0 {
		fmt.Fprintf(stderr, "grade export: left out %d file(s) git does not track, such as %s; 'git add' them to export them\n",
			n, strings.Join(st.Untracked[:min(n, 3)], ", "))
	}
	fmt.Fprintf(stdout, "wrote a learner template to %s: %d files from %s, %d frozen in %s\n",
		st.Dir, st.Files, st.Source, st.Frozen, layout.ManifestPath)
	fmt.Fprintf(stdout, "next: cd %s && git init && git add -A && git commit -m 'ratelab template'; see docs/CLASSROOM.md\n", strconv.Quote(st.Dir))
	return nil
}
