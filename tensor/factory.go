package tensor

import (
	"math"
	"slices"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// newFactory starts a factory op in s on dev (with dev's kernels when compute is set)
// and allocates its result.
func (s *Scope) newFactory(op string, dev device.Device, dt dtype.DType, shape []int, compute bool) (*call, *Tensor) {
	if !dt.IsValid() {
		fail(op, ErrDType, nil, "invalid dtype %v", dt)
	}
	for _, d := range shape {
		if d < 0 {
			fail(op, ErrShape, nil, "negative dimension in shape %v", shape)
		}
	}
	c := beginIn(s, dev, op, compute)
	return c, c.alloc(dt, slices.Clone(shape))
}

// Empty returns a tensor of dt and shape on dev owned by s whose elements are whatever
// the memory held: write every element before reading.
func (s *Scope) Empty(dev device.Device, dt dtype.DType, shape ...int) *Tensor {
	c, t := s.newFactory("Empty", dev, dt, shape, false)
	return c.done(t)
}

// Full returns a tensor of dt and shape on dev owned by s with every element v, a
// constant (the package doc's conversion rules): rounded to nearest for a floating dt,
// an ErrDType error when it overflows dt or, for an integer or Bool dt, is not one of
// its values.
func (s *Scope) Full(dev device.Device, dt dtype.DType, v float64, shape ...int) *Tensor {
	if dt.IsValid() {
		checkConstant("Full", v, dt, nil)
	}
	c, t := s.newFactory("Full", dev, dt, shape, true)
	c.k.Fill(t.operand(), v)
	return c.done(t)
}

// Zeros returns a tensor of zeros of dt and shape on dev owned by s.
func (s *Scope) Zeros(dev device.Device, dt dtype.DType, shape ...int) *Tensor {
	return s.Full(dev, dt, 0, shape...)
}

// Ones returns a tensor of ones of dt and shape on dev owned by s.
func (s *Scope) Ones(dev device.Device, dt dtype.DType, shape ...int) *Tensor {
	return s.Full(dev, dt, 1, shape...)
}

// Arange returns the 1-D tensor start, start+step, … (below end for a positive step,
// above it for a negative one) of dt on dev owned by s. The values are computed in
// float64 and are constants of dt (the package doc's conversion rules): rounded once
// for a floating dt; for an integer dt start and step must be integers and every
// value in range.
func (s *Scope) Arange(dev device.Device, dt dtype.DType, start, end, step float64) *Tensor {
	count := math.Ceil((end - start) / step)
	if step == 0 || math.IsNaN(count) || math.IsInf(count, 0) || math.IsInf(step, 0) {
		fail("Arange", ErrShape, nil, "start %g, end %g, step %g: need finite bounds and a finite non-zero step", start, end, step)
	}
	// A count past int64 would convert to garbage (a negative or zero length).
	if count > math.MaxInt64/8 {
		fail("Arange", ErrShape, nil, "start %g, end %g, step %g: %g elements is too many", start, end, step, count)
	}
	n := max(int(count), 0)
	if n > 0 && dt.IsValid() {
		checkConstant("Arange", start, dt, nil)
		checkConstant("Arange", start+float64(n-1)*step, dt, nil)
		if !dt.IsFloat() && step != math.Trunc(step) {
			fail("Arange", ErrDType, nil, "step %g: the values of %v are integers", step, dt)
		}
	}
	c, t := s.newFactory("Arange", dev, dt, []int{n}, false)
	c.upload(t, func() cpu.Operand {
		if dt.IsFloat() {
			v := make([]float64, n)
			for i := range v {
				v[i] = start + float64(i)*step
			}
			return cpu.F64(v, kernels.Contiguous(n))
		}
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(start + float64(i)*step)
		}
		return cpu.I64(v, kernels.Contiguous(n))
	})
	return c.done(t)
}

// Rand returns a tensor of dt and shape on dev owned by s with values uniform in
// [0, 1), drawn from s's generator (in float64 for F64, in float32 otherwise).
func (s *Scope) Rand(dev device.Device, dt dtype.DType, shape ...int) *Tensor {
	return s.random("Rand", dev, dt, shape, false)
}

// Randn returns a tensor of dt and shape on dev owned by s with standard normal
// values, drawn from s's generator (in float64 for F64, in float32 otherwise).
func (s *Scope) Randn(dev device.Device, dt dtype.DType, shape ...int) *Tensor {
	return s.random("Randn", dev, dt, shape, true)
}

func (s *Scope) random(op string, dev device.Device, dt dtype.DType, shape []int, normal bool) *Tensor {
	g := s.generator(op)
	if !dt.IsFloat() {
		fail(op, ErrDType, nil, "random values need a floating dtype, not %v", dt)
	}
	c, t := s.newFactory(op, dev, dt, shape, false)
	c.stored(t, storeRandom(t, c.k, g, normal, 0, 1))
	return c.done(t)
}

// randomChunk is how many float32 values drawInto draws at a time for F16 or BF16
// elements (64 KiB), and randomUpload how many elements storeRandom uploads to a GPU at
// a time (16 chunks: 1 MiB of float32).
const (
	randomChunk  = 1 << 14
	randomUpload = 16 * randomChunk
)

// storeRandom writes values drawn from g into t (see fill), the values store would
// write from randomOperand's, but where t is contiguous without making them all first:
// in host memory they are drawn straight into its elements, and a GPU's are drawn into
// one staging buffer of randomUpload elements and uploaded from it, a piece at a time
// (CopyToDevice returns once its source may be reused). Made all at once, a 64M-element
// Randn made 256 MB of garbage on the Go heap on cpu, and on a GPU two host copies of
// the tensor's size, which also raised the collector's goal for the program's later
// small objects. A strided t (and a device that keeps no data) takes store's path.
func storeRandom(t *Tensor, k kernels.Backend, g *Generator, normal bool, shift, scale float64) error {
	if t.st.res == device.Meta || !t.IsContiguous() {
		return store(t, k, func() cpu.Operand { return randomOperand(g, t.dt, t.shape, normal, shift, scale) })
	}
	if err := notCapturing(t.st.dev, hostUpload); err != nil {
		return err
	}
	n, size := numel(t.shape), t.dt.Size()
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.st.res == device.Host {
		drawInto(g, t.dt, t.st.host()[t.offset*size:(t.offset+n)*size], normal, shift, scale)
		return nil
	}
	stage := alignedBytes(int64(min(n, randomUpload) * size))
	at := t.st.ptr + device.Ptr(t.offset*size)
	for i := 0; i < n; i += randomUpload {
		b := stage[:min(randomUpload, n-i)*size]
		drawInto(g, t.dt, b, normal, shift, scale)
		if err := t.st.dev.CopyToDevice(at+device.Ptr(i*size), b, 0); err != nil {
			return err
		}
	}
	return nil
}

// drawInto draws values from g, whose mu the caller holds, into b, elements of dt
// (float): straight into float32 or float64 elements, randomChunk at a time through
// float32 for F16 and BF16, converted as Copy converts.
func drawInto(g *Generator, dt dtype.DType, b []byte, normal bool, shift, scale float64) {
	size := dt.Size()
	n := len(b) / size
	switch dt {
	case dtype.F32:
		draw(g, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n), normal, shift, scale)
	case dtype.F64:
		draw(g, unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b))), n), normal, shift, scale)
	default:
		buf := make([]float32, min(n, randomChunk))
		for i := 0; i < n; i += len(buf) {
			v := buf[:min(len(buf), n-i)]
			draw(g, v, normal, shift, scale)
			l := kernels.Contiguous(len(v))
			cpu.Copy(cpu.FromBytes(dt, b[i*size:(i+len(v))*size], l), cpu.F32(v, l))
		}
	}
}

// randomOperand draws the values of a tensor of dt and shape from g (see fill): in
// float64 for F64, so its values are not float32 ones, in float32 otherwise.
func randomOperand(g *Generator, dt dtype.DType, shape []int, normal bool, shift, scale float64) cpu.Operand {
	l := kernels.Contiguous(shape...)
	if dt == dtype.F64 {
		v := make([]float64, l.Size())
		fill(g, v, normal, shift, scale)
		return cpu.F64(v, l)
	}
	v := make([]float32, l.Size())
	fill(g, v, normal, shift, scale)
	return cpu.F32(v, l)
}

// noGenerator says how to give a scope a generator.
const noGenerator = "the scope has no random generator; make it with tensor.WithGenerator(tensor.NewGenerator(seed))"

// generator is s's generator, or a panic naming op that explains how to set one.
func (s *Scope) generator(op string) *Generator {
	if s.m.gen == nil {
		fail(op, ErrScope, nil, "%s", noGenerator)
	}
	return s.m.gen
}
