package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/subletml/sublet/alloc/alloctest"
	"github.com/subletml/sublet/device"
)

// TestAllocatorConformance runs the caching allocator's conformance suite on the GPU:
// expandable segments through VMM, RecordStream across two real streams (the second
// held by the wait_flag kernel, so the deferred free is genuinely pending), the memory
// fraction against the real capacity, and OOM from the real device with release and
// retry. Other processes may use the GPU, so MemInfo is not taken as exact; the
// Device's own Usage is.
func TestAllocatorConformance(t *testing.T) {
	openTest(t)
	alloctest.Run(t, func(t *testing.T) alloctest.Target {
		d := openTest(t)
		return alloctest.Target{
			Dev: d,
			InUse: func() int64 {
				u := d.Usage()
				return u.MallocBytes + u.MappedBytes
			},
			KeepsData: true,
			Hold: func(t *testing.T, s device.Stream) func() {
				release := holdStream(t, d, s)
				return func() { assert.True(t, release(), "wait_flag saw the flag rather than timing out") }
			},
		}
	})
}
