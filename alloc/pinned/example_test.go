package pinned_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/device/cpu"
)

// Staging buffers for host↔device copies: a request is rounded up to a power of two
// and served whole; a freed block waits in its bucket for the next request of that
// size. On a GPU the memory is page-locked (Pinned reports it); on cpu and sim it is
// ordinary memory outside the Go heap, with the same API.
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	h, _ := pinned.New(dev)
	defer h.Close()

	buf, _ := h.Alloc(3000) // a 4096-byte block; the slice has the 3000 bytes asked for
	copy(buf, "batch 0")
	fmt.Println(len(buf), string(buf[:7]), "pinned:", h.Pinned())
	_ = h.Free(buf) // no stream recorded a use of it (RecordEvent): cached at once

	again, _ := h.Alloc(2500) // same bucket: the cached block, no new host allocation
	st := h.Stats()
	fmt.Println("host allocations", st.NumHostAlloc, "active bytes", st.ActiveBytes.Current)
	_ = h.Free(again)
	_ = h.EmptyCache()
	fmt.Println("held after EmptyCache", h.Stats().AllocatedBytes.Current)
	// Output:
	// 3000 batch 0 pinned: false
	// host allocations 1 active bytes 4096
	// held after EmptyCache 0
}
