package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// opLog records OpBegin and OpEnd as the hook sees them.
type opLog struct {
	events []string
	open   []uint64
	next   uint64
}

func (l *opLog) OpBegin(op string, _ device.Device) uint64 {
	l.next++
	l.open = append(l.open, l.next)
	l.events = append(l.events, "+"+op)
	return l.next
}

func (l *opLog) OpEnd(token uint64) {
	last := l.open[len(l.open)-1]
	if last != token {
		panic("OpEnd out of order")
	}
	l.open = l.open[:len(l.open)-1]
	l.events = append(l.events, "-")
}

func TestOpHookSeesEveryOpOnceAndBackward(t *testing.T) {
	d := newCPU(t)
	h := &opLog{}
	s := tensor.NewScope(tensor.WithOpHook(h))
	x := s.Ones(d, dtype.F32, 2, 2).SetRequiresGrad(true)
	y := x.Exp().Sum()
	y.Backward()
	requireOpError(t, tensor.OpAdd, tensor.ErrShape, func() { x.Add(s.Ones(d, dtype.F32, 3)) })
	require.Empty(t, h.open, "every op ended, the failed one too")
	require.Equal(t, []string{"+Full", "-", "+" + tensor.OpExp, "-", "+" + tensor.OpSum, "-"}, h.events[:6])
	require.Contains(t, h.events, "+"+tensor.OpExpand, "the backward rules' ops are reported too")
	require.Equal(t, "+"+tensor.OpAdd, h.events[len(h.events)-2], "the failed Add began and ended")
	s.Close()
	x.Release()
	requireEmpty(t, d)
}

// An op that fails before it computes (its autocast cast out of memory, a banned op,
// no generator) ends for the hook and leaves nothing it made: the casts autocast made
// for it are released with it.
func TestFailedOpEndsAndLeavesNothing(t *testing.T) {
	base := newSim(t, 1<<30, true)
	d := tensortest.NewFlaky(t, base)
	h := &opLog{}
	s := tensor.NewScope(tensor.WithOpHook(h))
	a := s.Ones(d, dtype.F32, 3, 3)
	b := s.Ones(d, dtype.F32, 3, 3)
	ac, err := amp.Autocast(s, dtype.F16)
	require.NoError(t, err)
	before := requested(t, base)

	d.Refuse(2) // a's F16 cast is the first allocation, b's the second
	requireOpError(t, tensor.OpCast, device.ErrOutOfMemory, func() { a.MatMul(b) })
	d.Refuse(0)
	require.Empty(t, h.open, "MatMul ended")
	require.Equal(t, before, requested(t, base), "a's cast went with the failed MatMul")

	requireOpError(t, tensor.OpBinaryCrossEntropy, tensor.ErrAutocastBanned, func() {
		tensor.BinaryCrossEntropy(a, b, tensor.BCEOptions{})
	})
	require.Empty(t, h.open, "the banned op ended")
	ac.Close()

	requireOpError(t, tensor.OpDropout, tensor.ErrScope, func() { a.Dropout(0.5) })
	require.Empty(t, h.open, "Dropout without a generator ended")
	require.Equal(t, before, requested(t, base))
	s.Close()
	requireEmpty(t, base)
}
