package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
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
