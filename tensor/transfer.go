package tensor

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// copyBytes copies n bytes from src at srcOff to dst at dstOff, whatever holds each:
// host memory by the CPU, a GPU by its driver (between two GPUs through host memory).
// A copy from a device that keeps no data into one that does is an ErrNoData error;
// into one that keeps none, there is nothing to copy. The copy is ordered on stream 0
// and complete when it returns.
func copyBytes(dst *Storage, dstOff int64, src *Storage, srcOff, n int64) error {
	if n == 0 || dst.res == device.Meta {
		return nil
	}
	if err := errors.Join(notCapturing(dst.dev, "a copy that waits for the device"), notCapturing(src.dev, "a copy that waits for the device")); err != nil {
		return err
	}
	switch src.res {
	case device.Meta:
		return fmt.Errorf("%w: copying from %s, which keeps no data, to %s", ErrNoData, src.dev.Name(), dst.dev.Name())
	case device.Host:
		b := src.host()[srcOff : srcOff+n]
		if dst.res == device.Host {
			copy(dst.host()[dstOff:dstOff+n], b)
			return nil
		}
		return dst.dev.CopyToDevice(dst.ptr+device.Ptr(dstOff), b, 0)
	}
	if err := asyncErrors(src.dev); err != nil {
		return err
	}
	if dst.res == device.Host {
		return src.dev.CopyToHost(dst.host()[dstOff:dstOff+n], src.ptr+device.Ptr(srcOff), 0)
	}
	if dst.dev == src.dev {
		return dst.dev.CopyOnDevice(dst.ptr+device.Ptr(dstOff), src.ptr+device.Ptr(srcOff), n, 0)
	}
	buf := alignedBytes(n)
	if err := src.dev.CopyToHost(buf, src.ptr+device.Ptr(srcOff), 0); err != nil {
		return err
	}
	return dst.dev.CopyToDevice(dst.ptr+device.Ptr(dstOff), buf, 0)
}

// alignedBytes returns n bytes of Go memory aligned for every element type.
func alignedBytes(n int64) []byte {
	if n == 0 {
		return []byte{}
	}
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}

// hostUpload is what a capture refuses in store and storeRandom.
const hostUpload = "an upload of values made on the host"

// upload writes the values src makes into t, a result of the call (see store).
func (c *call) upload(t *Tensor, src func() cpu.Operand) { c.stored(t, store(t, c.k, src)) }

// stored fails the call with err, an upload's into t, unless it is nil.
func (c *call) stored(t *Tensor, err error) {
	if err != nil {
		c.bad(err, "copying %d bytes to %s", t.Bytes(), t.st.dev.Name())
	}
}

// store writes the values src makes (host memory of t's shape) into t, converting as
// the Copy kernel converts; on a device that keeps no data src is not called. On a GPU
// the values are converted to t's type on the host and copied over; a strided t there
// is written through a contiguous temporary that k (t's kernels) copies in.
func store(t *Tensor, k kernels.Backend, src func() cpu.Operand) error {
	if err := notCapturing(t.st.dev, hostUpload); err != nil {
		return err
	}
	switch t.st.res {
	case device.Meta:
		return nil
	case device.Host:
		cpu.Copy(cpu.FromBytes(t.dt, t.st.host(), t.layout()), src())
		return nil
	}
	b := alignedBytes(t.Bytes())
	cpu.Copy(cpu.FromBytes(t.dt, b, kernels.Contiguous(t.shape...)), src())
	size := int64(t.dt.Size())
	if t.IsContiguous() {
		return t.st.dev.CopyToDevice(t.st.ptr+device.Ptr(int64(t.offset)*size), b, 0)
	}
	tmp, err := newStorage(t.st.dev, t.st.al, t.Bytes(), "store", alloc.LifetimeTemporary, nil)
	if err != nil {
		return err
	}
	defer tmp.release()
	if err := t.st.dev.CopyToDevice(tmp.ptr, b, 0); err != nil {
		return err
	}
	k.Copy(t.operand(), kernels.Operand{Layout: kernels.Contiguous(t.shape...), DType: t.dt, Mem: tmp.mem()})
	return nil
}

// hostBytes returns the bytes of t's storage from its first element to its last (the
// span of its layout) as host memory the CPU can read, with the offset of t's first
// element in them: the storage's own bytes on host memory, a copy downloaded from a
// GPU (which synchronises, and panics naming op with what the GPU's kernels found
// since the last synchronisation, or with a failed copy). t has data.
func (t *Tensor) hostBytes(op string) (b []byte, offset int) {
	if err := notCapturing(t.st.dev, "reading values back"); err != nil {
		fail(op, err, []*Tensor{t}, "")
	}
	if t.st.res == device.Host {
		return t.st.host(), t.offset
	}
	if err := asyncErrors(t.st.dev); err != nil {
		fail(op, err, []*Tensor{t}, "an earlier op on %s failed", t.st.dev.Name())
	}
	size := int64(t.dt.Size())
	span := int64(t.layout().Span()-t.offset) * size
	b = alignedBytes(span)
	if span > 0 {
		if err := t.st.dev.CopyToHost(b, t.st.ptr+device.Ptr(int64(t.offset)*size), 0); err != nil {
			fail(op, err, []*Tensor{t}, "copying %d bytes from %s", span, t.st.dev.Name())
		}
	}
	return b, 0
}
