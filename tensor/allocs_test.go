package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// A small op in a no-grad scope allocates on the Go heap only its result's handle and
// its storage (with the handle's leak-report record): the op's own record is recycled
// and its call stack is interned, found again each time the op runs from the same
// place. Run from a loop, as a training step runs its ops.
func TestSmallOpAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops records at random")
	}
	d := newCPU(t)
	s := tensor.NewScope(tensor.NoGrad())
	x := s.Ones(d, dtype.F32, 1024)
	x.Add(x).Release() // the first run stores the call stack
	n := testing.AllocsPerRun(100, func() { x.Add(x).Release() })
	require.Equal(t, 2.0, n, "heap objects per op")
	s.Close()
	requireEmpty(t, d)
}
