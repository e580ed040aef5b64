//go:build !race

package autograd_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
