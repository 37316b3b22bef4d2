package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

var cmdAmplify = &command{
	Name:      "amplify",
	UsageLine: "amplify [--budget] [--solutions] [--url http://127.0.0.1:8000] [--json]",
	Short:     "show how retries amplify load on an overloaded server",
	Long: `Amplify sends 100 calls per second for 10 s to the unprotected server (80/s
capacity), each call retried by your task 4 retry loop. By default retries
go out at once, up to 3 of them; with --budget they back off with full jitter
and a 10% retry budget. It prints the attempts per second the server itself
counted; --json prints the run as a results document instead.

--url sends them to a ratelab server already running on loopback instead
of a fresh unprotected one, such as your own under 'grade serve'.`,
	Run: withFlags(amplifyFlags, runAmplify),
}

// amplifyOptions are amplify's flags.
type amplifyOptions struct {
	budget    bool
	solutions bool
	url       string
	json      bool
}

func amplifyFlags(fs *flag.FlagSet) *amplifyOptions {
	var o amplifyOptions
	fs.BoolVar(&o.budget, "budget", false, "back off with full jitter and a 10% retry budget")
	fs.BoolVar(&o.solutions, "solutions", false, "use the reference retry loop instead of your exercises")
	fs.StringVar(&o.url, "url", "", "send to a ratelab server already running on loopback, such as http://127.0.0.1:8000, instead of a fresh one")
	fs.BoolVar(&o.json, "json", false, "print the run as a results document (JSON) instead of text")
	return &o
}

func runAmplify(ctx context.Context, o *amplifyOptions, args []string) error {
	if len(args) > 0 {
		return usagef("amplify takes no arguments")
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	url := o.url
	if url != "" { // before building, to fail at once
		if url, err = ratelabServer(ctx, url); err != nil {
			return err
		}
	}
	started := time.Now()
	bin, cleanup, err := grader.BuildTool(ctx, root, implFlag(o.solutions), "storm")
	if err != nil {
		return err
	}
	defer cleanup()
	if url == "" {
		srv, err := grader.StartServer(ctx, root, grader.Solutions, "--mode", "none", "--port", "0")
		if err != nil {
			return err
		}
		defer srv.Stop()
		url = srv.URL
	}
	retry := []string{"--tries", "4", "--base", "1ns", "--cap", "1ns", "--jitter=false"}
	if o.budget {
		retry = []string{"--tries", "4", "--base", "100ms", "--cap", "5s", "--jitter=true", "--budget", "0.1"}
	}
	var st results.Storm
	err = grader.RunJSON(ctx, 2*time.Minute, &st, bin, append([]string{"--url", url, "--kind", "amplify", "--rate", "100", "--seconds", "10", "--limit", "40s"}, retry...)...)
	if err != nil {
		return err
	}
	if o.json {
		return writeMeasured("amplify", implFlag(o.solutions), started, func(doc *results.Document) { doc.Storms = []*results.Storm{&st} })
	}
	var perSecond []string
	for t := 1; t <= 12; t++ {
		r, _ := st.ReceivedRate(float64(t-1), float64(t))
		perSecond = append(perSecond, fmt.Sprintf("%.0f", r))
	}
	fmt.Fprintf(stdout, "calls %d  attempts %d  succeeded %d  gave up %d\nattempts the server received per second: %s\n",
		st.Clients, st.Attempts, st.Succeeded, st.Failed, strings.Join(perSecond, " "))
	return nil
}
