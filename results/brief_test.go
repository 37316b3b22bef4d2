package results

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withoutSeries is doc as DecodeBrief reads it: the series left out.
func withoutSeries(doc *Document) *Document {
	c := *doc
	strip := func(r *Run) *Run {
		if r == nil {
			return nil
		}
		x := *r
		x.Samples, x.Timeline, x.Histograms, x.Workers = nil, nil, nil, nil
		return &x
	}
	c.Runs = slices.Clip(doc.Runs[:0:0])
	for _, r := range doc.Runs {
		c.Runs = append(c.Runs, strip(r))
	}
	c.Storms = slices.Clip(doc.Storms[:0:0])
	for _, s := range doc.Storms {
		x := *s
		x.ServerSamples, x.SendsPerBin = nil, nil
		c.Storms = append(c.Storms, &x)
	}
	c.Scenarios = slices.Clip(doc.Scenarios[:0:0])
	for _, s := range doc.Scenarios {
		x := *s
		x.Samples, x.DeadCallsAllowedS, x.Run = nil, nil, strip(s.Run)
		c.Scenarios = append(c.Scenarios, &x)
	}
	return &c
}

// briefSeeds are the documents the reports are tested on.
func briefSeeds(t testing.TB) map[string][]byte {
	paths, err := filepath.Glob("../reports/testdata/*.json")
	require.NoError(t, err)
	more, err := filepath.Glob("../reports/testdata/cohort/*/results.json")
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, p := range append(paths, more...) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = b
	}
	return out
}

// DecodeBrief reads every field Decode reads but the series, and refuses
// what Decode refuses with Decode's words.
func TestDecodeBrief(t *testing.T) {
	seeds := briefSeeds(t)
	require.NotEmpty(t, seeds)
	for p, b := range seeds {
		full, ferr := Decode(bytes.NewReader(b))
		brief, berr := DecodeBrief(b)
		if ferr != nil {
			assert.EqualError(t, berr, ferr.Error(), "DecodeBrief(%s)", p)
			continue
		}
		require.NoError(t, berr, "DecodeBrief(%s)", p)
		assert.Equal(t, withoutSeries(full), brief, "DecodeBrief(%s)", p)
	}
	for _, in := range []string{``, " \n", `{"schema": "ratelab.results/v1", "runs": [`, `{"schema": "ratelab.results/v1"} trailing`,
		`{"schema": "ratelab.results/v1",,}`, `{"task": "task1"}`, `{"schema": "ratelab.results/v2"}`,
		`{"schema": "ratelab.results/v1", "score": "high"}`, `"hello"`, `[1, 2]`,
		`{"schema": "ratelab.results/v1", "runs": [{"samples": [01]}]}`,
		`{"schema": "ratelab.results/v1", "runs": [{"samples": ["\x"]}]}`,
		`{"schema": "ratelab.results/v1", "runs": [{"samples": [tru]}]}`,
		`{"schema": "ratelab.results/v1", "runs": [{"samples": [1.]}]}`,
		"{\"schema\": \"ratelab.results/v1\", \"runs\": [{\"samples\": [\"a\tb\"]}]}",
	} {
		_, ferr := Decode(strings.NewReader(in))
		_, berr := DecodeBrief([]byte(in))
		require.Error(t, ferr, "Decode(%q)", in)
		assert.EqualError(t, berr, ferr.Error(), "DecodeBrief(%q)", in)
	}
}

// FuzzDecodeBrief: what Decode reads, DecodeBrief reads the same but the
// series; what DecodeBrief refuses, it refuses with Decode's error.
func FuzzDecodeBrief(f *testing.F) {
	for _, b := range briefSeeds(f) {
		f.Add(b)
	}
	for _, s := range []string{"", "{}", `{"schema":"ratelab.results/v1","runs":[{"samples":[1,2],"name":"x"},null,3]}`,
		`{"schema":"ratelab.results/v1","storms":[{"server_samples":{}}],"scenarios":[{"run":{"timeline":[]}}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		full, ferr := Decode(bytes.NewReader(b))
		brief, berr := DecodeBrief(b)
		switch {
		case ferr == nil && berr != nil:
			t.Fatalf("Decode reads it, DecodeBrief says %v", berr)
		case ferr == nil:
			assert.Equal(t, withoutSeries(full), brief)
		case berr != nil:
			assert.EqualError(t, berr, ferr.Error())
		}
	})
}
