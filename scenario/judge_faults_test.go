package scenario_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/trees/llmclient"
	"ratelab/provider"
	"ratelab/results"
	"ratelab/scenario"
)

// The polite-faults strategy, in virtual time, with the reference (or the
// learner's client, where the trees take it): every kind of fault is
// injected FaultsN/FaultsEvery/5 times and retried as often, no retry
// comes before its retry-after, and the API never sees more than
// FaultsMaxInFlight of the key's requests at once.
func TestJudgeFaultsVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		url, dial := scenario.ServeAPIVirtual(t, provider.DefaultConfig())
		rep, err := scenario.Judge(context.Background(), scenario.JudgeOptions{
			URL: url, Workload: scenario.DefaultJudgeWorkload(), Strategies: []string{"polite-faults"},
			NewPolite: llmclient.NewPolite, Dial: dial,
		})
		require.NoError(t, err)
		s := rep.Strategies[0]
		require.Empty(t, s.Error)
		assert.Equal(t, scenario.FaultsN, s.N)
		assert.Equal(t, int64(scenario.FaultsN), s.Completed)
		assert.Equal(t, scenario.FaultsMaxInFlight, s.MaxInFlight)
		f := s.Server.Faults
		require.NotNil(t, f)
		each := int64(scenario.FaultsN / scenario.FaultsEvery / len(results.FaultKinds))
		for _, k := range results.FaultKinds {
			assert.GreaterOrEqual(t, f.Injected[k], each, "injected %s", k)
			assert.Equal(t, f.Injected[k], f.Retried[k], "every %s retried", k)
		}
		assert.Zero(t, f.RetriedEarly)
		assert.GreaterOrEqual(t, f.MinRetryAfterGapMS, f.RetryAfterMS)
		assert.Positive(t, f.MaxStalled)
		assert.LessOrEqual(t, s.Server.MaxInFlight, int64(scenario.FaultsMaxInFlight))
		t.Logf("%.1f s (minimum %.1f s), %d attempts, max in flight %d, stalled at once %d, smallest retry-after gap %.0f ms",
			s.WallSeconds, s.MinSeconds, s.Attempts, s.Server.MaxInFlight, f.MaxStalled, f.MinRetryAfterGapMS)
	})
}
