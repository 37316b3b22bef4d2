//go:build !ratelab_vsession

package vsession

// hideTesting cannot hide anything outside the grader's session build
// (build tag ratelab_vsession): it reports false.
func hideTesting() bool { return false }
