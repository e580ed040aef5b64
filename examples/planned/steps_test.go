//go:build !race

package main

// raceSteps is the length of main_test.go's runs: the full 1,000 steps (race_test.go
// shortens them under the race detector).
const raceSteps = 1000
