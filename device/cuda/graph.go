package cuda

import (
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// captureModeRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: other threads may keep using
// the GPU, and allocate on it, while a stream is captured. The caching allocator calls
// cuMemAlloc inside a capture (its private pool grows), which the global mode forbids.
const captureModeRelaxed = 2

// BeginCapture starts recording the work ordered on s (a stream from NewStream) into a
// graph; see device.GraphCapturer.
func (d *Device) BeginCapture(s device.Stream) error {
	if s == 0 {
		return fmt.Errorf("cuda: %s: BeginCapture(0): the default stream cannot be captured; capture a stream from NewStream", d.name)
	}
	if err := d.live("BeginCapture", s, 0); err != nil {
		return err
	}
	if r := d.call(d.drv.cuStreamBeginCapture, uintptr(s), captureModeRelaxed); r != success {
		return d.drv.errorf(r, "cuStreamBeginCapture(%#x, relaxed)", uintptr(s))
	}
	return nil
}

// EndCapture stops recording s and instantiates what was recorded.
func (d *Device) EndCapture(s device.Stream) (device.Graph, error) {
	if err := d.live("EndCapture", s, 0); err != nil {
		return 0, err
	}
	var g uintptr
	if r := d.call(d.drv.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g))); r != success {
		return 0, d.drv.errorf(r, "cuStreamEndCapture(%#x): the capture was invalidated by a call the stream's capture does not allow (a host wait, a copy from pageable memory, work on the default stream that the stream depends on)", uintptr(s))
	}
	// The instantiated graph is a copy: the recorded one goes whatever happens.
	var exec device.Graph
	r := d.call(d.drv.cuGraphInstantiate, uintptr(unsafe.Pointer(&exec)), g, 0)
	rd := d.call(d.drv.cuGraphDestroy, g)
	if r != success {
		return 0, d.drv.errorf(r, "cuGraphInstantiateWithFlags (the graph captured on stream %#x)", uintptr(s))
	}
	if rd != success {
		d.call(d.drv.cuGraphExecDestroy, uintptr(exec))
		return 0, d.drv.errorf(rd, "cuGraphDestroy (the graph captured on stream %#x, once instantiated)", uintptr(s))
	}
	d.hmu.Lock()
	d.graphs[exec] = struct{}{}
	d.hmu.Unlock()
	return exec, nil
}

// LaunchGraph orders one run of g on s.
func (d *Device) LaunchGraph(g device.Graph, s device.Stream) error {
	if err := d.liveGraph("LaunchGraph", g); err != nil {
		return err
	}
	if err := d.live("LaunchGraph", s, 0); err != nil {
		return err
	}
	if r := d.callInts(d.drv.cuGraphLaunch, uintptr(g), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuGraphLaunch(%#x, stream %#x)", uintptr(g), uintptr(s))
	}
	return nil
}

// DestroyGraph frees g; runs already ordered still complete.
func (d *Device) DestroyGraph(g device.Graph) error {
	return destroy(d, d.graphs, g, "DestroyGraph", "graph", d.drv.cuGraphExecDestroy, "cuGraphExecDestroy")
}

// liveGraph checks that g is a graph of this Device that was not destroyed.
func (d *Device) liveGraph(op string, g device.Graph) error {
	d.hmu.RLock()
	_, ok := d.graphs[g]
	d.hmu.RUnlock()
	if !ok {
		return fmt.Errorf("cuda: %s: %s: graph %#x is not a live graph of this device", d.name, op, uintptr(g))
	}
	return nil
}
