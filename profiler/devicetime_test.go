package profiler

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// timedSim is a simulated device whose events record a device clock the test moves
// (kernels take as long as the test says), as a GPU's timing events do.
type timedSim struct {
	*sim.Device
	mu      sync.Mutex
	clock   time.Duration // the device's time now
	next    device.Event
	at      map[device.Event]time.Duration // each recorded event's time
	created int
}

func (d *timedSim) NewTimingEvent() (device.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	d.created++
	return d.next, nil
}

func (d *timedSim) RecordEvent(e device.Event, _ device.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at[e] = d.clock
	return nil
}

func (d *timedSim) SynchronizeEvent(device.Event) error { return nil }

func (d *timedSim) ElapsedTime(a, b device.Event) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at[b] - d.at[a], nil
}

func (d *timedSim) DestroyEvent(e device.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.at, e)
	return nil
}

// run advances the device clock: a kernel of duration k.
func (d *timedSim) run(k time.Duration) {
	d.mu.Lock()
	d.clock += k
	d.mu.Unlock()
}

// TestDeviceTime: with DeviceTime, each op gets the device time between its begin and
// end events, nested ops' apart in self time; the table grows PyTorch's CUDA columns
// and the trace a device track; every event made is destroyed; without DeviceTime no
// event is made at all.
func TestDeviceTime(t *testing.T) {
	s, err := sim.New(sim.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	d := &timedSim{Device: s, at: map[device.Event]time.Duration{}}
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	c := &clock{}
	p, err := Start(Options{Now: c.now, DeviceTime: true}, a)
	require.NoError(t, err)
	for range 2 {
		lin := p.OpBegin("Linear", d)
		mm := p.OpBegin("MatMul", d)
		d.run(300 * time.Microsecond)
		p.OpEnd(mm)
		add := p.OpBegin("Add", d)
		d.run(20 * time.Microsecond)
		p.OpEnd(add)
		d.run(5 * time.Microsecond) // Linear's own work
		p.OpEnd(lin)
	}
	p.Stop()
	require.NoError(t, p.Err())
	got := map[string]OpStats{}
	for _, o := range p.KeyAverages(false) {
		got[o.Op] = o
	}
	assert.Equal(t, 650*time.Microsecond, got["Linear"].DeviceTime)
	assert.Equal(t, 10*time.Microsecond, got["Linear"].SelfDeviceTime)
	assert.Equal(t, 600*time.Microsecond, got["MatMul"].SelfDeviceTime)
	assert.Equal(t, 40*time.Microsecond, got["Add"].DeviceTime)

	var table bytes.Buffer
	require.NoError(t, p.Table(&table, SortSelfDeviceTime, 0, false))
	lines := strings.Split(table.String(), "\n")
	assert.Contains(t, lines[1], "Self CUDA")
	assert.Contains(t, lines[1], "# kernels")
	assert.Contains(t, lines[3], "MatMul", "sorted by self device time")
	assert.Contains(t, lines[3], "600.000us")
	assert.Contains(t, table.String(), "Self CUDA time total: 650.000us")

	var trace bytes.Buffer
	require.NoError(t, p.WriteChromeTrace(&trace))
	var tr struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(trace.Bytes(), &tr))
	var onDevice []string
	for _, e := range tr.TraceEvents {
		if e.Pid == 2 {
			onDevice = append(onDevice, e.Name)
		}
	}
	assert.ElementsMatch(t, []string{"Linear", "MatMul", "Add", "Linear", "MatMul", "Add"}, onDevice)
	assert.Empty(t, d.at, "every event destroyed")
	assert.Equal(t, 13, d.created, "two per op and one reference")

	// Without DeviceTime: no event, no device columns.
	p, err = Start(Options{Now: c.now}, a)
	require.NoError(t, err)
	p.OpEnd(p.OpBegin("Add", d))
	p.Stop()
	table.Reset()
	require.NoError(t, p.Table(&table, SortSelfTime, 0, false))
	assert.NotContains(t, table.String(), "CUDA")
	assert.Equal(t, 13, d.created)
}
