// Package shedding is the adapter through which programs run task 2's admission (exercises/shedding or solutions/shedding):
// it takes the code from exercises/shedding under the build tag ratelab_ex_shedding,
// and from solutions/shedding without it (see internal/layout). From names the
// tree it took.
package shedding
