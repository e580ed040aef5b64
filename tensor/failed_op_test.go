package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// refusePack is a saved-tensor hook whose Pack fails (as checkpoint's early stop does
// once it has what it recomputes for).
type refusePack struct{ packed int }

var errRefused = errors.New("pack refused")

func (r *refusePack) Pack(v autograd.Value) (autograd.Value, error) {
	r.packed++
	v.Release()
	return nil, errRefused
}

func (r *refusePack) Unpack(autograd.Value) (autograd.Value, error) { return nil, errRefused }

// An op that fails while saving for backward leaves nothing behind: its result, its
// node and the temporaries it made (the kernels' views of its operands) are released,
// on a device that computes and on meta.
func TestOpFailingToSaveReleasesWhatItMade(t *testing.T) {
	ops := map[string]func(x, w *tensor.Tensor) *tensor.Tensor{
		"Linear": func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.Linear(x, w, nil) },
		"MatMul": func(x, w *tensor.Tensor) *tensor.Tensor { return x.MatMul(w.T()) },
		"Mul":    func(x, w *tensor.Tensor) *tensor.Tensor { return x.Mul(w.Slice(0, 0, 1)) },
		"Tanh":   func(x, _ *tensor.Tensor) *tensor.Tensor { return x.Tanh() },
	}
	devs := append(dataDevices(t), tensortest.Device{Name: "meta", Device: tensortest.Meta(t)})
	for _, td := range devs {
		for name, op := range ops {
			t.Run(td.Name+"/"+name, func(t *testing.T) {
				d := td.Device
				s := tensor.NewScope()
				x := s.Ones(d, dtype.F32, 8, 4).SetRequiresGrad(true)
				w := s.Ones(d, dtype.F32, 3, 4).SetRequiresGrad(true)
				before := requested(t, d)
				hooks := &refusePack{}
				c := s.Child(tensor.WithSavedHooks(hooks))
				err := tensor.Try(func() { op(c.Bind(x), c.Bind(w)) })
				require.ErrorIs(t, err, errRefused)
				require.Equal(t, 1, hooks.packed, "the first save failed")
				require.Equal(t, before, requested(t, d), "nothing of the failed op is left")
				c.Close()
				s.Close()
				requireEmpty(t, d)
			})
		}
	}
}

// An op that runs out of memory for a temporary after it made its result releases
// them all; the step can be retried with less.
func TestOpOutOfMemoryReleasesWhatItMade(t *testing.T) {
	const rows, cols = 6144, 1024
	// x and the F16 result take a 12 MiB segment each. A softmax of x's rows reads and
	// writes them as they are; one over x's columns (a strided view) computes in an F32
	// buffer (24 MiB), which does not fit in 30 MiB.
	d := newSim(t, 30<<20, true)
	s := tensor.NewScope(tensor.NoGrad())
	x := s.Ones(d, dtype.F16, rows, cols)
	before := requested(t, d)
	x.Softmax(1).Release()
	require.Equal(t, before, requested(t, d))
	err := tensor.Try(func() { x.T().Softmax(0) })
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	require.Equal(t, before, requested(t, d), "nothing of the failed op is left")
	y := x.Slice(0, 0, rows/4).T().Softmax(0)
	require.Equal(t, dtype.F16, y.DType())
	require.InDelta(t, 1.0/cols, vals(y.Slice(0, 0, 1).Slice(1, 0, 1).Reshape(-1))[0], 1e-6)
	s.Close()
	requireEmpty(t, d)
}

// A 16-bit product converts its operands while packing: the result is the only
// allocation, at any size.
func TestHalfProductAllocatesOnlyItsResult(t *testing.T) {
	const rows, in, out = 512, 256, 384
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		d := newSim(t, 64<<20, true)
		s := tensor.NewScope(tensor.NoGrad())
		x := s.Ones(d, dt, rows, in)
		w := s.Ones(d, dt, out, in)
		a := tensortest.Allocator(t, d)
		a.ResetPeakStats()
		before := requested(t, d)
		y := tensor.Linear(x, w, nil)
		peak := a.Stats().RequestedBytes[alloc.StatAll].Peak
		require.Equal(t, before+int64(rows*out*dt.Size()), peak, "%v: no scratch beside the result", dt)
		require.Equal(t, []float32{in}, vals(y.Slice(0, 0, 1).Slice(1, 0, 1).Reshape(-1)))
		s.Close()
		requireEmpty(t, d)
	}
}
