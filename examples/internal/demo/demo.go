// Package demo is what the example programs share: opening the device a -device flag
// names, reading the caching allocator's figures at a named moment, and writing bytes
// the way the examples print them.
//
// Use Open for the device and its allocator (a fresh cpu or simulated device per call,
// so that each run of an example starts from an empty allocator and its figures are
// exact; the GPU through device/named), Read for its memory at a moment, and
// Bytes/Table/Explain for what the program prints.
//
// Invariants: nothing here keeps state between calls; Open never returns a device
// another call returned, except for cuda, which has one device value per process
// (device/named) and so one allocator shared by all runs in the process.
package demo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/examples/internal/exdevice"
	"github.com/subletml/sublet/tensor"
)

// DeviceUsage is the help text of an example's -device flag.
const DeviceUsage = "cpu, sim (a simulated GPU without data: exact memory, no compute), sim-backed (a simulated GPU with data) or cuda[:N]"

// Open returns the device name stands for, its caching allocator, and whether it keeps
// data (tensor values can be read back: false only on sim, the meta device). cpu, sim
// and sim-backed are new devices with their own allocators; cuda and cuda:N come from
// device/named.
func Open(name string) (dev device.Device, a *alloc.Allocator, hasData bool, err error) {
	if dev, hasData, err = open(name); err != nil {
		return nil, nil, false, err
	}
	if a, err = alloc.For(dev); err != nil {
		return nil, nil, false, err
	}
	return dev, a, hasData, nil
}

func open(name string) (device.Device, bool, error) {
	n, err := named.Parse(name)
	if err != nil {
		return nil, false, fmt.Errorf("-device: %w", err)
	}
	if n.Kind != device.CUDA {
		return exdevice.Fresh(name)
	}
	d, err := named.Open(n.String())
	if err != nil {
		return nil, false, fmt.Errorf("%w (no usable NVIDIA GPU here: use -device cpu, sim or sim-backed)", err)
	}
	return d, true, nil
}

// Explain adds what to do to an error that says dev has no kernels; other errors come
// back unchanged.
func Explain(dev device.Device, err error) error {
	if errors.Is(err, tensor.ErrNoKernels) {
		return fmt.Errorf("%s: sublet has no tensor kernels for this device yet (the caching allocator runs there, tensor ops do not); use -device cpu, sim or sim-backed: %w", dev.Name(), err)
	}
	return err
}

// Try runs f, which may panic with a tensor error (out of memory, no kernels), and
// returns that error, or f's own, with Explain's advice.
func Try(dev device.Device, f func() error) error {
	var ferr error
	err := tensor.Try(func() { ferr = f() })
	if err == nil {
		err = ferr
	}
	return Explain(dev, err)
}

// Memory is the allocator's figures at one moment, in bytes and counts.
type Memory struct {
	// Allocated is the rounded size of live blocks (PyTorch's memory_allocated);
	// Requested what their callers asked for; Reserved what the allocator holds from the
	// device (memory_reserved).
	Allocated, Requested, Reserved int64
	// PeakAllocated and PeakReserved are the highest values since the last
	// ResetPeakStats (max_memory_allocated, max_memory_reserved).
	PeakAllocated, PeakReserved int64
	// InactiveSplit is cached memory inside segments that also hold live blocks: what
	// EmptyCache cannot give back (fragmentation).
	InactiveSplit int64
	// Allocations counts the blocks handed out since the last ResetAccumulatedStats,
	// AllocatedTotal their bytes.
	Allocations, AllocatedTotal int64
	// DeviceAllocs and DeviceFrees count the device's own Malloc and Free calls (and
	// expandable segments' map and unmap steps) since the last ResetAccumulatedStats.
	DeviceAllocs, DeviceFrees int64
	// Retries counts allocations that released the whole cache and tried again; OOMs
	// those that failed even so.
	Retries, OOMs int64
}

// Read returns a's figures now.
func Read(a *alloc.Allocator) Memory {
	st := a.Stats()
	all := alloc.StatAll
	return Memory{
		Allocated:      st.AllocatedBytes[all].Current,
		Requested:      st.RequestedBytes[all].Current,
		Reserved:       st.ReservedBytes[all].Current,
		PeakAllocated:  st.AllocatedBytes[all].Peak,
		PeakReserved:   st.ReservedBytes[all].Peak,
		InactiveSplit:  st.InactiveSplitBytes[all].Current,
		Allocations:    st.Allocation[all].Allocated,
		AllocatedTotal: st.AllocatedBytes[all].Allocated,
		DeviceAllocs:   st.NumDeviceAlloc,
		DeviceFrees:    st.NumDeviceFree,
		Retries:        st.NumAllocRetries,
		OOMs:           st.NumOOMs,
	}
}

// Bytes writes n bytes in the largest unit of 1024 it reaches, with two decimals
// ("512 B", "7.63 MiB", "-1.50 KiB").
func Bytes(n int64) string {
	v, units := float64(n), []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// Growth writes a change of n bytes with its sign ("+7.63 MiB", "0 B", "-512 B").
func Growth(n int64) string {
	if n > 0 {
		return "+" + Bytes(n)
	}
	return Bytes(n)
}

// Drain empties a's cache and checks that nothing is left allocated: the end of every
// example.
func Drain(a *alloc.Allocator) error {
	if err := a.EmptyCache(); err != nil {
		return err
	}
	if m := Read(a); m.Allocated != 0 || m.Reserved != 0 {
		return fmt.Errorf("at the end %d bytes are still allocated and %d reserved on %s: something leaked", m.Allocated, m.Reserved, a.Device().Name())
	}
	return nil
}

// Table writes rows of cells under header, each line indented by indent: the first
// column left-aligned, the others right-aligned, two spaces apart. A row may have fewer
// cells than the header.
func Table(out io.Writer, indent string, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range append([][]string{header}, rows...) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
}

// Flags returns the flag set of the example called name, writing its messages to out,
// with the -device flag already defined: it sets *dev, def by default. Parse it with
// exflag.Parse.
func Flags(name string, out io.Writer, dev *string, def string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(dev, "device", def, DeviceUsage)
	return fs
}
