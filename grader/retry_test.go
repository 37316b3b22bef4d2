package grader

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// TestUntilReliable: a wall-clock try whose load generator fell behind is
// run again, at most wallTries times; the document keeps the last try's
// runs only, and they say why they were run again. An error or a reliable
// try ends the tries at once.
func TestUntilReliable(t *testing.T) {
	try := func(g *grading, reliable ...bool) func() ([]*results.Run, error) {
		n := 0
		return func() ([]*results.Run, error) {
			r := &results.Run{Name: "f", Reliable: reliable[n]}
			if !r.Reliable {
				r.Warnings = []string{"the load generator fell behind"}
			}
			n++
			g.doc.Runs = append(g.doc.Runs, r)
			return []*results.Run{r}, nil
		}
	}
	newG := func() *grading { return &grading{doc: &results.Document{Runs: []*results.Run{{Name: "before"}}}} }

	g := newG()
	runs, err := g.untilReliable(context.Background(), "f", try(g, false, false, true))
	require.NoError(t, err)
	assert.True(t, runs[0].Reliable)
	require.Len(t, g.doc.Runs, 2, "the given-up tries leave the document; the run before stays")
	assert.Equal(t, "before", g.doc.Runs[0].Name)
	assert.Len(t, runs[0].Warnings, 2, "the kept try says why each earlier one was given up")

	g = newG()
	runs, err = g.untilReliable(context.Background(), "f", try(g, false, false, false, true))
	require.NoError(t, err)
	assert.False(t, runs[0].Reliable, "after wallTries the last try stands, not judged")
	assert.Len(t, g.doc.Runs, 2)

	g = newG()
	runs, err = g.untilReliable(context.Background(), "f", try(g, true, false))
	require.NoError(t, err)
	assert.True(t, runs[0].Reliable)
	assert.Empty(t, runs[0].Warnings)

	g = newG()
	calls := 0
	_, err = g.untilReliable(context.Background(), "f", func() ([]*results.Run, error) {
		calls++
		return []*results.Run{{Name: "f"}}, errors.New("learner's server died")
	})
	assert.Error(t, err)
	assert.Equal(t, 1, calls, "an error is not tried again")

	g = newG()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	_, err = g.untilReliable(ctx, "f", func() ([]*results.Run, error) {
		calls++
		return []*results.Run{{Name: "f"}}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, calls, "an interrupted grading is not tried again")
}
