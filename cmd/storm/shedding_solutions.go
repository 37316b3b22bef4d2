//go:build !ratelab_ex_shedding

package main

import (
	"ratelab/fakegpu"
	"ratelab/solutions/shedding"
)

// admission is the shedding server's admission for the storms in virtual
// time (vsession_test.go), where the server runs beside the clients: the
// reference, as the grader's wall-clock server.
//
//lint:ignore U1000 used by vsession_test.go, built with the ratelab_vsession tag
var admission fakegpu.Admission = fakegpu.AdmissionFunc(shedding.Admit)
