package sim

import (
	"testing"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/devicetest"
)

func TestConformanceMeta(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) device.Device {
		return newSim(t, Options{})
	}, devicetest.Config{ExactMemInfo: true})
}

func TestConformanceBacked(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) device.Device {
		return newSim(t, Options{Backing: true, Capacity: 256 << 20, Cost: &CostModel{}})
	}, devicetest.Config{KeepsData: true, ExactMemInfo: true})
}

func TestConformanceOccupied(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) device.Device {
		return newSim(t, Options{Capacity: 64 << 20, Occupied: 10 << 20})
	}, devicetest.Config{ExactMemInfo: true})
}
