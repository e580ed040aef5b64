//go:build !amd64

package cpu

// Without the amd64 vector loops the optimizers run element by element.
var optimVecs32, optimVecs64 []optimVec
