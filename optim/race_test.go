//go:build race

package optim_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = true
