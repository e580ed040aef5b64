package alloc

import (
	"fmt"
	"strings"

	"github.com/subletml/sublet/device"
)

// OOMError is the error of an allocation that found no cached block and could not get
// device memory even after releasing the cache. It carries what PyTorch's message says
// and the fragmentation picture PyTorch leaves out. Test with errors.As; when the device
// itself reported the lack of memory it also wraps device.ErrOutOfMemory.
type OOMError struct {
	// Device is the device's name.
	Device string
	// Requested is the size the caller asked for; Rounded its rounded size.
	Requested, Rounded int64
	// SegmentSize is the size of the segment the allocator tried to get (PyTorch's
	// "Tried to allocate"); 0 for a request over MaxRequest, which tries nothing.
	SegmentSize int64
	// Pool is "small" or "large".
	Pool string
	// Stream is the stream of the request.
	Stream device.Stream

	// Capacity and DeviceFree are the device's total and free memory after the failure;
	// both 0 when the device could not report them.
	Capacity, DeviceFree int64
	// Allowed is the cap set by a memory fraction; 0 when none is set.
	Allowed int64
	// Allocated is the rounded size of live allocations; Reserved the memory held from
	// the device. Reserved − Allocated is cached but not allocated.
	Allocated, Reserved int64
	// InactiveSplitBytes is cached memory inside segments that also hold live blocks,
	// which releasing the cache cannot give back.
	InactiveSplitBytes int64
	// LargestFreeSmall and LargestFreeLarge are the largest cached free blocks of each
	// pool, all streams together; LargestFreeOnStream is the largest in the request's
	// pool on its stream, the only ones it could have used.
	LargestFreeSmall, LargestFreeLarge, LargestFreeOnStream int64
	// Hint says what would most likely help, chosen from the numbers above.
	Hint string

	// Err is the device's error for the last raw allocation attempt, when the device
	// reported the lack of memory; nil when the memory fraction refused it first.
	Err error
}

// formatBytes is PyTorch's format_size: bytes up to 1 KiB, then KiB, MiB and GiB with
// two decimals.
func formatBytes(n int64) string {
	switch {
	case n <= 1024:
		return fmt.Sprintf("%d bytes", n)
	case n <= 1<<20:
		return fmt.Sprintf("%.2f KiB", float64(n)/1024)
	case n <= 1<<30:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

func (e *OOMError) Error() string {
	var b strings.Builder
	if e.SegmentSize == 0 {
		fmt.Fprintf(&b, "alloc: out of memory on %s. Tried to allocate more than 1EB memory (%d bytes).\n  hint: %s", e.Device, e.Requested, e.Hint)
		return b.String()
	}
	fmt.Fprintf(&b, "alloc: out of memory on %s. Tried to allocate %s. Device %s has a total capacity of %s of which %s is free. ",
		e.Device, formatBytes(e.SegmentSize), e.Device, formatBytes(e.Capacity), formatBytes(e.DeviceFree))
	if e.Allowed > 0 {
		fmt.Fprintf(&b, "%s allowed; ", formatBytes(e.Allowed))
	}
	fmt.Fprintf(&b, "Of the allocated memory %s is allocated by sublet, and %s is reserved by sublet but unallocated. "+
		"If reserved but unallocated memory is large try setting %s=expandable_segments:True to avoid fragmentation.",
		formatBytes(e.Allocated), formatBytes(e.Reserved-e.Allocated), ConfigEnv)
	fmt.Fprintf(&b, "\n  request: %d bytes (rounded to %d) from the %s pool on stream %d",
		e.Requested, e.Rounded, e.Pool, e.Stream)
	fmt.Fprintf(&b, "\n  largest free block: %s on this stream's %s pool; %s small pool, %s large pool on all streams",
		formatBytes(e.LargestFreeOnStream), e.Pool, formatBytes(e.LargestFreeSmall), formatBytes(e.LargestFreeLarge))
	fmt.Fprintf(&b, "\n  cached inside segments with live blocks (not releasable): %s", formatBytes(e.InactiveSplitBytes))
	if e.Err != nil {
		fmt.Fprintf(&b, "\n  device: %v", e.Err)
	}
	fmt.Fprintf(&b, "\n  hint: %s", e.Hint)
	return b.String()
}

func (e *OOMError) Unwrap() error { return e.Err }

// room is what the refused segment had to fit in: what the memory fraction still
// allowed when it refused, else the device's free memory (0 when unknown).
func (e *OOMError) room(limit int64) int64 {
	if e.Err == nil && e.Allowed > 0 {
		return e.Allowed - e.Reserved
	}
	if limit == 0 {
		return 0
	}
	return e.DeviceFree
}

// segmentRounding reports whether the segment size, not the request, is what did not
// fit: the rounded request fits in the room left, the segment it needs does not.
func (e *OOMError) segmentRounding(room int64) bool {
	return e.SegmentSize > e.Rounded && room >= e.Rounded && room < e.SegmentSize
}

func (e *OOMError) segmentRoundingHint(room int64) string {
	where := "free on the device"
	fix := "free memory held by other processes, or use a device with more memory"
	if e.Err == nil && e.Allowed > 0 {
		where = "the memory fraction still allows"
		fix = fmt.Sprintf("raise per_process_memory_fraction in %s (or SetMemoryFraction) by at least %s", ConfigEnv, formatBytes(e.SegmentSize-room))
	}
	rule := "rounded sizes up to 1 MiB take a 2 MiB segment, those below 10 MiB a 20 MiB one"
	if e.Rounded >= MinLargeAlloc {
		rule = "segments for 10 MiB or more are rounded up to a multiple of 2 MiB"
	}
	return fmt.Sprintf("the request (%s) would fit in the %s %s, but it needs a new %s segment (%s, as in PyTorch; no setting changes that): %s",
		formatBytes(e.Rounded), formatBytes(room), where, formatBytes(e.SegmentSize), rule, fix)
}

// hint picks the advice for an OOMError from its numbers. limit is what the allocator
// may reserve (the fraction's cap, or the capacity; 0 when unknown); expandable and
// maxSplit describe the configuration in force.
func (e *OOMError) hint(limit int64, expandable, maxSplitSet bool) string {
	cached := e.Reserved - e.Allocated
	switch {
	case limit > 0 && e.Allocated >= limit-limit/10:
		return fmt.Sprintf("live allocations hold %s of the %s this allocator may use: free tensors you no longer need or reduce the batch size",
			formatBytes(e.Allocated), formatBytes(limit))
	case cached >= e.Rounded && e.LargestFreeOnStream < e.Rounded && max(e.LargestFreeSmall, e.LargestFreeLarge) >= e.Rounded:
		// The retry released every cached segment without live blocks, so this block
		// shares its segment with live ones: EmptyCache cannot return it either.
		return "a cached block large enough exists on another stream or in the other pool, but blocks are only reused by the stream and pool that allocated them, and this one shares its segment with live blocks: allocate on one stream, or free those blocks"
	case cached >= e.Rounded && !maxSplitSet && e.InactiveSplitBytes*2 >= cached:
		return fmt.Sprintf("%s is cached inside split segments that still hold live blocks: set max_split_size_mb in %s to stop large blocks being split, or expandable_segments:True",
			formatBytes(e.InactiveSplitBytes), ConfigEnv)
	case cached >= e.Rounded && !expandable:
		return fmt.Sprintf("%s is reserved but unallocated, more than the request, in pieces too small to use: set expandable_segments:True in %s",
			formatBytes(cached), ConfigEnv)
	case !expandable && e.segmentRounding(e.room(limit)):
		return e.segmentRoundingHint(e.room(limit))
	case e.Err == nil && e.Allowed > 0:
		// The cap refused the segment before the device was asked: the device's free
		// memory is beside the point.
		return fmt.Sprintf("a new %s segment would take reserved memory to %s, over the %s the memory fraction allows: raise per_process_memory_fraction in %s (or SetMemoryFraction), or free tensors",
			formatBytes(e.SegmentSize), formatBytes(e.Reserved+e.SegmentSize), formatBytes(e.Allowed), ConfigEnv)
	}
	if limit == 0 {
		return fmt.Sprintf("the device refused the request and its free memory is unknown (%s cached): free tensors, reduce the batch size, or free memory held by other processes",
			formatBytes(cached))
	}
	return fmt.Sprintf("the request needs more memory than is free on the device (%s free, %s cached): free tensors, reduce the batch size, or free memory held by other processes",
		formatBytes(e.DeviceFree), formatBytes(cached))
}
