package p

import (
	pinned "github.com/subletml/sublet/alloc/pinned"
)

func _() {
{
//line alloc/pinned/pinned.go:5
h, err := pinned.New(dev)      // pinned_* settings from SUBLET_ALLOC_CONF
buf, err := h.Alloc(1 << 20)   // a []byte outside the Go heap, page-locked on a GPU
// ... copy into buf, start the host-to-device copy on stream 0 ...
err = h.RecordEvent(buf, 0)    // buf is not reused before the copy has completed
err = h.Free(buf)              // cached for the next request of its size
defer h.Close()                // everything goes back to the system
}
}
