package tensortest_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// recorder is a testing.TB whose failures are recorded instead of failing the test
// (require only calls Helper, Errorf and FailNow).
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; runtime.Goexit() }

// fails reports whether f fails the TB it is given (f runs on its own goroutine, as
// FailNow ends it).
func fails(t *testing.T, f func(tb testing.TB)) bool {
	r := &recorder{TB: t}
	var wg sync.WaitGroup
	wg.Go(func() { f(r) })
	wg.Wait()
	return r.failed
}

func TestRequireLiveIsExact(t *testing.T) {
	for _, td := range append(tensortest.DataDevices(t), tensortest.Device{Name: "meta", Device: tensortest.Meta(t)}) {
		t.Run(td.Name, func(t *testing.T) {
			d := td.Device
			s := tensor.NewScope()
			a := s.Zeros(d, dtype.F32, 3)
			b := s.Zeros(d, dtype.F16, 5)
			require.Equal(t, int64(22), tensortest.Requested(t, d))
			tensortest.RequireLive(t, d, "after two factories", tensortest.Sizes(a, b)...)

			require.False(t, fails(t, func(tb testing.TB) { tensortest.RequireLive(tb, d, "", 12, 10) }))
			require.True(t, fails(t, func(tb testing.TB) { tensortest.RequireLive(tb, d, "", 22) }), "two storages are not one")
			require.True(t, fails(t, func(tb testing.TB) { tensortest.RequireLive(tb, d, "", 12, 12) }), "wrong bytes")
			require.True(t, fails(t, func(tb testing.TB) { tensortest.RequireEmpty(tb, d) }))

			b.Release()
			tensortest.RequireLive(t, d, "after a release", 12)
			s.Close()
			tensortest.RequireEmpty(t, d)
		})
	}
}

func TestRequireOpError(t *testing.T) {
	d := tensortest.CPU(t)
	s := tensor.NewScope()
	x := tensortest.F32(s, d, []float32{1, 2, 3}, 3)
	require.Equal(t, []float32{1, 2, 3}, tensortest.Values(x))
	e := tensortest.RequireOpError(t, tensor.OpAdd, tensor.ErrShape, func() { x.Add(x.Reshape(3, 1).Expand(3, 2)) })
	require.Equal(t, tensor.OpAdd, e.Op)
	require.True(t, fails(t, func(tb testing.TB) { tensortest.RequireOpError(tb, tensor.OpMul, nil, func() { x.Add(x) }) }),
		"no panic is a failure")
	s.Close()
	tensortest.RequireEmpty(t, d)
}

func TestFlakyRefusesTheAllocationAskedFor(t *testing.T) {
	base := tensortest.Sim(t, 64<<20, true)
	d := tensortest.NewFlaky(t, base)
	s := tensor.NewScope()
	d.Refuse(2)
	d.Record(true)
	a := s.Zeros(d, dtype.F32, 4)
	err := tensor.Try(func() { s.Zeros(d, dtype.F32, 8) })
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	b := s.Zeros(d, dtype.F32, 8)
	require.Equal(t, 3, d.Allocs())
	tensortest.RequireLive(t, base, "on the wrapped device", 16, 32)
	a.Release()
	b.Release()
	require.Equal(t, []int64{16, 32, -16, -32}, d.Events(), "the refused one is no event")
	s.Close()
	tensortest.RequireEmpty(t, base)
}
