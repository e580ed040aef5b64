package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
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
