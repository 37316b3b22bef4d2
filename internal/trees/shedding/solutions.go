//go:build !ratelab_ex_shedding

package shedding

import (
	"ratelab/fakegpu"
	tree "ratelab/solutions/shedding"
)

// From is the tree this adapter takes the code from.
const From = "solutions/shedding"

// Admission is the tree's admission, for the fake GPU's protected modes.
var Admission fakegpu.Admission = fakegpu.AdmissionFunc(tree.Admit)
