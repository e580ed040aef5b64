package tensor

import (
	"slices"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
)

// Cast returns t converted to dt (a new tensor; an alias when t already has dt). The
// gradient of a floating cast is cast back.
func (t *Tensor) Cast(dt dtype.DType) *Tensor { return castOp(begin(OpCast, t), dt) }

func castOp(c *call, dt dtype.DType) *Tensor {
	x := c.in[0]
	if !dt.IsValid() {
		c.bad(ErrDType, "invalid target dtype %v", dt)
	}
	var out *Tensor
	if x.dt == dt {
		out = c.view(x, x.shape, x.strides, x.offset)
	} else {
		out = c.alloc(dt, x.shape)
		c.k.Copy(out.operand(), x.operand())
	}
	if c.recording() && dt.IsFloat() {
		c.record(identityBackward{}, out)
	}
	return c.done(out)
}

// identityBackward passes the gradient on; bwd.set casts it to the input's type.
type identityBackward struct{}

func (identityBackward) backward(b *bwd) { b.set(0, b.g) }

// Clone returns a contiguous copy of t with its own storage.
func (t *Tensor) Clone() *Tensor {
	c := begin("Clone", t)
	x := c.in[0]
	out := c.alloc(x.dt, x.shape)
	c.k.Copy(out.operand(), x.operand())
	if c.recording() {
		c.record(identityBackward{}, out)
	}
	return c.done(out)
}

// Contiguous returns t if its elements are row-major and dense (as a new handle), a
// contiguous copy otherwise.
func (t *Tensor) Contiguous() *Tensor {
	t.live(OpContiguous)
	if !t.IsContiguous() {
		return t.Clone()
	}
	c := beginView(OpContiguous, t)
	x := c.in[0]
	out := c.view(x, x.shape, x.strides, x.offset)
	if c.recording() {
		c.record(identityBackward{}, out)
	}
	return c.done(out)
}

// Detach returns a new handle to t's data outside the graph: it does not require
// grad, and backward stops there. It shares the storage (and its version counter).
func (t *Tensor) Detach() *Tensor {
	c := beginView(OpDetach, t)
	x := c.in[0]
	return c.done(c.view(x, x.shape, x.strides, x.offset))
}

// To returns a contiguous copy of t on dev (a new handle to t when dev is t's device),
// owned by t's scope. It copies in every direction: between host memory and a GPU,
// between GPUs, between the host devices (cpu, a simulated device with a backing
// store); a copy from a device that keeps no data (meta) to one that does is an
// ErrNoData error. A contiguous t needs no kernels on either device (the driver
// copies); a strided one is made contiguous on its own device first. The gradient
// flows back to t's device.
func (t *Tensor) To(dev device.Device) *Tensor {
	c := beginView(OpTo, t)
	x := c.in[0]
	if dev == x.st.dev {
		out := c.view(x, x.shape, x.strides, x.offset)
		if c.recording() {
			c.record(identityBackward{}, out)
		}
		return c.done(out)
	}
	src := x
	if !x.IsContiguous() {
		// A contiguous copy on x's device, a temporary of this op: not the Clone op, which
		// would record a node and be offered to the autocast policy (which may change its
		// type, and the bytes copied with it). Its kernels stay out of c.k, which would
		// make To an op that computed for the saved hooks' OpCache (a view never is).
		k := kernelsFor(OpTo, x.st.dev, c.in)
		src = c.alloc(x.dt, x.shape)
		c.scratch = append(c.scratch, src)
		k.Copy(src.operand(), x.operand())
	}
	n := src.Bytes()
	st, err := newStorage(dev, nil, n, c.op, c.s.m.lifetime, nil)
	if err != nil {
		c.abort()
		fail(OpTo, err, c.in, "allocating %d bytes on %s", n, dev.Name())
	}
	out := c.handle(st, true, x.dt, slices.Clone(x.shape), rowMajor(x.shape), 0)
	c.made = append(c.made, out)
	if err := copyBytes(st, 0, src.st, int64(src.offset)*int64(src.dt.Size()), n); err != nil {
		c.bad(err, "copying %d bytes from %s to %s", n, src.st.dev.Name(), dev.Name())
	}
	if c.recording() {
		recordRule(c, toBackward{x.st.dev}, out)
	}
	return c.done(out)
}

type toBackward struct{ dev device.Device }

func (r toBackward) backward(b *bwd) { b.set(0, b.g.To(r.dev)) }

// holds reports whether every value of src converts to dst exactly: the same type, a
// float from a narrower float (F32 from F16 or BF16, F64 from any), an integer from a
// narrower one (Bool is the narrowest), F64 from I32.
func holds(dst, src dtype.DType) bool {
	switch {
	case dst == src, src == dtype.Bool:
		return true
	case dst == dtype.F64:
		return src != dtype.I64
	case dst == dtype.F32:
		return src.Is16()
	case dst == dtype.I64:
		return src == dtype.I32
	}
	return false
}
