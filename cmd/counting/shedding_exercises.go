//go:build ratelab_ex_shedding

package main

import (
	"ratelab/exercises/shedding"
	"ratelab/fakegpu"
)

var admission fakegpu.Admission = fakegpu.AdmissionFunc(shedding.Admit)

const admissionFrom = "exercises/shedding"
