//go:build !amd64

package cpu

// expVector is empty here: expTo uses expScalar.
var expVector expKernel
