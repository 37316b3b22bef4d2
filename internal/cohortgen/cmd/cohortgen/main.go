// Command cohortgen writes a cohort of results documents for a measured
// run of grade cohort (see docs/BENCHMARKS.md):
//
//	go run ./internal/cohortgen/cmd/cohortgen -n 10000 -out /tmp/cohort10k
//
// With -sign, every document is signed with the key in
// $RATELAB_SIGNING_KEY, as a class's CI signs them.
package main

import (
	"flag"
	"fmt"
	"os"

	"ratelab/internal/cohortgen"
	"ratelab/results"
)

func main() {
	n := flag.Int("n", 1000, "how many documents to write")
	out := flag.String("out", "", "the folder to write them into (required)")
	seed := flag.Uint64("seed", 1, "the seed the documents are drawn from")
	sign := flag.Bool("sign", false, "sign every document with the key in $"+results.SigningKeyEnv)
	flag.Parse()
	var key []byte
	if *sign {
		if key = []byte(os.Getenv(results.SigningKeyEnv)); len(key) == 0 {
			fmt.Fprintf(os.Stderr, "cohortgen: -sign needs a key in $%s\n", results.SigningKeyEnv)
			os.Exit(2)
		}
	}
	if *out == "" || *n < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: cohortgen -out DIR [-n N] [-seed S] [-sign]")
		os.Exit(2)
	}
	total, err := cohortgen.WriteSigned(*out, *n, *seed, key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cohortgen:", err)
		os.Exit(1)
	}
	fmt.Printf("%d documents, %d bytes (%.0f KB on average) in %s\n", *n, total, float64(total)/float64(*n)/1000, *out)
}
