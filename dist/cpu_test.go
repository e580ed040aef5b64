package dist

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// ranks runs f on every rank of a fresh group of n, each with a CPU backend and its
// own cpu device, and fails the test with the first error. Each device ends empty.
func ranks(t *testing.T, n int, f func(r int, b Backend, dev device.Device) error) {
	t.Helper()
	groups := initGroups(t, n, 10*time.Second)
	devs := make([]device.Device, n)
	for r := range devs {
		devs[r] = tensortest.CPU(t)
	}
	for r, err := range parallel(n, func(r int) error { return f(r, NewCPU(groups[r]), devs[r]) }) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
}

// wait returns the error of issuing and then of waiting.
func wait(w *Work, err error) error {
	if err != nil {
		return err
	}
	return w.Wait()
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// rankValues are rank r's elements in the reduction tests: values whose float32 sum
// depends on the order of the additions.
func rankValues(r int) []float32 {
	return []float32{float32(r) + 0.1, 1e8 * float32(1-2*(r%2)), float32(r) * 1e-7, -float32(r), float32(r*r) / 3}
}

func TestAllReduceIsTheRankOrderReductionOnEveryRank(t *testing.T) {
	const n = 4
	for _, op := range []ReduceOp{Sum, Avg, Max, Min, Prod} {
		// the reference: element by element, rank after rank, in float32
		want := rankValues(0)
		for r := 1; r < n; r++ {
			for i, x := range rankValues(r) {
				switch op {
				case Sum, Avg:
					want[i] += x
				case Prod:
					want[i] *= x
				case Max:
					want[i] = max(want[i], x)
				case Min:
					want[i] = min(want[i], x)
				}
			}
		}
		if op == Avg {
			for i := range want {
				want[i] /= n
			}
		}
		got := make([][]float32, n)
		ranks(t, n, func(r int, b Backend, dev device.Device) error {
			s := tensor.NewScope()
			defer s.Close()
			x := tensortest.F32(s, dev, rankValues(r), 5)
			if err := wait(b.AllReduce(x, op)); err != nil {
				return err
			}
			got[r] = tensortest.Values(x)
			tensortest.RequireLive(t, dev, "after the all-reduce: only x", 20)
			return nil
		})
		for r := range n {
			assert.Equal(t, bits(want), bits(got[r]), "%v on rank %d: identical bits", op, r)
		}
	}
}

func TestAllReduceOfOtherTypes(t *testing.T) {
	const n = 3
	ranks(t, n, func(r int, b Backend, dev device.Device) error {
		s := tensor.NewScope()
		defer s.Close()
		h := tensor.FromSlice(s, dev, dtype.F16, []float32{0.5 * float32(r+1), -1})
		bf := tensor.FromSlice(s, dev, dtype.BF16, []float32{float32(r), 2})
		i := tensor.FromSlice(s, dev, dtype.I64, []int64{int64(r) << 40, int64(-r)})
		j := tensor.FromSlice(s, dev, dtype.I32, []int32{int32(r + 2), 7})
		b.GroupStart()
		works := []*Work{}
		for _, c := range []struct {
			t  *tensor.Tensor
			op ReduceOp
		}{{h, Sum}, {bf, Max}, {i, Sum}, {j, Prod}} {
			w, err := b.AllReduce(c.t, c.op)
			if err != nil {
				return err
			}
			works = append(works, w)
		}
		if err := works[0].Wait(); err == nil || !assert.ErrorIs(t, err, ErrConfig) {
			return fmt.Errorf("Wait inside a group: %v", err)
		}
		if err := b.GroupEnd(); err != nil {
			return err
		}
		for _, w := range works {
			if err := w.Wait(); err != nil {
				return err
			}
		}
		assert.Equal(t, []float32{3, -3}, tensor.ToSlice[float32](h))
		assert.Equal(t, []float32{2, 2}, tensor.ToSlice[float32](bf))
		assert.Equal(t, []int64{3 << 40, -3}, tensor.ToSlice[int64](i))
		assert.Equal(t, []int32{2 * 3 * 4, 343}, tensor.ToSlice[int32](j))
		return nil
	})
}

func TestBroadcastAllGatherReduceScatter(t *testing.T) {
	const n = 3
	ranks(t, n, func(r int, b Backend, dev device.Device) error {
		s := tensor.NewScope()
		defer s.Close()
		// a transposed view as the destination: written in its own element order
		x := s.Zeros(dev, dtype.F32, 3, 2).T()
		if r == 1 {
			x.CopyFrom(tensortest.F32(s, dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3))
		}
		if err := wait(b.Broadcast(x, 1)); err != nil {
			return err
		}
		assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, tensortest.Values(x), "rank %d", r)

		in := tensortest.F32(s, dev, []float32{float32(10 * r), float32(10*r + 1)}, 2)
		all := s.Zeros(dev, dtype.F32, n, 2)
		if err := wait(b.AllGather(all, in)); err != nil {
			return err
		}
		assert.Equal(t, []float32{0, 1, 10, 11, 20, 21}, tensortest.Values(all), "rank %d", r)

		block := s.Zeros(dev, dtype.F32, 2)
		if err := wait(b.ReduceScatter(block, all.MulScalar(float64(r+1)), Sum)); err != nil {
			return err
		}
		// Σ_q (q+1)·all = 6·all; rank r keeps block r
		assert.Equal(t, []float32{float32(60 * r), float32(60*r + 6)}, tensortest.Values(block), "rank %d", r)
		return nil
	})
}

func TestCollectiveArgumentsAreCheckedOnTheCallingRank(t *testing.T) {
	g, err := Init(Config{WorldSize: 1})
	require.NoError(t, err)
	defer g.Close()
	b := NewCPU(g)
	dev := tensortest.CPU(t)
	s := tensor.NewScope()
	x := tensortest.F32(s, dev, []float32{1, 2, 3}, 3)
	ints := tensor.FromSlice(s, dev, dtype.I64, []int64{1})
	flags := tensor.FromSlice(s, dev, dtype.Bool, []uint8{1})
	gone := tensortest.F32(s, dev, []float32{1}, 1)
	gone.Release()
	meta := tensortest.F32(s, tensortest.Meta(t), []float32{1}, 1)

	for _, c := range []struct {
		name  string
		issue func() (*Work, error)
		cause error
		want  string
	}{
		{"gather sizes", func() (*Work, error) { return b.AllGather(x.Slice(0, 0, 2), x) }, tensor.ErrShape, "AllGather(float32[3]): out has 2 elements, not world size 1 × in's 3"},
		{"scatter types", func() (*Work, error) { return b.ReduceScatter(ints, x, Sum) }, tensor.ErrDType, "out is int64, in is float32"},
		{"avg of ints", func() (*Work, error) { return b.AllReduce(ints, Avg) }, ErrUnsupported, "an average of int64 elements: reduce with Sum and divide"},
		{"bools", func() (*Work, error) { return b.AllReduce(flags, Max) }, ErrUnsupported, "a reduction of bool elements"},
		{"bad op", func() (*Work, error) { return b.AllReduce(x, 9) }, ErrUnsupported, "unknown reduction ReduceOp(9)"},
		{"released", func() (*Work, error) { return b.AllReduce(gone, Sum) }, tensor.ErrReleased, "AllReduce"},
		{"nil", func() (*Work, error) { return b.Broadcast(nil, 0) }, tensor.ErrShape, "a nil tensor"},
		{"root", func() (*Work, error) { return b.Broadcast(x, 1) }, ErrConfig, "root 1 is not a rank of a group of 1"},
		{"meta device", func() (*Work, error) { return b.AllReduce(meta, Sum) }, ErrUnsupported, "sim keeps none"},
	} {
		w, err := c.issue()
		assert.Nil(t, w, c.name)
		require.ErrorIs(t, err, c.cause, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
	require.NoError(t, g.Err(), "bad arguments issue nothing and leave the group healthy")
	flagsOut := tensor.FromSlice(s, dev, dtype.Bool, []uint8{0})
	require.NoError(t, wait(b.AllGather(flagsOut, flags)), "booleans travel, they only do not reduce")
	assert.Equal(t, []uint8{1}, tensor.ToSlice[uint8](flagsOut))
	require.ErrorIs(t, b.GroupEnd(), ErrConfig)
	require.NoError(t, b.Close())
	_, err = b.AllReduce(x, Sum)
	require.ErrorIs(t, err, ErrClosed)
	s.Close()
	tensortest.RequireEmpty(t, dev)
}

func TestCollectivesOfDifferentSizesAreAMismatch(t *testing.T) {
	groups := initGroups(t, 2, 10*time.Second)
	devs := []device.Device{tensortest.CPU(t), tensortest.CPU(t)}
	errs := parallel(2, func(r int) error {
		s := tensor.NewScope()
		defer s.Close()
		return wait(NewCPU(groups[r]).AllReduce(s.Zeros(devs[r], dtype.F32, 2+r), Sum))
	})
	e := requireDistError(t, errs[0], 0, 1, ErrMismatch)
	assert.Contains(t, e.Error(), "rank 0 called AllReduce(float32[2], sum) and rank 1 called AllReduce(float32[3], sum)")
	requireDistError(t, errs[1], 1, 1, ErrMismatch)
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
}

func TestMaxAndMinLetANaNWin(t *testing.T) {
	nan := float32(math.NaN())
	for _, op := range []ReduceOp{Max, Min} {
		got := make([][]float32, 2)
		ranks(t, 2, func(r int, b Backend, dev device.Device) error {
			s := tensor.NewScope()
			defer s.Close()
			x := tensortest.F32(s, dev, [][]float32{{nan, 1, 3}, {2, nan, 4}}[r], 3)
			if err := wait(b.AllReduce(x, op)); err != nil {
				return err
			}
			got[r] = tensortest.Values(x)
			return nil
		})
		for r := range 2 {
			assert.True(t, math.IsNaN(float64(got[r][0])) && math.IsNaN(float64(got[r][1])), "%v rank %d: %v", op, r, got[r])
			assert.Equal(t, map[ReduceOp]float32{Max: 4, Min: 3}[op], got[r][2])
		}
	}
}
