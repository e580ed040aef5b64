//go:build !race

package tensor_test

// raceEnabled says the tests run under the race detector, whose sync.Pool drops what
// it is given at random.
const raceEnabled = false
