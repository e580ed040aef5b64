// Package named opens devices by name, for programs and tools that let the user choose:
// "cpu", "sim" (a simulated H200 that keeps no data: memory figures only),
// "sim-backed" (the same with a backing store in host memory: ops compute), "cuda" (the
// first GPU) and "cuda:N". The environment variable
// SUBLET_DEVICE, read by Default at each call, overrides the automatic choice.
//
// Invariants:
//   - Each name opens its device once per process: later calls return the same value,
//     so that the one caching allocator each device value owns is shared by everyone
//     who asks for the device by name. "cuda" and "cuda:0" are the same name. A failed
//     open is not remembered: the next call tries again.
//   - Nothing is registered or opened at import; the CUDA driver is loaded only when a
//     cuda name (or Default without SUBLET_DEVICE) is asked for.
package named

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/sim"
)

// EnvVar is the environment variable that overrides Default's choice.
const EnvVar = "SUBLET_DEVICE"

// forms lists the accepted names, for error messages.
const forms = `"cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)`

// opened holds the devices opened so far, by canonical name.
var opened struct {
	mu   sync.Mutex
	devs map[string]device.Device // guarded by mu
}

// Open returns the device called name (see the package doc), opening it on first use:
// cpu.New and sim.New with default options (a backing store for sim-backed), cuda.Open
// for a GPU.
func Open(name string) (device.Device, error) {
	canon, ordinal, err := parse(name)
	if err != nil {
		return nil, err
	}
	opened.mu.Lock()
	defer opened.mu.Unlock()
	if d, ok := opened.devs[canon]; ok {
		return d, nil
	}
	var d device.Device
	switch canon {
	case "cpu":
		d, err = cpu.New(cpu.Options{})
	case "sim":
		d, err = sim.New(sim.Options{})
	case "sim-backed":
		d, err = sim.New(sim.Options{Backing: true})
	default:
		d, err = openCUDA(ordinal)
	}
	if err != nil {
		return nil, fmt.Errorf("named: opening %s: %w", canon, err)
	}
	if opened.devs == nil {
		opened.devs = make(map[string]device.Device)
	}
	opened.devs[canon] = d
	return d, nil
}

// openCUDA keeps a nil *cuda.Device out of the device.Device interface.
func openCUDA(ordinal int) (device.Device, error) {
	d, err := cuda.Open(ordinal)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// parse returns the canonical name and, for a GPU, its ordinal.
func parse(name string) (canon string, ordinal int, err error) {
	switch name {
	case "cpu", "sim", "sim-backed":
		return name, 0, nil
	case "cuda":
		return "cuda:0", 0, nil
	}
	if rest, ok := strings.CutPrefix(name, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n >= 0 && rest == strconv.Itoa(n) {
			return "cuda:" + rest, n, nil
		}
	}
	return "", 0, fmt.Errorf("named: unknown device %q: want %s", name, forms)
}

// Default returns the device named by SUBLET_DEVICE when it is set, else cuda:0 when this
// machine has a CUDA driver and GPU, else cpu. A GPU whose driver is present but fails
// is an error rather than a silent fall back to the CPU; SUBLET_DEVICE=cpu chooses the
// CPU explicitly.
func Default() (device.Device, error) {
	if name := os.Getenv(EnvVar); name != "" {
		d, err := Open(name)
		if err != nil {
			return nil, fmt.Errorf("named: %s=%q: %w", EnvVar, name, err)
		}
		return d, nil
	}
	d, err := Open("cuda:0")
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice):
		return Open("cpu")
	}
	return nil, fmt.Errorf("%w; set %s=cpu to run on the CPU", err, EnvVar)
}
