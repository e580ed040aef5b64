package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
)

// A small op in a no-grad scope allocates on the Go heap only its result's handle and
// its storage (with the handle's leak-report record): the op's own record is recycled
// and its call stack is interned, found again each time the op runs from the same
// place. Run from a loop, as a training step runs its ops.
func TestSmallOpAllocations(t *testing.T) {
	d, s, x := countingAllocs(t, 1024)
	x.Add(x).Release() // the first run stores the call stack
	n := testing.AllocsPerRun(100, func() { x.Add(x).Release() })
	require.Equal(t, 2.0, n, "heap objects per op")
	s.Close()
	requireEmpty(t, d)
}

// A child scope opened and closed around a run of ops (a step's, a layer's) allocates
// itself and nothing else, whether it owned ten handles or a hundred: its call stack
// is interned, its list of handles and its ledger for the leak report are the room a
// closed scope gave back, and the cleanup that reads the ledger is its root's.
func TestChildScopeAllocatesOnlyItself(t *testing.T) {
	d, data, x := countingAllocs(t, 16)
	perScope := func(ops int) float64 {
		run := func() {
			s := data.Child()
			for range ops {
				x.Add(x)
			}
			s.Close()
		}
		run() // the first run grows the lists and stores the call stacks
		return testing.AllocsPerRun(20, run) - float64(2*ops)
	}
	require.Equal(t, 1.0, perScope(10), "heap objects per scope beyond its ops' own")
	require.Equal(t, 1.0, perScope(100), "heap objects per scope beyond its ops' own")
	data.Close()
	requireEmpty(t, d)
}

// countingAllocs skips t under the race detector, whose sync.Pool drops what it is
// given at random, and returns a cpu device, a no-grad scope and n float32 ones in it.
func countingAllocs(t *testing.T, n int) (device.Device, *tensor.Scope, *tensor.Tensor) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops records at random")
	}
	d := newCPU(t)
	s := tensor.NewScope(tensor.NoGrad())
	return d, s, s.Ones(d, dtype.F32, n)
}

// A view or a reduction allocates its handle and nothing for its shape and strides:
// ops take the shared copies of the layouts a loop makes again and again. A view's
// handle is a Tensor and its leak-report record; a reduction's result is a Tensor and
// its storage with its record.
func TestViewAllocations(t *testing.T) {
	d, s, x := countingAllocs(t, 32)
	m := x.Reshape(4, 8)
	for name, op := range map[string]func(){
		"Reshape": func() { m.Reshape(8, 4).Release() },
		"T":       func() { m.T().Release() },
		"Sum(0)":  func() { m.Sum(0).Release() },
	} {
		op() // the first run stores the call stack and the layout
		require.Equal(t, 2.0, testing.AllocsPerRun(100, op), "%s: heap objects per op", name)
	}
	s.Close()
	requireEmpty(t, d)
}

// A training step of a linear layer (Linear, Sum, Backward, the gradient dropped)
// allocates a fixed 22 objects, pinned so that a change adding garbage to every step
// shows. A memory profile gives: the step's handles (a forward result's Tensor apart
// from its storage, which comes with its leak-report record, a backward rule's result
// in one allocation with both; a handle no ledger reads in one allocation with its
// Tensor; the weight's gradient is its rule's result, which the leaf takes from the
// engine and reports leaked with itself), 2 nodes, each op's function and rule (one
// object), the leak report's cleanup of what each node saved (its ledger comes with
// the first saved handle), the step scope, and a few of Sum's and Expand's own. The
// engine's state, the Saved handles, the rules' runs (their records and scopes, the
// incoming gradient and the saved tensors placed in those scopes, the gradients they
// return), the seed's scope, and the shapes and strides allocate nothing.
func TestLinearStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops records at random")
	}
	d := newCPU(t)
	data := tensor.NewScope()
	x := data.Ones(d, dtype.F32, 2, 4)
	w := data.Ones(d, dtype.F32, 3, 4).AsParameter()
	step := func() {
		s := data.Child()
		tensor.Linear(x, w, nil).Sum().Backward()
		s.Close()
		w.ZeroGrad(true)
	}
	step() // the first run stores the call stacks and layouts
	require.Equal(t, 22.0, testing.AllocsPerRun(100, step), "heap objects per step")
	data.Close()
	w.Release()
	requireEmpty(t, d)
}

// A fused optimizer step over several parameters allocates nothing: its lists of
// operands and of devices are the last step's, and the kernels' constants pooled.
func TestFusedStepAllocations(t *testing.T) {
	d, s, x := countingAllocs(t, 8)
	p, g, buf := []*tensor.Tensor{x, x.Clone()}, []*tensor.Tensor{x.Clone(), x.Clone()}, []*tensor.Tensor{x.Clone(), x.Clone()}
	c := kernels.SGD{LR: 0.1, Momentum: 0.9}
	step := func() { tensor.StepSGDMulti(c, p, g, buf, []bool{false, false}) }
	step()
	require.Zero(t, testing.AllocsPerRun(100, step), "heap objects per step of two parameters")
	s.Close()
	requireEmpty(t, d)
}
