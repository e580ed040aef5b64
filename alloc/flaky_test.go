package alloc

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// errBroken is the failure a flaky device injects: an error that is not an OOM.
var errBroken = errors.New("device broken")

// flaky is a simulated device whose calls fail with errBroken, changing nothing, where
// the test says so: failures the simulated device has no switch for.
type flaky struct {
	*sim.Device
	mu sync.Mutex
	// fail maps a method name to the number of the call to it that fails (counted in
	// calls); always fails every call.
	fail  map[string]int64
	calls map[string]int64
}

// always in flaky.fail fails every call.
const always = -1

func newFlaky(d *sim.Device) *flaky {
	return &flaky{Device: d, fail: map[string]int64{}, calls: map[string]int64{}}
}

// newFlakyAlloc returns an allocator over a flaky simulated device of capacity bytes
// (0: the H200's), the flaky device, and the simulated device under it.
func newFlakyAlloc(t testing.TB, capacity int64, cfg Config) (*Allocator, *flaky, *sim.Device) {
	t.Helper()
	d := newSim(t, capacity)
	f := newFlaky(d)
	a, err := New(f, cfg)
	require.NoError(t, err)
	return a, f, d
}

// failNext makes the nth call to op from now fail (1 = the next one), or every call
// when n is always.
func (d *flaky) failNext(op string, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n != always {
		n += d.calls[op]
	}
	d.fail[op] = n
}

// heal stops op failing.
func (d *flaky) heal(op string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.fail, op)
}

// check counts a call to op and returns its injected failure, if any.
func (d *flaky) check(op string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[op]++
	if n, ok := d.fail[op]; ok && (n == always || n == d.calls[op]) {
		return fmt.Errorf("%s: %w", op, errBroken)
	}
	return nil
}

func (d *flaky) Malloc(size int64) (device.Ptr, error) {
	if err := d.check("Malloc"); err != nil {
		return 0, err
	}
	return d.Device.Malloc(size)
}

func (d *flaky) Free(p device.Ptr) error {
	if err := d.check("Free"); err != nil {
		return err
	}
	return d.Device.Free(p)
}

func (d *flaky) MemInfo() (int64, int64, error) {
	if err := d.check("MemInfo"); err != nil {
		return 0, 0, err
	}
	return d.Device.MemInfo()
}

func (d *flaky) SynchronizeStream(s device.Stream) error {
	if err := d.check("SynchronizeStream"); err != nil {
		return err
	}
	return d.Device.SynchronizeStream(s)
}

func (d *flaky) NewEvent() (device.Event, error) {
	if err := d.check("NewEvent"); err != nil {
		return 0, err
	}
	return d.Device.NewEvent()
}

func (d *flaky) RecordEvent(e device.Event, s device.Stream) error {
	if err := d.check("RecordEvent"); err != nil {
		return err
	}
	return d.Device.RecordEvent(e, s)
}

func (d *flaky) QueryEvent(e device.Event) (bool, error) {
	if err := d.check("QueryEvent"); err != nil {
		return false, err
	}
	return d.Device.QueryEvent(e)
}

func (d *flaky) SynchronizeEvent(e device.Event) error {
	if err := d.check("SynchronizeEvent"); err != nil {
		return err
	}
	return d.Device.SynchronizeEvent(e)
}

func (d *flaky) Reserve(size int64) (device.Ptr, error) {
	if err := d.check("Reserve"); err != nil {
		return 0, err
	}
	return d.Device.Reserve(size)
}

func (d *flaky) Map(addr device.Ptr, size int64) error {
	if err := d.check("Map"); err != nil {
		return err
	}
	return d.Device.Map(addr, size)
}

func (d *flaky) Unmap(addr device.Ptr, size int64) error {
	if err := d.check("Unmap"); err != nil {
		return err
	}
	return d.Device.Unmap(addr, size)
}

func (d *flaky) Unreserve(addr device.Ptr, size int64) error {
	if err := d.check("Unreserve"); err != nil {
		return err
	}
	return d.Device.Unreserve(addr, size)
}

func (d *flaky) Remap(from, to device.Ptr, size int64) error {
	if err := d.check("Remap"); err != nil {
		return err
	}
	return d.Device.Remap(from, to, size)
}
