package p

import (
	cpu "github.com/subletml/sublet/device/cpu"
)

func _() {
{
//line device/cpu/cpu.go:6
dev, err := cpu.New(cpu.Options{})                     // up to the machine's memory
small, err := cpu.New(cpu.Options{Capacity: 4 << 30}) // a 4 GiB budget
}
}
