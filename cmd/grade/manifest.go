package main

import (
	"context"
	"flag"
	"fmt"

	"ratelab/grader"
	"ratelab/internal/integrity"
	"ratelab/internal/layout"
)

var cmdManifest = &command{
	Name:      "manifest",
	UsageLine: "manifest [--write]",
	Short:     "check, or write, the hashes of the files learners must not change",
	Long: `Manifest compares the frozen files (the shared test suites, the exercises'
test adapters, the grader, the harness and the servers) with the release
manifest, grader/manifest.json, and lists any that differ. When a manifest
exists, every grade run does the same check and refuses to score a tree
whose frozen files changed.

--write hashes the current files into grader/manifest.json: for instructors
preparing a release or a learner template. A development checkout has no
manifest.`,
	Run: withFlags(manifestFlags, runManifest),
}

// manifestOptions are manifest's flags.
type manifestOptions struct {
	write bool
}

func manifestFlags(fs *flag.FlagSet) *manifestOptions {
	var o manifestOptions
	fs.BoolVar(&o.write, "write", false, "write grader/manifest.json from the current files")
	return &o
}

func runManifest(_ context.Context, o *manifestOptions, args []string) error {
	if len(args) > 0 {
		return usagef("manifest takes no arguments")
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	if o.write {
		m, err := integrity.WriteManifest(root)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: %d frozen files\n", layout.ManifestPath, len(m.Files))
		return nil
	}
	rec, bad, err := integrity.CheckIntegrity(root)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d frozen files, combined sha256 %s\nmanifest: %s\n", rec.Files, rec.FrozenSHA256, rec.Manifest)
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintf(stdout, "  differs: %s\n", b)
		}
		return failError{fmt.Sprintf("%d frozen file(s) differ from the manifest", len(bad))}
	}
	return nil
}
