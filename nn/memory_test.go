package nn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// mlpCase is an MLP [in, hidden, hidden, out] with ReLU on a batch, on a device.
type mlpCase struct {
	name                string
	dev                 func(testing.TB) device.Device
	batch, in, hid, out int
}

// mlpCases are the model at full size on the meta device (memory only) and small
// with real data on the CPU.
var mlpCases = []mlpCase{
	{"meta/full", newMeta, 512, 1024, 4096, 1000},
	{"cpu/small", newCPU, 6, 5, 16, 3},
}

func (c mlpCase) build(t testing.TB) (device.Device, *nn.Sequential) {
	d := c.dev(t)
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{c.in, c.hid, c.hid, c.out}})
	return d, m
}

// inputs makes a batch (x, labels) in s.
func (c mlpCase) inputs(s *tensor.Scope, d device.Device) (x, labels *tensor.Tensor) {
	xs := make([]float32, c.batch*c.in)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i)))
	}
	x = f32(s, d, xs, c.batch, c.in)
	ls := make([]int64, c.batch)
	for i := range ls {
		ls[i] = int64(i % c.out)
	}
	return x, tensor.FromSlice(s, d, dtype.I64, ls)
}

// Sizes of what a forward makes, in bytes.
func (c mlpCase) xBytes() int64     { return int64(c.batch * c.in * 4) }
func (c mlpCase) labelBytes() int64 { return int64(c.batch * 8) }
func (c mlpCase) actBytes() int64   { return int64(c.batch * c.hid * 4) }
func (c mlpCase) logitBytes() int64 { return int64(c.batch * c.out * 4) }
func (c mlpCase) lseBytes() int64   { return int64((c.batch + 1) * 4) } // and the count of rows that count

const lossBytes = 4

// saved is what a recorded forward plus cross entropy keeps for backward: the input
// (first Linear), the two ReLU outputs (each saved once, by the ReLU and by the next
// Linear, over one storage), the logits, labels and a log-sum-exp per row and the
// count of rows that count (cross entropy). The Linear outputs before each ReLU are saved by nothing and freed at the
// layer boundary.
func (c mlpCase) saved() []int64 {
	return []int64{c.xBytes(), c.actBytes(), c.actBytes(), c.logitBytes(), c.labelBytes(), c.lseBytes()}
}

// TestMLPMemoryAtNamedMoments: after the forward the allocator holds the parameters
// and the saved activations (the caller's x, labels, logits and loss among them);
// after backward the parameters, their gradients and what the caller still holds;
// after the step's scope closes, the parameters and gradients; after ZeroGrad(true),
// the parameters.
func TestMLPMemoryAtNamedMoments(t *testing.T) {
	for _, c := range mlpCases {
		t.Run(c.name, func(t *testing.T) {
			d, m := c.build(t)
			params := paramSizes(m)
			requireLive(t, d, "after building the model", params...)

			s := tensor.NewScope()
			x, labels := c.inputs(s, d)
			logits := m.Forward(x)
			loss := nn.CrossEntropyLoss{}.Loss(logits, labels)
			require.Equal(t, 4, s.Len(), "the scope holds x, labels, logits and loss; the layers' temporaries are gone")
			requireLive(t, d, "after forward", cat(params, c.saved(), []int64{lossBytes})...)

			loss.Backward()
			requireLive(t, d, "after backward", cat(params, params,
				[]int64{c.xBytes(), c.labelBytes(), c.logitBytes(), lossBytes})...)
			require.Equal(t, nn.ParameterBytes(m), nn.GradBytes(m))

			s.Close()
			requireLive(t, d, "after the step's scope closed", cat(params, params)...)

			for _, p := range nn.Parameters(m) {
				p.ZeroGrad(false)
			}
			requireLive(t, d, "after zeroing gradients in place", cat(params, params)...)
			for _, p := range nn.Parameters(m) {
				p.ZeroGrad(true)
			}
			requireLive(t, d, "after dropping gradients", params...)
			m.Release()
			requireEmpty(t, d)
		})
	}
}

// TestNoGradEvalFreesAtLayerBoundaries: under NoGrad nothing is recorded, and the peak
// of a forward is the parameters, the caller's input and one layer's input and output.
func TestNoGradEvalFreesAtLayerBoundaries(t *testing.T) {
	for _, c := range mlpCases {
		t.Run(c.name, func(t *testing.T) {
			d, m := c.build(t)
			params := paramSizes(m)
			a := allocator(t, d)

			s := tensor.NewScope(tensor.NoGrad())
			x, _ := c.inputs(s, d)
			a.ResetPeakStats()
			base := requested(t, d)
			logits := m.Forward(x)
			require.False(t, logits.RequiresGrad(), "nothing is recorded")
			require.True(t, logits.IsLeaf())
			requireLive(t, d, "after an evaluation forward", cat(params, []int64{c.xBytes(), c.labelBytes(), c.logitBytes()})...)
			peak := peakRequested(t, d)
			require.Equal(t, base+2*c.actBytes(), peak,
				"peak = parameters + x + labels + one layer's input and output (the hidden Linear+ReLU's)")
			s.Close()

			g := tensor.NewScope()
			gx, _ := c.inputs(g, d)
			a.ResetPeakStats()
			base = requested(t, d)
			gl := m.Forward(gx)
			require.True(t, gl.RequiresGrad())
			recorded := peakRequested(t, d) - base
			require.Equal(t, 2*c.actBytes()+c.logitBytes(), recorded,
				"recording keeps both ReLU outputs (saved) alive while the logits are made; each hidden Linear and its "+
					"ReLU are one op (tensor.LinearActivation), which applies the ReLU in place of the product")
			g.Close()

			m.Release()
			requireEmpty(t, d)
		})
	}
}

// TestEvalLoopLeak is the seeds' leak at module level: an evaluation loop that never
// calls backward and sums the loss tensors keeps every iteration's graph, and so grows
// by one forward's saved activations per iteration; summing detached losses, or
// running under NoGrad, stays flat.
func TestEvalLoopLeak(t *testing.T) {
	const iters = 4
	for _, c := range mlpCases {
		for _, mode := range []string{"loss tensor", "detached", "no_grad"} {
			t.Run(fmt.Sprintf("%s/%s", c.name, mode), func(t *testing.T) {
				d, m := c.build(t)
				params := paramSizes(m)
				var opts []tensor.Option
				if mode == "no_grad" {
					opts = append(opts, tensor.NoGrad())
				}
				s := tensor.NewScope(opts...)
				total := s.Zeros(d, dtype.F32)
				var flat, prev int64
				for i := 1; i <= iters; i++ {
					it := s.Child()
					x, labels := c.inputs(it, d)
					loss := nn.CrossEntropyLoss{}.Loss(m.Forward(x), labels)
					if mode == "detached" {
						loss = loss.Detach()
					}
					next := it.Keep(total.Add(loss))
					total.Release()
					total = next
					it.Close()
					var kept []int64
					if mode == "loss tensor" {
						for range i {
							kept = append(kept, c.saved()...)
						}
					}
					requireLive(t, d, fmt.Sprintf("after iteration %d", i), cat(params, kept, []int64{lossBytes})...)
					allocated := allocator(t, d).Stats().AllocatedBytes[alloc.StatAll].Current
					if i == 1 {
						flat = allocated
					}
					if mode != "loss tensor" {
						require.Equal(t, flat, allocated, "allocated bytes stay flat")
					} else if i > 1 {
						require.Greater(t, allocated, prev, "allocated bytes grow")
					}
					prev = allocated
				}
				require.Equal(t, mode == "loss tensor", total.RequiresGrad())
				total.Release()
				requireLive(t, d, "after releasing the total: its graph goes with it", params...)
				s.Close()
				m.Release()
				requireEmpty(t, d)
			})
		}
	}
}
