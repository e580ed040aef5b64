// Package named opens devices by name, for programs and tools that let the user choose:
// "cpu", "sim" (a simulated H200 that keeps no data: memory figures only),
// "sim-backed" (the same with a backing store in host memory: ops compute), "cuda" (the
// first GPU) and "cuda:N". The environment variable
// SUBLET_DEVICE, read by Default at each call, overrides the automatic choice.
//
// # Use
//
//	dev, err := named.Default()       // SUBLET_DEVICE, else cuda:0 when usable, else cpu
//	meta, err := named.Open("sim")    // one device value per name, shared by everyone
//	n, err := named.Parse("cuda:1")   // a name taken apart, to open a device of one's own
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

// Usage describes the names, for the help of a -device flag.
const Usage = "cpu (host memory), sim (a simulated H200 without data: exact memory, no compute), sim-backed (a simulated H200 with data), cuda or cuda:N (NVIDIA GPU N; cuda is cuda:0)"

// opened holds the devices opened so far, by canonical name.
var opened struct {
	mu   sync.Mutex
	devs map[string]device.Device // guarded by mu
}

// Open returns the device called name (see the package doc), opening it on first use:
// cpu.New and sim.New with default options (a backing store for sim-backed), cuda.Open
// for a GPU.
func Open(name string) (device.Device, error) {
	d, err := open(name)
	if err != nil {
		return nil, fmt.Errorf("named: %w", err)
	}
	return d, nil
}

// open is Open with an error that does not name the package, for Default to wrap.
func open(name string) (device.Device, error) {
	n, err := Parse(name)
	if err != nil {
		return nil, err
	}
	canon := n.String()
	opened.mu.Lock()
	defer opened.mu.Unlock()
	if d, ok := opened.devs[canon]; ok {
		return d, nil
	}
	var d device.Device
	switch n.Kind {
	case device.CPU:
		d, err = cpu.New(cpu.Options{})
	case device.Sim:
		d, err = sim.New(sim.Options{Backing: n.Backed})
	default:
		d, err = openCUDA(n.Ordinal)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", canon, err)
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

// Name is a device name taken apart, for programs that make a device of their own
// (a simulated one of another capacity, a GPU they close) from a name the user gave:
// every -device flag and SUBLET_DEVICE go through Parse, so all accept the same names.
type Name struct {
	// Kind is the implementation: device.CPU, device.Sim or device.CUDA.
	Kind device.Kind
	// Backed says a simulated device keeps data (sim-backed); false for the others.
	Backed bool
	// Ordinal is the GPU of a cuda name; 0 for the others.
	Ordinal int
}

// Parse reads a device name: "cpu", "sim", "sim-backed", "cuda" (which is "cuda:0") or
// "cuda:N". Anything else is an error listing those; it does not name this package, so
// that the caller can say where the name came from ("-device: unknown device ...").
func Parse(name string) (Name, error) {
	switch name {
	case "cpu":
		return Name{Kind: device.CPU}, nil
	case "sim":
		return Name{Kind: device.Sim}, nil
	case "sim-backed":
		return Name{Kind: device.Sim, Backed: true}, nil
	case "cuda":
		return Name{Kind: device.CUDA}, nil
	}
	if rest, ok := strings.CutPrefix(name, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n >= 0 && rest == strconv.Itoa(n) {
			return Name{Kind: device.CUDA, Ordinal: n}, nil
		}
	}
	return Name{}, fmt.Errorf("unknown device %q: want %s", name, forms)
}

// String is the canonical name: "cpu", "sim", "sim-backed" or "cuda:N".
func (n Name) String() string {
	switch {
	case n.Kind == device.CUDA:
		return "cuda:" + strconv.Itoa(n.Ordinal)
	case n.Backed:
		return "sim-backed"
	}
	return n.Kind.String()
}

// Default returns the device named by SUBLET_DEVICE when it is set, else cuda:0 when this
// machine has a CUDA driver and GPU, else cpu. A GPU whose driver is present but fails
// is an error rather than a silent fall back to the CPU; SUBLET_DEVICE=cpu chooses the
// CPU explicitly.
func Default() (device.Device, error) {
	n, err := DefaultName()
	if err != nil {
		return nil, err
	}
	d, err := Open(n.String())
	if env := os.Getenv(EnvVar); err != nil && env != "" {
		return nil, fmt.Errorf("named: %s=%q: %w", EnvVar, env, err)
	}
	return d, err
}

// DefaultName is the name of the device Default opens, for a program that makes its
// own device of that name (a fresh simulated one, say): SUBLET_DEVICE's (an error
// naming the variable when it names no device), else cuda:0 when it opens, else cpu.
func DefaultName() (Name, error) {
	if name := os.Getenv(EnvVar); name != "" {
		n, err := Parse(name)
		if err != nil {
			return Name{}, fmt.Errorf("named: %s=%q: %w", EnvVar, name, err)
		}
		return n, nil
	}
	_, err := Open("cuda:0")
	switch {
	case err == nil:
		return Name{Kind: device.CUDA}, nil
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice):
		return Name{Kind: device.CPU}, nil
	}
	return Name{}, fmt.Errorf("%w; set %s=cpu to run on the CPU", err, EnvVar)
}
