package p

import (
	sim "github.com/subletml/sublet/device/sim"
)

func _() {
{
//line device/sim/sim.go:10
meta, err := sim.New(sim.Options{})                                   // an H200's memory, no data
backed, err := sim.New(sim.Options{Capacity: 8 << 30, Backing: true}) // 8 GiB that keeps data
}
}
