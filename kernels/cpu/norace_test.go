//go:build !race

package cpu

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
