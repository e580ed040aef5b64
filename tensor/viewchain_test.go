package tensor_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/tensor"
)

// refView is the reference of a chain of view ops: the shape, and for each element in
// row-major order the position in the original tensor it shows.
type refView struct {
	shape []int
	idx   []int
}

// remap makes the view of shape whose element at multi-index i is r's element at
// from(i).
func (r refView) remap(shape []int, from func(i []int) []int) refView {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := refView{shape: shape, idx: make([]int, n)}
	i := make([]int, len(shape))
	for k := range n {
		rem := k
		for a := len(shape) - 1; a >= 0; a-- {
			i[a] = rem % shape[a]
			rem /= shape[a]
		}
		o := from(i)
		flat := 0
		for a, d := range r.shape {
			flat = flat*d + o[a]
		}
		out.idx[k] = r.idx[flat]
	}
	return out
}

// step applies one random view op valid for the current shape to x and to the
// reference, and names it.
func step(rng *rand.Rand, x *tensor.Tensor, r refView) (*tensor.Tensor, refView, string) {
	rank := len(r.shape)
	for {
		switch rng.IntN(7) {
		case 0: // Transpose
			if rank < 2 {
				continue
			}
			a, b := rng.IntN(rank), rng.IntN(rank)
			shape := slices.Clone(r.shape)
			shape[a], shape[b] = shape[b], shape[a]
			return x.Transpose(a, b), r.remap(shape, func(i []int) []int {
				o := slices.Clone(i)
				o[a], o[b] = o[b], o[a]
				return o
			}), fmt.Sprintf("Transpose(%d, %d)", a, b)
		case 1: // Permute
			perm := rng.Perm(rank)
			shape := make([]int, rank)
			for k, p := range perm {
				shape[k] = r.shape[p]
			}
			return x.Permute(perm...), r.remap(shape, func(i []int) []int {
				o := make([]int, rank)
				for k, p := range perm {
					o[p] = i[k]
				}
				return o
			}), fmt.Sprintf("Permute%v", perm)
		case 2: // Slice
			if rank == 0 {
				continue
			}
			a := rng.IntN(rank)
			n := r.shape[a]
			if n == 0 {
				continue
			}
			s := rng.IntN(n)
			e := s + 1 + rng.IntN(n-s)
			shape := slices.Clone(r.shape)
			shape[a] = e - s
			return x.Slice(a, s, e), r.remap(shape, func(i []int) []int {
				o := slices.Clone(i)
				o[a] += s
				return o
			}), fmt.Sprintf("Slice(%d, %d, %d)", a, s, e)
		case 3: // Expand a size-1 dimension, or add a leading one
			shape := slices.Clone(r.shape)
			lead := 0
			ones := []int{}
			for a, d := range shape {
				if d == 1 {
					ones = append(ones, a)
				}
			}
			if len(ones) > 0 && rng.IntN(2) == 0 {
				shape[ones[rng.IntN(len(ones))]] = 2 + rng.IntN(2)
			} else if rank < 5 {
				lead = 1
				shape = append([]int{2}, shape...)
			} else {
				continue
			}
			return x.Expand(shape...), r.remap(shape, func(i []int) []int {
				o := slices.Clone(i[lead:])
				for a := range o {
					if r.shape[a] == 1 {
						o[a] = 0
					}
				}
				return o
			}), fmt.Sprintf("Expand%v", shape)
		case 4: // Unsqueeze
			if rank >= 5 {
				continue
			}
			a := rng.IntN(rank + 1)
			shape := slices.Insert(slices.Clone(r.shape), a, 1)
			return x.Unsqueeze(a), r.remap(shape, func(i []int) []int {
				return slices.Delete(slices.Clone(i), a, a+1)
			}), fmt.Sprintf("Unsqueeze(%d)", a)
		case 5: // Squeeze
			a := slices.Index(r.shape, 1)
			if a < 0 {
				continue
			}
			shape := slices.Delete(slices.Clone(r.shape), a, a+1)
			return x.Squeeze(a), r.remap(shape, func(i []int) []int {
				return slices.Insert(slices.Clone(i), a, 0)
			}), fmt.Sprintf("Squeeze(%d)", a)
		case 6: // Reshape to the row-major split of the elements into two
			n := len(r.idx)
			if n == 0 {
				continue
			}
			var divs []int
			for k := 1; k <= n; k++ {
				if n%k == 0 {
					divs = append(divs, k)
				}
			}
			k := divs[rng.IntN(len(divs))]
			return x.Reshape(k, n/k), refView{shape: []int{k, n / k}, idx: r.idx}, fmt.Sprintf("Reshape(%d, %d)", k, n/k)
		}
	}
}

// Random chains of view ops place the elements as a reference gather does, and the
// gradient of Σ view·w reaches each element of the original as the sum of the weights
// of every place the chain shows it (Expand repeats elements; Slice drops some).
func TestRandomViewChainsValuesAndGradients(t *testing.T) {
	d := newCPU(t)
	rng := rand.New(rand.NewPCG(7, 7))
	data := make([]float32, 24)
	for i := range data {
		data[i] = float32(i)
	}
	for chain := range 300 {
		s := tensor.NewScope()
		x := f32(s, d, data, 2, 3, 4).SetRequiresGrad(true)
		r := refView{shape: []int{2, 3, 4}, idx: make([]int, 24)}
		for i := range r.idx {
			r.idx[i] = i
		}
		v := x
		var names []string
		for range 1 + rng.IntN(6) {
			var name string
			v, r, name = step(rng, v, r)
			names = append(names, name)
		}
		want := make([]float32, len(r.idx))
		w := make([]float32, len(r.idx))
		grad := make([]float32, 24)
		for k, i := range r.idx {
			want[k] = data[i]
			w[k] = float32(1 + k%5)
			grad[i] += w[k]
		}
		require.Equal(t, r.shape, v.Shape(), "chain %d: %v", chain, names)
		require.Equal(t, want, vals(v), "chain %d: %v", chain, names)
		require.Equal(t, want, vals(v.Contiguous()), "chain %d: %v", chain, names)
		v.Mul(f32(s, d, w, r.shape...)).Sum().Backward()
		require.Equal(t, grad, vals(x.Grad()), "chain %d: %v", chain, names)
		s.Close()
	}
	requireEmpty(t, d)
}
