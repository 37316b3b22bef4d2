//go:build ratelab_ex_shedding

package shedding

import (
	tree "ratelab/exercises/shedding"
	"ratelab/fakegpu"
)

// From is the tree this adapter takes the code from.
const From = "exercises/shedding"

// Admission is the tree's admission, for the fake GPU's protected modes.
var Admission fakegpu.Admission = fakegpu.AdmissionFunc(tree.Admit)
