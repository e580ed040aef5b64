//go:build !race

package tensor_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
