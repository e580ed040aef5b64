package tensor

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// CopyToHost copies t's elements in row-major order, as the raw bytes of t's type,
// into dst, which holds exactly t.Bytes(): what an offload to host memory and a file
// writer need (the bytes are the machine's, little-endian on every platform sublet
// runs on). A strided t is read whole and laid out on the host (synchronously).
//
// On a device that implements device.PinnedHost (a GPU) the copy is ordered on stream
// 0 and may still be running when CopyToHost returns, which it reports (async): dst
// holds the data, and must stay untouched, until the stream's work has completed (a
// buffer from an alloc/pinned allocator: RecordEvent(dst, 0) before Free; or
// synchronise the device). Elsewhere the copy is complete on return. On a device that
// keeps no data nothing is copied.
func (t *Tensor) CopyToHost(dst []byte) (async bool) {
	const op = "CopyToHost"
	t.live(op)
	n := t.Bytes()
	if int64(len(dst)) != n {
		fail(op, ErrShape, []*Tensor{t}, "a buffer of %d bytes for a tensor of %d", len(dst), n)
	}
	if err := notCapturing(t.st.dev, "a copy to the host"); err != nil {
		fail(op, err, []*Tensor{t}, "")
	}
	if n == 0 || t.st.res == device.Meta {
		return false
	}
	if !t.IsContiguous() {
		b, off := t.hostBytes(op)
		cpu.Copy(cpu.FromBytes(t.dt, dst, kernels.Contiguous(t.shape...)),
			cpu.FromBytes(t.dt, b, kernels.Layout{Shape: t.shape, Strides: t.strides, Offset: off}))
		return false
	}
	off := int64(t.offset) * int64(t.dt.Size())
	if t.st.res == device.Host {
		copy(dst, t.st.host()[off:off+n])
		return false
	}
	var err error
	if ph, ok := t.st.dev.(device.PinnedHost); ok {
		err, async = ph.CopyToHostAsync(dst, t.st.ptr+device.Ptr(off), 0), true
	} else {
		err = t.st.dev.CopyToHost(dst, t.st.ptr+device.Ptr(off), 0)
	}
	if err != nil {
		fail(op, err, []*Tensor{t}, "copying %d bytes from %s", n, t.st.dev.Name())
	}
	return async
}

// FromBytes returns a contiguous tensor of dt and shape on dev owned by s holding src:
// raw elements of dt in row-major order, exactly the tensor's bytes (CopyToHost's
// inverse). On a device that implements device.PinnedHost the copy is ordered on
// stream 0, before every op on the tensor, and may still be running when FromBytes
// returns: src must stay untouched until the stream's work has completed. On a device
// that keeps no data nothing is copied.
func FromBytes(s *Scope, dev device.Device, dt dtype.DType, src []byte, shape ...int) *Tensor {
	const op = "FromBytes"
	c, t := s.newFactory(op, dev, dt, shape, false)
	n := t.Bytes()
	if int64(len(src)) != n {
		c.bad(ErrShape, "%d bytes for a %v tensor of shape %v (%d bytes)", len(src), dt, shape, n)
	}
	if n == 0 || t.st.res == device.Meta {
		return c.done(t)
	}
	if t.st.res == device.Host {
		copy(t.st.host()[:n], src)
		return c.done(t)
	}
	err := uploadBytes(dev, t.st.ptr, src)
	if err != nil {
		c.bad(err, "copying %d bytes to %s", n, dev.Name())
	}
	return c.done(t)
}

// SetBytes overwrites the elements of t, a contiguous tensor, with src, raw elements of
// t's type in row-major order (exactly t.Bytes()), in place: loading saved values into
// a parameter without a temporary on its device. It bumps t's version and refuses the
// output of a recorded op, as the other in-place ops do. On a device that implements
// device.PinnedHost the copy is asynchronous, as FromBytes's.
func (t *Tensor) SetBytes(src []byte) {
	const op = "SetBytes"
	t.live(op)
	switch n := t.Bytes(); {
	case t.node != nil:
		fail(op, ErrGrad, []*Tensor{t}, "an in-place write to the output of %s would break its gradient", t.node.Name())
	case !t.IsContiguous():
		fail(op, ErrShape, []*Tensor{t}, "the tensor has strides %v; SetBytes writes contiguous tensors", t.strides)
	case int64(len(src)) != n:
		fail(op, ErrShape, []*Tensor{t}, "%d bytes for a tensor of %d", len(src), n)
	}
	t.st.BumpVersion()
	n := t.Bytes()
	if n == 0 || t.st.res == device.Meta {
		return
	}
	off := int64(t.offset) * int64(t.dt.Size())
	if t.st.res == device.Host {
		copy(t.st.host()[off:off+n], src)
		return
	}
	err := uploadBytes(t.st.dev, t.st.ptr+device.Ptr(off), src)
	if err != nil {
		fail(op, err, []*Tensor{t}, "copying %d bytes to %s", n, t.st.dev.Name())
	}
}

// uploadBytes copies src to dst on dev for FromBytes and SetBytes: asynchronously where
// dev implements device.PinnedHost, ordered on dev's stream (a graph capture's, which
// records the copy: src must then be pinned memory, read again by every replay).
func uploadBytes(dev device.Device, dst device.Ptr, src []byte) error {
	ph, ok := dev.(device.PinnedHost)
	if !ok {
		if err := notCapturing(dev, "a synchronous upload"); err != nil {
			return err
		}
		return dev.CopyToDevice(dst, src, 0)
	}
	return ph.CopyToDeviceAsync(dst, src, streamOf(dev))
}
