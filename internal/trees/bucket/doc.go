// Package bucket is the adapter through which programs run task 3's keyed limiter:
// it takes the code from exercises/bucket under the build tag ratelab_ex_bucket,
// and from solutions/bucket without it (see internal/layout). From names the
// tree it took.
package bucket
