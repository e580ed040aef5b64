//go:build !race

package replay

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
