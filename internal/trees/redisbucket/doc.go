// Package redisbucket is the adapter through which programs run task 6's Redis limiter:
// it takes the code from exercises/redisbucket under the build tag ratelab_ex_redisbucket,
// and from solutions/redisbucket without it (see internal/layout). From names the
// tree it took.
package redisbucket
