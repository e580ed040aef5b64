//go:build race

package main

// raceSteps: under the race detector, whose kernels run several times slower, the runs
// of main_test.go are shorter; `go test` without it runs the full 1,000 steps.
const raceSteps = 100
