// Package llmclient is the adapter through which programs run task 5's polite client:
// it takes the code from exercises/llmclient under the build tag ratelab_ex_llmclient,
// and from solutions/llmclient without it (see internal/layout). From names the
// tree it took.
package llmclient
