//go:build !ratelab_ex_shedding

package main

import (
	"ratelab/fakegpu"
	"ratelab/solutions/shedding"
)

var admission fakegpu.Admission = fakegpu.AdmissionFunc(shedding.Admit)

const admissionFrom = "solutions/shedding"
