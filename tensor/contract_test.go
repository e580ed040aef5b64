package tensor_test

// The contract at the tensor level (DESIGN.md "Ownership and release"), shown with a
// hand-built two-layer MLP: memory at named moments, no_grad, the seeds' leak, two
// goroutines at once.

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// mlp is Linear(in, hidden) → ReLU → Linear(hidden, classes).
type mlp struct {
	w1, b1, w2, b2 *tensor.Tensor
	in, hidden, k  int
}

func newMLP(d device.Device, seed uint64, in, hidden, classes int) *mlp {
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(seed)), tensor.NoGrad())
	defer s.Close()
	param := func(scale float64, shape ...int) *tensor.Tensor {
		return s.Randn(d, dtype.F32, shape...).MulScalar(scale).AsParameter()
	}
	return &mlp{
		w1: param(0.3, hidden, in), b1: param(0.1, hidden),
		w2: param(0.3, classes, hidden), b2: param(0.1, classes),
		in: in, hidden: hidden, k: classes,
	}
}

func (m *mlp) params() []*tensor.Tensor { return []*tensor.Tensor{m.w1, m.b1, m.w2, m.b2} }

func (m *mlp) paramBytes() int64 { return int64(m.hidden*m.in+m.hidden+m.k*m.hidden+m.k) * 4 }

// forward runs each layer in its own child scope and releases the hidden activation
// once the next layer consumed it, as nn.Sequential does.
func (m *mlp) forward(x *tensor.Tensor) *tensor.Tensor {
	h := tensor.Layer(x, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Linear(x, m.w1, m.b1).Relu() })
	defer h.Release()
	return tensor.Layer(h, func(h *tensor.Tensor) *tensor.Tensor { return tensor.Linear(h, m.w2, m.b2) })
}

func (m *mlp) loss(x, labels *tensor.Tensor) *tensor.Tensor {
	logits := m.forward(x)
	defer logits.Release()
	return tensor.CrossEntropy(logits, labels)
}

// sgd updates the parameters in place (no scope, nothing recorded) and drops the
// gradients.
func (m *mlp) sgd(lr float64) {
	for _, p := range m.params() {
		p.AddScaled(-lr, p.Grad())
		p.ZeroGrad(true)
	}
}

func (m *mlp) release() {
	for _, p := range m.params() {
		p.Release()
	}
}

// batch makes a seeded synthetic classification batch in s: x [b, in], the label of
// a row is the index of its largest of the first k features.
func batch(s *tensor.Scope, d device.Device, seed uint64, b, in, k int) (x, labels *tensor.Tensor) {
	r := rand.New(rand.NewPCG(seed, 11))
	data := make([]float32, b*in)
	lab := make([]int64, b)
	for i := range b {
		best := float32(-1e9)
		for j := range in {
			v := float32(r.NormFloat64())
			data[i*in+j] = v
			if j < k && v > best {
				best, lab[i] = v, int64(j)
			}
		}
	}
	return f32(s, d, data, b, in), tensor.FromSlice(s, d, dtype.I64, lab)
}

// metaBatch allocates a batch on a device without data.
func metaBatch(s *tensor.Scope, d device.Device, b, in int) (x, labels *tensor.Tensor) {
	return s.Empty(d, dtype.F32, b, in), s.Empty(d, dtype.I64, b)
}

func TestMemoryAtNamedMomentsFullSizeOnMeta(t *testing.T) {
	const b, in, hidden, k = 8192, 4096, 8192, 1000
	d := newSim(t, 1<<40, false)
	m := newMLP(d, 1, in, hidden, k)
	params := m.paramBytes()
	require.Equal(t, params, requested(t, d))

	s := tensor.NewScope()
	x, labels := metaBatch(s, d, b, in)
	inputs := x.Bytes() + labels.Bytes()
	loss := m.loss(x, labels)
	// Saved: x and W1 by Linear1 (x is the input), ReLU's output (Linear2 saves the same
	// storage), W2, the logits, the labels and one log-sum-exp per row (and the count of
	// rows that count) by CrossEntropy. Linear1's output died at its layer boundary.
	saved := int64(b*hidden)*4 + int64(b*k)*4 + int64(b+1)*4
	require.Equal(t, params+inputs+saved+4, requested(t, d), "after forward: params + inputs + saved activations + loss")
	require.Equal(t, 4+2+4, liveBlocks(t, d), "4 parameters, 2 inputs, ReLU out, logits, lse, loss: no hidden allocation")

	loss.Backward()
	grads := params
	require.Equal(t, params+grads+inputs+4, requested(t, d), "after backward: params + grads + what the step holds")
	s.Close()
	require.Equal(t, params+grads, requested(t, d), "after the step scope closes nothing of the step is left")
	m.sgd(0.1)
	require.Equal(t, params, requested(t, d))
	m.release()
	requireEmpty(t, d)
}

// liveBlocks counts the allocator's live blocks (each one tensor storage) and checks
// that the requested and allocated statistics are their sums.
func liveBlocks(t *testing.T, d device.Device) int {
	a := allocator(t, d)
	n := 0
	var size, req int64
	for _, seg := range a.Snapshot() {
		for _, bl := range seg.Blocks {
			if bl.State == alloc.ActiveAllocated {
				n++
				size += bl.Size
				req += bl.Requested
				require.GreaterOrEqual(t, bl.Size, a.RoundSize(bl.Requested))
			}
		}
	}
	st := a.Stats()
	require.Equal(t, st.AllocatedBytes[alloc.StatAll].Current, size)
	require.Equal(t, st.RequestedBytes[alloc.StatAll].Current, req)
	return n
}

func TestTrainingStepsWithRealDataOnCPUAndSim(t *testing.T) {
	const b, in, hidden, k = 64, 16, 32, 4
	for _, td := range dataDevices(t) {
		t.Run(td.Name, func(t *testing.T) {
			d := td.Device
			m := newMLP(d, 2, in, hidden, k)
			params := m.paramBytes()
			var losses []float64
			for step := range 30 {
				s := tensor.NewScope()
				x, labels := batch(s, d, uint64(step%4), b, in, k)
				loss := m.loss(x, labels)
				saved := int64(b*hidden+b*k+b+1) * 4 // ReLU out, logits, lse and the count
				require.Equal(t, params+x.Bytes()+labels.Bytes()+saved+4, requested(t, d))
				loss.Backward()
				require.Equal(t, 2*params+x.Bytes()+labels.Bytes()+4, requested(t, d))
				losses = append(losses, loss.Item())
				s.Close()
				m.sgd(0.5)
				require.Equal(t, params, requested(t, d))
			}
			require.Less(t, losses[len(losses)-1], 0.5*losses[0], "the MLP learns: %v", losses)
			m.release()
			requireEmpty(t, d)
		})
	}
}

func TestNoGradEvaluationRecordsNothingAndFreesAtLayerBoundaries(t *testing.T) {
	const b, in, hidden, k = 1024, 512, 2048, 10
	d := newSim(t, 1<<40, false)
	m := newMLP(d, 3, in, hidden, k)
	params := m.paramBytes()
	s := tensor.NewScope(tensor.NoGrad())
	x, labels := metaBatch(s, d, b, in)
	inputs := x.Bytes() + labels.Bytes()
	var insideLayer1 int64
	h := tensor.Layer(x, func(x *tensor.Tensor) *tensor.Tensor {
		z := tensor.Linear(x, m.w1, m.b1)
		insideLayer1 = requested(t, d)
		return z.Relu()
	})
	act := int64(b*hidden) * 4
	require.Equal(t, params+inputs+act, insideLayer1, "Linear's output exists inside the layer")
	require.Equal(t, params+inputs+act, requested(t, d), "at the boundary only the layer's output is left")
	require.False(t, h.RequiresGrad())
	logits := tensor.Layer(h, func(h *tensor.Tensor) *tensor.Tensor { return tensor.Linear(h, m.w2, m.b2) })
	h.Release()
	require.Equal(t, params+inputs+int64(b*k)*4, requested(t, d), "nothing saved the hidden activation")
	loss := tensor.CrossEntropy(logits, labels)
	logits.Release()
	require.False(t, loss.RequiresGrad())
	require.True(t, loss.IsLeaf())
	require.Equal(t, params+inputs+4, requested(t, d), "no log-sum-exp kept, no logits kept")
	s.Close()
	require.Equal(t, params, requested(t, d))
	m.release()
	requireEmpty(t, d)
}

// TestTheSeedsLeak is the classic evaluation-loop leak: accumulating the loss tensor
// (not its value) chains every iteration's graph, and with it the activations each
// iteration saved, to the running total.
func TestTheSeedsLeak(t *testing.T) {
	const b, in, hidden, k, iters = 2048, 1024, 4096, 100, 5
	perIteration := int64(b*in)*4 + int64(b)*8 + int64(b*hidden+b*k+b+1)*4 // x, labels, ReLU out, logits, lse and the count
	run := func(t *testing.T, opts []tensor.Option, accumulate func(total, loss *tensor.Tensor) *tensor.Tensor) []int64 {
		d := newSim(t, 1<<40, false)
		m := newMLP(d, 4, in, hidden, k)
		outer := tensor.NewScope(opts...)
		total := outer.Zeros(d, dtype.F32)
		var after []int64
		for range iters {
			it := outer.Child()
			x, labels := metaBatch(it, d, b, in)
			loss := m.loss(x, labels)
			next := it.Keep(accumulate(total, loss))
			total.Release()
			total = next
			it.Close()
			after = append(after, requested(t, d)-m.paramBytes())
		}
		outer.Close()
		m.release()
		requireEmpty(t, d)
		return after
	}
	t.Run("accumulating the loss tensor keeps every graph", func(t *testing.T) {
		after := run(t, nil, func(total, loss *tensor.Tensor) *tensor.Tensor { return total.Add(loss) })
		for i := 1; i < iters; i++ {
			require.Equal(t, perIteration, after[i]-after[i-1], "iteration %d grows by one forward's saved activations", i)
		}
	})
	t.Run("accumulating the detached value stays flat", func(t *testing.T) {
		after := run(t, nil, func(total, loss *tensor.Tensor) *tensor.Tensor { return total.Add(loss.Detach()) })
		for i := range iters {
			require.Equal(t, int64(4), after[i], "only the running total")
		}
	})
	t.Run("under no_grad it stays flat", func(t *testing.T) {
		after := run(t, []tensor.Option{tensor.NoGrad()}, func(total, loss *tensor.Tensor) *tensor.Tensor { return total.Add(loss) })
		for i := range iters {
			require.Equal(t, int64(4), after[i])
		}
	})
}

func TestTwoGoroutinesTwoScopesAtOnce(t *testing.T) {
	const b, in, hidden, k, steps = 32, 8, 16, 3, 12
	d := newCPU(t)
	train := func(m *mlp) []float64 {
		var losses []float64
		for step := range steps {
			s := tensor.NewScope()
			x, labels := batch(s, d, uint64(step), b, in, k)
			loss := m.loss(x, labels)
			loss.Backward()
			losses = append(losses, loss.Item())
			s.Close()
			m.sgd(0.3)
		}
		return losses
	}
	evaluate := func(m *mlp) []float64 {
		var losses []float64
		for step := range steps {
			s := tensor.NewScope(tensor.NoGrad())
			x, labels := batch(s, d, uint64(100+step), b, in, k)
			losses = append(losses, m.loss(x, labels).Item())
			s.Close()
		}
		return losses
	}
	// References, one at a time.
	ma, mb := newMLP(d, 5, in, hidden, k), newMLP(d, 6, in, hidden, k)
	wantTrain, wantEval := train(ma), evaluate(mb)
	ma.release()
	mb.release()

	ma, mb = newMLP(d, 5, in, hidden, k), newMLP(d, 6, in, hidden, k)
	var gotTrain, gotEval []float64
	var wg sync.WaitGroup
	wg.Go(func() { gotTrain = train(ma) })
	wg.Go(func() { gotEval = evaluate(mb) })
	wg.Wait()
	require.Equal(t, wantTrain, gotTrain, "training is unaffected by the evaluation next to it")
	require.Equal(t, wantEval, gotEval, "evaluation under no_grad is unaffected by the training")
	require.Nil(t, mb.w1.Grad(), "the evaluated model got no gradient")
	ma.release()
	mb.release()
	requireEmpty(t, d)
}
