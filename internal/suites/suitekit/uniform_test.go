package suitekit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKSUniformCriticalValue(t *testing.T) {
	_, crit := KSUniform(make([]float64, 4000), 1e-9)
	// √(ln(2e9) / 8000) = 0.0517
	assert.InDelta(t, 0.0517, crit, 1e-4, "KSUniform(4000 samples, 1e-9) critical = %v; want 0.0517", crit)
}

func TestKSUniformTellsUniformFromNot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	uniform := make([]float64, 4000)
	equal := make([]float64, 4000) // "equal jitter": 1/2 + U/2
	for i := range uniform {
		uniform[i] = r.Float64()
		equal[i] = 0.5 + r.Float64()/2
	}
	d, crit := KSUniform(uniform, 1e-9)
	assert.Less(t, d, crit, "KSUniform(uniform) = %v; want below %v", d, crit)
	d, crit = KSUniform(equal, 1e-9)
	assert.Greater(t, d, 0.45, "KSUniform(1/2 + U/2) = %v; want about 0.5 (critical %v)", d, crit)
	d, _ = KSUniform([]float64{1, 1, 1}, 1e-9)
	assert.Equal(t, 1.0, d, "KSUniform(all ones) = %v; want 1", d)
	d, crit = KSUniform(nil, 1e-9)
	assert.Equal(t, 0.0, d)
	assert.True(t, math.IsInf(crit, 1), "KSUniform(nil) critical = %v; want +Inf", crit)
}
