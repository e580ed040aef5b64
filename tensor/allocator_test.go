package tensor_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// budget is a program's own allocator: a caching allocator of its own over the device,
// counting calls and refusing past a byte budget.
type budget struct {
	inner         *alloc.Allocator
	limit, live   int64
	sizes         map[device.Ptr]int64
	allocs, frees int
	refusedAllocs int
}

func (b *budget) Alloc(size int64, s device.Stream) (device.Ptr, error) {
	if b.live+size > b.limit {
		b.refusedAllocs++
		return 0, fmt.Errorf("budget: %d more bytes would pass %d: %w", size, b.limit, device.ErrOutOfMemory)
	}
	p, err := b.inner.Alloc(size, s)
	if err != nil {
		return 0, err
	}
	b.allocs++
	b.live += size
	b.sizes[p] = size
	return p, nil
}

func (b *budget) Free(p device.Ptr) error {
	b.frees++
	b.live -= b.sizes[p]
	delete(b.sizes, p)
	return b.inner.Free(p)
}

// budgeted is a device whose tensors use a budget.
type budgeted struct {
	device.Device
	al *budget
}

func (d *budgeted) TensorAllocator() tensor.Allocator { return d.al }

func (d *budgeted) Bytes(p device.Ptr, n int64) ([]byte, bool) {
	return d.Device.(device.HostMemory).Bytes(p, n)
}

func TestTensorsUseTheDevicesOwnAllocator(t *testing.T) {
	base := newSim(t, 64<<20, true)
	inner, err := alloc.New(base, alloc.Config{})
	require.NoError(t, err)
	b := &budget{inner: inner, limit: 1 << 20, sizes: map[device.Ptr]int64{}}
	d := &budgeted{Device: base, al: b}
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	w := s.Randn(d, dtype.F32, 64, 64).SetRequiresGrad(true)
	x := s.Ones(d, dtype.F32, 8, 64)
	y := x.MatMul(w).Relu().Sum()
	y.Backward()
	require.Equal(t, float64(4096), float64(len(vals(w.Grad()))))
	require.Equal(t, int64(0), requested(t, base), "the device's caching allocator served nothing")
	require.Positive(t, b.allocs)
	empty := s.Zeros(d, dtype.F32, 0)
	require.Equal(t, []float32{}, vals(empty))

	// Its refusal is an out-of-memory error of the op, and the op leaves nothing.
	live := b.live
	err = tensor.Try(func() { s.Zeros(d, dtype.F32, 1<<20) })
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	var te *tensor.Error
	require.True(t, errors.As(err, &te))
	require.Equal(t, "Full", te.Op)
	require.Equal(t, live, b.live)
	s.Close()
	w.Release()
	require.Zero(t, b.live, "every tensor byte went back to the program's allocator")
	require.Equal(t, b.allocs, b.frees)
	require.Equal(t, 1, b.refusedAllocs)
	require.NoError(t, inner.EmptyCache())
	require.Zero(t, inner.Stats().ReservedBytes[alloc.StatAll].Current)

	// A wrapper that claims host memory must forward Bytes.
	bare := &struct{ device.Device }{base}
	s2 := tensor.NewScope()
	defer s2.Close()
	err = tensor.Try(func() { s2.Zeros(bare, dtype.F32, 4) })
	require.ErrorContains(t, err, "does not implement device.HostMemory")
	requireEmpty(t, bare)
}

func TestAllocationsCarryTheirOpName(t *testing.T) {
	d := newCPU(t)
	a := allocator(t, d)
	var ops []string
	require.NoError(t, a.RecordHistory(alloc.HistoryOptions{Sink: func(e alloc.HistoryEvent) {
		if e.Action == alloc.ActionAlloc {
			ops = append(ops, e.Tag.Op)
		}
	}}))
	defer a.StopHistory()
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 3)
	x.Exp().Add(x).To(newSim(t, 64<<20, true))
	s.Close()
	require.Equal(t, []string{"Full", tensor.OpExp, tensor.OpAdd}, ops, "the cpu allocator's blocks, by op")
	requireEmpty(t, d)
}
