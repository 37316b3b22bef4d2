package suitekit

import (
	"math"
	"slices"
)

// KSUniform compares samples xs, each in [0, 1], with the uniform
// distribution on [0, 1] by the Kolmogorov–Smirnov statistic: d is the
// largest distance between the samples' empirical distribution function and
// the uniform one, x ↦ x.
//
// critical is the distance that n = len(xs) samples of a truly uniform
// variable exceed with probability at most alpha, from the
// Dvoretzky–Kiefer–Wolfowitz inequality with Massart's constant,
// P(d > ε) ≤ 2·exp(−2nε²), which holds for every n (no asymptotics):
// ε = √(ln(2/alpha) / 2n). A check that fails when d > critical therefore
// fails correct code with probability at most alpha. Samples of a discrete
// uniform variable (whole nanoseconds in [0, c], scaled by c) sit up to
// 1/(c+1) away from the continuous distribution: add that to critical.
func KSUniform(xs []float64, alpha float64) (d, critical float64) {
	n := len(xs)
	if n == 0 {
		return 0, math.Inf(1)
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	for i, x := range sorted {
		x = min(max(x, 0), 1)
		d = max(d, float64(i+1)/float64(n)-x, x-float64(i)/float64(n))
	}
	return d, math.Sqrt(math.Log(2/alpha) / (2 * float64(n)))
}
