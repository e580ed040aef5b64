package checkpoint_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// TestSegments checks the split against PyTorch's checkpoint_sequential: ⌊n/k⌋ layers
// per checkpointed segment while start < ⌊n/k⌋·(k−1), the rest in a last, plain one.
func TestSegments(t *testing.T) {
	type seg = checkpoint.Segment
	cases := []struct {
		n, k int
		want []seg
	}{
		{16, 1, []seg{{0, 16, false}}},
		{16, 2, []seg{{0, 8, true}, {8, 16, false}}},
		{16, 4, []seg{{0, 4, true}, {4, 8, true}, {8, 12, true}, {12, 16, false}}},
		{16, 3, []seg{{0, 5, true}, {5, 10, true}, {10, 16, false}}}, // the remainder goes last
		{10, 4, []seg{{0, 2, true}, {2, 4, true}, {4, 6, true}, {6, 10, false}}},
		{7, 7, []seg{{0, 1, true}, {1, 2, true}, {2, 3, true}, {3, 4, true}, {4, 5, true}, {5, 6, true}, {6, 7, false}}},
		{1, 1, []seg{{0, 1, false}}},
	}
	for _, c := range cases {
		got, err := checkpoint.Segments(c.n, c.k)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "n=%d k=%d", c.n, c.k)
	}
	for _, bad := range [][2]int{{16, 0}, {16, 17}, {0, 1}, {3, -1}} {
		_, err := checkpoint.Segments(bad[0], bad[1])
		require.ErrorIs(t, err, checkpoint.ErrSegments, "n=%d k=%d", bad[0], bad[1])
		assert.Contains(t, err.Error(), fmt.Sprintf("%d segments of %d layers", bad[1], bad[0]))
	}
}

// keptUnits is checkpoint_sequential's count (docs/checkpoint.md) of activations kept after the forward of
// Sequential(k) over n layers that each save their input: the k−1 segment boundaries
// and the last segment's inputs and output (the network's input excluded).
func keptUnits(n, k int) int64 {
	return int64((k - 1) + (n - (k-1)*(n/k)))
}

// TestKeptUnitsFormula checks the formula against PyTorch's worked values
// (docs/checkpoint.md), so the
// memory tests below compare with PyTorch's arithmetic, not with a copy of our own.
func TestKeptUnitsFormula(t *testing.T) {
	want16 := map[int]int64{1: 16, 2: 9, 3: 8, 4: 7, 5: 8, 8: 9, 16: 16}
	for k, u := range want16 {
		assert.Equal(t, u, keptUnits(16, k), "N=16 k=%d", k)
	}
	minAt := func(n int) (int, int64) {
		bk, bu := 0, int64(1<<62)
		for k := 1; k <= n; k++ {
			if u := keptUnits(n, k); u < bu {
				bk, bu = k, u
			}
		}
		return bk, bu
	}
	k, u := minAt(64)
	assert.Equal(t, 8, k)
	assert.Equal(t, int64(15), u)
	k, u = minAt(100)
	assert.Equal(t, 10, k)
	assert.Equal(t, int64(19), u)
}

// peakModel is the most the allocator holds above the parameters and the input
// during y.Sum().Backward() after Sequential(k) over n Linear layers, in bytes. act
// is one activation, w a weight, b a bias. It follows the release rules of the
// package doc: backward runs the layers last to first; at layer j's backward the
// allocator holds the result y, the loss, the activations still saved (the plain
// segment's inputs up to j while j is in it; else the inputs the live frames keep and
// the recomputed inputs of j's segment up to j), the incoming gradient, the input
// gradient being computed and the parameter gradients of layers j..n−1. A recomputed
// tensor is gone once its layer ran and a frame's inputs once its first layer ran.
// (The recompute itself holds less: its transient output stands where the input
// gradient will be, with one parameter gradient fewer.) The last layer's incoming
// gradient is Sum's: a broadcast view of the backward's seed (as big as the loss),
// which the Linear backward copies into a dense gradient.
func peakModel(n, k int, act, w, b int64) int64 {
	segs, err := checkpoint.Segments(n, k)
	if err != nil {
		panic(err)
	}
	const loss = 4
	var peak int64
	for si := len(segs) - 1; si >= 0; si-- {
		sg := segs[si]
		for j := sg.End - 1; j >= sg.Start; j-- {
			// Live activations, by the index of the layer whose output they are; -1
			// (the network's input) is not counted.
			live := map[int]bool{}
			if !sg.Checkpointed {
				for l := sg.Start; l <= j; l++ {
					live[l-1] = true
				}
			}
			for fi := 0; fi < len(segs)-1; fi++ {
				if fi <= si {
					live[segs[fi].Start-1] = true // frame fi's input
				}
			}
			if sg.Checkpointed {
				for l := sg.Start; l <= j; l++ {
					live[l-1] = true // recomputed
				}
			}
			delete(live, -1)
			held := int64(len(live)+3)*act + loss + int64(n-j)*(w+b) // + y, incoming, outgoing
			if j == n-1 {
				held += loss // the seed
			}
			peak = max(peak, held)
		}
	}
	return peak
}

// memoryRun is what one forward and backward of Sequential(k) (k 0: nn.Sequential,
// no checkpointing) over a Linear stack held, above the parameters and the input.
type memoryRun struct {
	fwd, peak, afterBackward int64
}

// runMemory builds n Linear(width→width), runs forward and backward on a
// [batch, width] input requiring grad, asserts the moments that do not depend on k
// (parameters + input before; parameters + gradients after the scope closes; nothing
// after the model is released) and returns the others.
func runMemory(t *testing.T, dev device.Device, n, width, batch, k int) memoryRun {
	a := tensortest.Allocator(t, dev)
	m := linears(dev, n, width, 1)
	params := nn.ParameterBytes(m)
	s := newScope(2)
	x := input(s, dev, batch, width)
	start := tensortest.Requested(t, dev)
	require.Equal(t, params+x.Bytes(), start, "before the forward: the parameters and the input")
	a.ResetPeakStats()

	y := forward(m, checkpoint.Config{}, k, x)
	var r memoryRun
	r.fwd = tensortest.Requested(t, dev) - start
	y.Sum().Backward()
	r.peak = tensortest.PeakRequested(t, dev) - start
	r.afterBackward = tensortest.Requested(t, dev) - start
	require.Equal(t, params, nn.GradBytes(m), "every parameter has its gradient")

	s.Close()
	require.Equal(t, 2*params, tensortest.Requested(t, dev), "after the scope closes: parameters and gradients, nothing of the step")
	m.Release()
	tensortest.RequireEmpty(t, dev)
	return r
}

// TestSequentialMemoryFullSize is PyTorch's measurement (docs/checkpoint.md) on the
// meta device: 16 × Linear(1024,
// 1024), batch 1024, fp32, input requiring grad. After the forward PyTorch keeps 64 /
// 36 / 28 / 36 / 64 MiB for k = 1 / 2 / 4 / 8 / 16 (without checkpointing 64): so do
// we, exactly. After backward: the gradients, the input's gradient, y and the loss.
func TestSequentialMemoryFullSize(t *testing.T) {
	const n, width, batch = 16, 1024, 1024
	const act = int64(batch * width * 4)
	w, b := int64(width*width*4), int64(width*4)
	pytorch := map[int]int64{0: 64 * mib, 1: 64 * mib, 2: 36 * mib, 4: 28 * mib, 8: 36 * mib, 16: 64 * mib}
	for _, k := range []int{0, 1, 2, 4, 8, 16} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			dev := tensortest.Meta(t)
			r := runMemory(t, dev, n, width, batch, k)
			assert.Equal(t, pytorch[k], r.fwd, "kept after the forward")
			if k > 0 {
				assert.Equal(t, keptUnits(n, k)*act, r.fwd)
			}
			// Dominated by the end of backward (B = W): y, the incoming gradient and
			// the input's gradient, and all 16 weight and bias gradients — 76.0625 MiB
			// for every k (PyTorch 2.11 on the H200: 84.06 MiB for every k).
			assert.Equal(t, peakModel(n, max(k, 1), act, w, b), r.peak, "peak during backward")
			assert.Equal(t, 3*act+16*(w+b)+4, r.peak)
			assert.Equal(t, 16*(w+b)+2*act+4, r.afterBackward, "after backward: gradients, the input's gradient, y, the loss")
		})
	}
}

// TestSequentialMemoryActivationDominated is PyTorch's benchmark (docs/checkpoint.md) on
// the meta device:
// 16 × Linear(2048, 2048), input 8192 × 2048, where activations (64 MiB) outweigh
// weights (16 MiB), so checkpointing lowers the peak too. PyTorch 2.11 (H200): kept
// 1024 / 576 / 448 / 576 / 1024 MiB, peak 1248.0 / 848.1 / 672.0 / 800.0 / 1248.0 MiB
// for k = 1 / 2 / 4 / 8 / 16. Kept is the same here; the peak is 80 MiB (one
// activation and one weight gradient) lower at every k: 1168.01 / 784.07 / 592.10 /
// 720.01 / 1168.01 MiB.
func TestSequentialMemoryActivationDominated(t *testing.T) {
	const n, width, batch = 16, 2048, 8192
	const act = int64(batch * width * 4)
	w, b := int64(width*width*4), int64(width*4)
	kept := map[int]int64{1: 1024 * mib, 2: 576 * mib, 4: 448 * mib, 8: 576 * mib, 16: 1024 * mib}
	torchPeak := map[int]float64{1: 1248.0, 2: 848.1, 4: 672.0, 8: 800.0, 16: 1248.0}
	for _, k := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			dev := tensortest.Meta(t)
			r := runMemory(t, dev, n, width, batch, k)
			assert.Equal(t, kept[k], r.fwd)
			assert.Equal(t, peakModel(n, k, act, w, b), r.peak)
			assert.Less(t, float64(r.peak)/float64(mib), torchPeak[k], "at least as lean as PyTorch")
		})
	}
	// Named moments of the model, checked by hand: k=1 peaks at the first layer's
	// backward (16 kept + dy + dx + dW + db); k=4 in the first segment's last layer,
	// after its recompute (y, dy, 3 recomputed, dx, 13 weight and bias gradients).
	assert.Equal(t, 18*act+w+b+8, peakModel(n, 1, act, w, b))
	assert.Equal(t, 6*act+13*(w+b)+4, peakModel(n, 4, act, w, b))
}

// TestSequentialMemorySmall runs the same moments with real data on cpu and on sim
// with a backing store, at a size where the forward computes in milliseconds, for
// every k.
func TestSequentialMemorySmall(t *testing.T) {
	const n, width, batch = 16, 32, 64
	const act = int64(batch * width * 4)
	w, b := int64(width*width*4), int64(width*4)
	for _, d := range tensortest.DataDevices(t) {
		for k := 1; k <= n; k++ {
			r := runMemory(t, d.Device, n, width, batch, k)
			assert.Equal(t, keptUnits(n, k)*act, r.fwd, "%s k=%d: kept after the forward", d.Name, k)
			assert.Equal(t, peakModel(n, k, act, w, b), r.peak, "%s k=%d: peak", d.Name, k)
			assert.Equal(t, int64(n)*(w+b)+2*act+4, r.afterBackward, "%s k=%d: after backward", d.Name, k)
		}
	}
}

// TestSequentialGradients: checkpointing changes no gradient, bit for bit. The
// recompute runs the same kernels on the same inputs, so it regenerates every saved
// tensor exactly, and backward then runs the same node functions in the same order on
// them: exact equality is the right test, not a tolerance.
func TestSequentialGradients(t *testing.T) {
	const n, width, batch = 12, 16, 8
	for _, d := range tensortest.DataDevices(t) {
		run := func(k int) (param [][]float32, in []float32) {
			m := linears(d.Device, n, width, 3)
			defer m.Release()
			s := newScope(4)
			defer s.Close()
			x := input(s, d.Device, batch, width)
			y := forward(m, checkpoint.Config{}, k, x)
			y.Relu().Sum().Backward()
			return grads(m), tensor.ToSlice[float32](x.Grad())
		}
		wantParams, wantIn := run(0)
		for k := 1; k <= n; k++ {
			gotParams, gotIn := run(k)
			require.Equal(t, wantParams, gotParams, "%s k=%d: parameter gradients", d.Name, k)
			require.Equal(t, wantIn, gotIn, "%s k=%d: input gradient", d.Name, k)
		}
		tensortest.RequireEmpty(t, d.Device)
	}
}

// TestSequentialDropout: dropout inside checkpointed segments draws the same masks in
// the recompute as in the forward, so gradients equal the plain run's with the same
// seed, and the generator continues afterwards as if nothing had been redrawn. With
// SkipRNGState the recompute draws new masks and the gradients differ.
func TestSequentialDropout(t *testing.T) {
	const width, batch = 16, 8
	for _, d := range tensortest.DataDevices(t) {
		run := func(k int, c checkpoint.Config) ([][]float32, uint64) {
			init := nn.Init{Device: d.Device, Gen: tensor.NewGenerator(5)}
			m := nn.NewSequential()
			for range 3 {
				m.Children = append(m.Children, nn.NewLinear(init, width, width, true), nn.NewDropout(0.5))
			}
			defer m.Release()
			gen := tensor.NewGenerator(6)
			s := tensor.NewScope(tensor.WithGenerator(gen))
			defer s.Close()
			x := input(s, d.Device, batch, width)
			y := forward(m, c, k, x)
			y.Sum().Backward()
			return grads(m), gen.Uint64()
		}
		want, wantNext := run(0, checkpoint.Config{})
		for _, k := range []int{2, 3, 6} {
			got, next := run(k, checkpoint.Config{})
			require.Equal(t, want, got, "%s k=%d", d.Name, k)
			require.Equal(t, wantNext, next, "%s k=%d: the generator's next draw", d.Name, k)
		}
		got, _ := run(3, checkpoint.Config{SkipRNGState: true})
		require.NotEqual(t, want, got, "%s: without the state restored the masks differ", d.Name)
		tensortest.RequireEmpty(t, d.Device)
	}
}

func TestSequentialErrors(t *testing.T) {
	dev := tensortest.CPU(t)
	m := linears(dev, 4, 8, 1)
	defer m.Release()
	s := newScope(1)
	defer s.Close()
	x := input(s, dev, 2, 8)
	for _, k := range []int{0, 5, -2} {
		err := tensor.Try(func() { checkpoint.Sequential(layersOf(m), k, x) })
		require.ErrorIs(t, err, checkpoint.ErrSegments, "k=%d", k)
		var te *tensor.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "checkpoint.Sequential", te.Op)
	}
	err := tensor.Try(func() { checkpoint.Sequential([]checkpoint.Layer(nil), 1, x) })
	require.ErrorIs(t, err, checkpoint.ErrSegments)
	assert.Equal(t, x.Bytes(), tensortest.Requested(t, dev)-nn.ParameterBytes(m), "a refused call allocates nothing")
}

// TestSequentialOfFunctions: plain functions are layers through LayerFunc. The
// checkpointed segment's functions run again in backward (both of them: the second
// one's tanh computes before it saves its output, where the early stop ends the run),
// and the gradient is the plain run's, bit for bit.
func TestSequentialOfFunctions(t *testing.T) {
	dev := tensortest.CPU(t)
	calls := 0
	tanh := checkpoint.LayerFunc(func(x *tensor.Tensor) *tensor.Tensor {
		calls++
		return x.Tanh()
	})
	layers := []checkpoint.Layer{tanh, tanh, tanh, tanh}
	run := func(k int) []float32 {
		calls = 0
		s := newScope(1)
		defer s.Close()
		x := input(s, dev, 2, 3)
		y := checkpoint.Sequential(layers, k, x)
		assert.Equal(t, 4, calls, "k=%d: the forward runs each layer once", k)
		y.Sum().Backward()
		return tensor.ToSlice[float32](x.Grad())
	}
	want := run(1)
	assert.Equal(t, 4, calls, "one plain segment: nothing runs again")
	assert.Equal(t, want, run(2))
	assert.Equal(t, 6, calls, "the checkpointed segment [0, 2) runs again in backward")
	tensortest.RequireEmpty(t, dev)
}

// Sequential takes an *nn.Sequential as PyTorch's checkpoint_sequential takes an
// nn.Sequential: its children are the layers (a nested Sequential is one layer), with
// the gradients of the list form and of the plain forward.
func TestSequentialOfAnNNSequential(t *testing.T) {
	d := tensortest.CPU(t)
	m := linears(d, 4, 8, 5)
	nested := nn.NewSequential(m.Children[0], nn.NewSequential(m.Children[1], nn.ReLU{}), m.Children[2], m.Children[3])
	run := func(f func(x *tensor.Tensor) *tensor.Tensor) [][]float32 {
		s := newScope(3)
		defer s.Close()
		f(input(s, d, 4, 8)).Sum().Backward()
		g := grads(m)
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
		return g
	}
	plain := run(nested.Forward)
	require.Equal(t, plain, run(func(x *tensor.Tensor) *tensor.Tensor { return checkpoint.Sequential(nested, 2, x) }))
	require.Equal(t, plain, run(func(x *tensor.Tensor) *tensor.Tensor { return checkpoint.Sequential(layersOf(nested), 2, x) }))
	require.Equal(t, plain, run(func(x *tensor.Tensor) *tensor.Tensor {
		return checkpoint.SequentialWith(checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpLinear)}, nested, 4, x)
	}))
	s := newScope(1)
	err := tensor.Try(func() { checkpoint.Sequential((*nn.Sequential)(nil), 1, input(s, d, 1, 8)) })
	require.ErrorIs(t, err, checkpoint.ErrSegments)
	s.Close()
	m.Release()
	tensortest.RequireEmpty(t, d)
}

// opNames is an OpHook that lists the ops a scope ran.
type opNames struct{ ops []string }

func (o *opNames) OpBegin(op string, _ device.Device) uint64 { o.ops = append(o.ops, op); return 0 }
func (o *opNames) OpEnd(uint64)                              {}

// TestSequentialFoldsLinearReLU: Sequential runs a Linear and the ReLU after it as one
// op (tensor.LinearActivation), as nn.Sequential does, in the forward and in each
// segment's recompute, and the gradients are the plain run's bit for bit. Run layer by
// layer, a checkpointed MLP cost a separate ReLU pass and the product's own output
// for each hidden layer, twice.
func TestSequentialFoldsLinearReLU(t *testing.T) {
	for _, d := range tensortest.DataDevices(t) {
		m := nn.NewMLP(nn.Init{Device: d.Device, Gen: tensor.NewGenerator(7)}, nn.MLPConfig{Sizes: []int{8, 16, 16, 16, 16, 4}})
		run := func(k int) (ops []string, g [][]float32) {
			hook := &opNames{}
			s := tensor.NewScope(tensor.WithOpHook(hook), tensor.WithGenerator(tensor.NewGenerator(2)))
			x := input(s, d.Device, 4, 8)
			forward(m, checkpoint.Config{}, k, x).Sum().Backward()
			g = append(grads(m), tensor.ToSlice[float32](x.Grad()))
			for _, p := range nn.Parameters(m) {
				p.ZeroGrad(true)
			}
			s.Close()
			return hook.ops, g
		}
		_, want := run(0)
		// The MLP's 9 layers are Linear, ReLU, ... Linear: 2 and 4 segments end on a
		// ReLU, so every pair folds; 3 and 9 cut pairs apart, whose ReLUs run alone.
		for _, k := range []int{2, 4, 3, 9} {
			ops, got := run(k)
			require.Equal(t, want, got, "%s k=%d: gradients", d.Name, k)
			if k == 2 || k == 4 {
				assert.NotContains(t, ops, tensor.OpRelu, "%s k=%d: a ReLU ran as an op of its own", d.Name, k)
				assert.Contains(t, ops, tensor.OpLinearRelu, "%s k=%d", d.Name, k)
			}
		}
		m.Release()
		tensortest.RequireEmpty(t, d.Device)
	}
}

// TestSequentialSparesSegmentEnds: a checkpointed segment whose result the next segment
// holds until its own backward (as a checkpoint's input, or saved by its first op)
// keeps that result for its recomputation, which then stops before its last op's
// product. In a Linear+ReLU MLP cut into three checkpointed segments of one folded pair
// and a plain rest, every pair is spared against the same segments checkpointed one by
// one: three allocations fewer in the backward. With a scaling that saves nothing at
// the head of the plain rest, the last checkpointed segment's result is not held there,
// so that segment recomputes its pair: two fewer. The peak is never higher, and the
// gradients are the same bits.
func TestSequentialSparesSegmentEnds(t *testing.T) {
	d := tensortest.CPU(t)
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, nn.MLPConfig{Sizes: []int{8, 16, 16, 16, 16, 4}})
	double := checkpoint.LayerFunc(func(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(2) })
	for _, c := range []struct {
		name  string
		rest  []checkpoint.Layer // the plain segment
		fewer int64
	}{
		{"the rest saves its input", layersOf(nn.NewSequential(m.Children[6:]...)), 3},
		{"the rest scales its input first", append([]checkpoint.Layer{double}, layersOf(nn.NewSequential(m.Children[6:]...))...), 2},
	} {
		pairs := layersOf(nn.NewSequential(m.Children[:6]...))
		all := append(slices.Clone(pairs), c.rest...)
		oneByOne := func(x *tensor.Tensor) *tensor.Tensor {
			h := x
			for i := range 3 {
				pair := nn.NewSequential(m.Children[2*i], m.Children[2*i+1])
				next := checkpoint.Checkpoint(pair.Forward, h)
				if h != x {
					h.Release()
				}
				h = next
			}
			for _, l := range c.rest {
				next := l.Forward(h)
				h.Release()
				h = next
			}
			return h
		}
		run := func(f func(x *tensor.Tensor) *tensor.Tensor) (allocs, peak int64, g [][]float32) {
			s := newScope(3)
			x := input(s, d, 4, 8)
			loss := f(x).Sum()
			a := tensortest.Allocator(t, d)
			before := a.Stats().Allocation[0].Allocated
			start := tensortest.Requested(t, d)
			a.ResetPeakStats()
			loss.Backward()
			allocs = a.Stats().Allocation[0].Allocated - before
			peak = tensortest.PeakRequested(t, d) - start
			g = append(grads(m), tensor.ToSlice[float32](x.Grad()))
			for _, p := range nn.Parameters(m) {
				p.ZeroGrad(true)
			}
			s.Close()
			return allocs, peak, g
		}
		wantAllocs, wantPeak, want := run(oneByOne)
		// Four segments of 9 or 10 layers: the three pairs, then the rest.
		allocs, peak, got := run(func(x *tensor.Tensor) *tensor.Tensor { return checkpoint.Sequential(all, 4, x) })
		require.Equal(t, want, got, "%s: gradients", c.name)
		assert.Equal(t, wantAllocs-c.fewer, allocs, "%s: allocations in the backward", c.name)
		assert.LessOrEqual(t, peak, wantPeak, "%s: peak during the backward", c.name)
	}
	m.Release()
	tensortest.RequireEmpty(t, d)
}

// TestSequentialKeepsNoResultUnderSaveOnCPU: under SaveOnCPU the next segment keeps its
// input in host memory, so a segment keeps no result on the device for its
// recomputation: after the forward the device holds what the segments checkpointed one
// by one leave there, and the gradients are theirs.
func TestSequentialKeepsNoResultUnderSaveOnCPU(t *testing.T) {
	gpu := tensortest.Sim(t, 1<<30, true)
	host, err := pinned.New(gpu)
	require.NoError(t, err)
	defer host.Close()
	m := nn.NewMLP(nn.Init{Device: gpu, Gen: tensor.NewGenerator(7)}, nn.MLPConfig{Sizes: []int{8, 16, 16, 16, 16, 4}})
	pair := func(i int) func(x *tensor.Tensor) *tensor.Tensor {
		return nn.NewSequential(m.Children[2*i], m.Children[2*i+1]).Forward
	}
	oneByOne := func(x *tensor.Tensor) *tensor.Tensor {
		h := x
		for i := range 3 {
			next := checkpoint.Checkpoint(pair(i), h)
			if h != x {
				h.Release()
			}
			h = next
		}
		y := nn.NewSequential(m.Children[6:]...).Forward(h)
		h.Release()
		return y
	}
	run := func(f func(x *tensor.Tensor) *tensor.Tensor) (onDevice int64, g [][]float32) {
		root := newScope(3)
		s := checkpoint.SaveOnCPU(root, host)
		x := input(s, gpu, 4, 8)
		loss := f(x).Sum()
		onDevice = tensortest.Requested(t, gpu)
		loss.Backward()
		g = append(grads(m), tensor.ToSlice[float32](x.Grad()))
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
		root.Close()
		return onDevice, g
	}
	wantBytes, want := run(oneByOne)
	bytes, got := run(func(x *tensor.Tensor) *tensor.Tensor { return checkpoint.Sequential(m, 4, x) })
	require.Equal(t, want, got, "gradients")
	assert.Equal(t, wantBytes, bytes, "device bytes after the forward")
	m.Release()
	tensortest.RequireEmpty(t, gpu)
}

// TestSequentialKeptResultWrittenInPlace: a segment's result that the plain segment's
// first op saved and then wrote in place (through a detached handle) is not handed to
// the recomputation unseen: the backward fails on the changed version first, as it does
// where no segment keeps it.
func TestSequentialKeptResultWrittenInPlace(t *testing.T) {
	d := tensortest.CPU(t)
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, nn.MLPConfig{Sizes: []int{8, 16, 16, 16, 16, 4}})
	lin := m.Children[6].(*nn.Linear)
	writes := checkpoint.LayerFunc(func(x *tensor.Tensor) *tensor.Tensor {
		y := lin.Forward(x) // saves x, the last checkpointed segment's result
		alias := x.Detach() // x is a ReLU's output: the graph refuses a write on it
		alias.ClampInPlace(0, 0.5)
		alias.Release()
		return y
	})
	layers := append(layersOf(nn.NewSequential(m.Children[:6]...)), writes, m.Children[7], m.Children[8])
	s := newScope(3)
	loss := checkpoint.Sequential(layers, 4, input(s, d, 4, 8)).Sum()
	err := tensor.Try(func() { loss.Backward() })
	require.ErrorIs(t, err, autograd.ErrModifiedInPlace)
	s.Close()
	m.Release()
	tensortest.RequireEmpty(t, d)
}
