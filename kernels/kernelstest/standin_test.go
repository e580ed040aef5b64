package kernelstest_test

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
	"github.com/subletml/sublet/kernels/kernelstest"
)

// TestStandIn runs the suite on a stand-in for a GPU backend: kernels/cpu behind
// device-style memory, whose blocks the suite knows by address alone (Mem.Ptr, no
// Host). The suite then takes its second leg, comparing every output with kernels/cpu
// run on host memory, as it does for kernels/cuda on a GPU machine; a case that runs
// the target's kernels on the host leg's operands, or the other way round, panics
// here instead of reading address 0 on a GPU. At the end every block the suite took
// has been given back.
func TestStandIn(t *testing.T) {
	mem := &standInMemory{blocks: map[device.Ptr][]byte{}, next: 1 << 20}
	kernelstest.Run(t, kernelstest.Target{Backend: &standIn{cpu: cpu.NewBackend(nil), mem: mem}, Memory: mem})
	require.Empty(t, mem.blocks, "blocks the suite did not free")
}

// standInMemory is device memory as the suite sees a GPU's: blocks known by made-up
// addresses, their bytes reachable only through Write and Read.
type standInMemory struct {
	mu     sync.Mutex // guards blocks and next
	blocks map[device.Ptr][]byte
	next   device.Ptr // the next block's address; never 0, so a missing block shows
}

func (m *standInMemory) Alloc(_ testing.TB, n int64) kernels.Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.next
	m.next += device.Ptr((n+4095)&^4095) + 4096 // a gap: no two blocks touch
	b := []byte{}
	if n > 0 {
		w := make([]uint64, (n+7)/8) // 8-byte aligned, as Memory promises
		b = unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
	}
	m.blocks[p] = b
	return kernels.Mem{Ptr: p, Size: n}
}

func (m *standInMemory) block(t testing.TB, mem kernels.Mem) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[mem.Ptr]
	require.True(t, ok, "no block at %#x", mem.Ptr)
	return b
}

func (m *standInMemory) Write(t testing.TB, mem kernels.Mem, b []byte) {
	copy(m.block(t, mem), b)
}

func (m *standInMemory) Read(t testing.TB, mem kernels.Mem) []byte {
	return append([]byte(nil), m.block(t, mem)...)
}

func (m *standInMemory) Free(t testing.TB, mem kernels.Mem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blocks[mem.Ptr]
	require.True(t, ok, "free of %#x, which is not a block", mem.Ptr)
	delete(m.blocks, mem.Ptr)
}

// standIn is kernels/cpu computing on standInMemory's blocks: each operand is
// translated from its address to its block's bytes, and one that carries host bytes
// (kernels/cpu's operands) is refused, as a GPU cannot read them.
type standIn struct {
	cpu *cpu.Backend
	mem *standInMemory
}

// h returns o with its block's bytes as Host.
func (s *standIn) h(o kernels.Operand) kernels.Operand {
	if _, scalar := o.ScalarValue(); scalar || o.Absent() {
		return o
	}
	if o.Mem.Host != nil {
		panic(fmt.Sprintf("stand-in backend: an operand in host memory (%d bytes at %p): the case ran the target's kernels on kernels/cpu's operands", len(o.Mem.Host), o.Mem.Host))
	}
	s.mem.mu.Lock()
	b, ok := s.mem.blocks[o.Mem.Ptr]
	s.mem.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("stand-in backend: no block at %#x", o.Mem.Ptr))
	}
	o.Mem.Host = b
	return o
}

func (s *standIn) Name() string { return "stand-in" }
func (s *standIn) Unary(op kernels.UnaryOp, dst, x kernels.Operand) {
	s.cpu.Unary(op, s.h(dst), s.h(x))
}
func (s *standIn) UnaryBackward(op kernels.UnaryOp, dx, g, saved kernels.Operand) {
	s.cpu.UnaryBackward(op, s.h(dx), s.h(g), s.h(saved))
}
func (s *standIn) Binary(op kernels.BinaryOp, dst, a, b kernels.Operand) {
	s.cpu.Binary(op, s.h(dst), s.h(a), s.h(b))
}
func (s *standIn) BinaryBackward(op kernels.BinaryOp, wrt kernels.Arg, dst, g, a, b kernels.Operand) {
	s.cpu.BinaryBackward(op, wrt, s.h(dst), s.h(g), s.h(a), s.h(b))
}
func (s *standIn) Copy(dst, src kernels.Operand)       { s.cpu.Copy(s.h(dst), s.h(src)) }
func (s *standIn) Fill(dst kernels.Operand, v float64) { s.cpu.Fill(s.h(dst), v) }
func (s *standIn) Axpy(dst kernels.Operand, alpha float64, x kernels.Operand) {
	s.cpu.Axpy(s.h(dst), alpha, s.h(x))
}
func (s *standIn) DropoutMask(mask kernels.Operand, p float64, seed uint64) {
	s.cpu.DropoutMask(s.h(mask), p, seed)
}
func (s *standIn) Dropout(dst, x, mask kernels.Operand, p float64) {
	s.cpu.Dropout(s.h(dst), s.h(x), s.h(mask), p)
}
func (s *standIn) Sum(dst, src kernels.Operand)  { s.cpu.Sum(s.h(dst), s.h(src)) }
func (s *standIn) Mean(dst, src kernels.Operand) { s.cpu.Mean(s.h(dst), s.h(src)) }
func (s *standIn) SumSquares(dst, src kernels.Operand) {
	s.cpu.SumSquares(s.h(dst), s.h(src))
}
func (s *standIn) Max(dst, idx, src kernels.Operand) {
	s.cpu.Max(s.h(dst), s.h(idx), s.h(src))
}
func (s *standIn) MaxBackward(dx, g, idx kernels.Operand) {
	s.cpu.MaxBackward(s.h(dx), s.h(g), s.h(idx))
}
func (s *standIn) Matmul(dst, a, b kernels.Operand) { s.cpu.Matmul(s.h(dst), s.h(a), s.h(b)) }

// MatmulActivation folds where kernels/cuda's cuBLASLt epilogue takes the call (ReLU,
// not F64), with kernels/cpu's Matmul, Binary and Unary, so that the suite's case runs
// both its legs in CI.
func (s *standIn) MatmulActivation(op kernels.UnaryOp, dst, a, b, bias kernels.Operand) bool {
	if dst.DType == dtype.F64 || op != kernels.Relu {
		return false
	}
	s.Matmul(dst, a, b)
	if !bias.Absent() {
		s.Binary(kernels.Add, dst, dst, bias)
	}
	s.Unary(op, dst, dst)
	return true
}
func (s *standIn) Softmax(dst, x kernels.Operand, outer, n, inner int) {
	s.cpu.Softmax(s.h(dst), s.h(x), outer, n, inner)
}
func (s *standIn) LogSoftmax(dst, x kernels.Operand, outer, n, inner int) {
	s.cpu.LogSoftmax(s.h(dst), s.h(x), outer, n, inner)
}
func (s *standIn) SoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	s.cpu.SoftmaxBackward(s.h(dx), s.h(g), s.h(y), outer, n, inner)
}
func (s *standIn) LogSoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	s.cpu.LogSoftmaxBackward(s.h(dx), s.h(g), s.h(y), outer, n, inner)
}
func (s *standIn) LayerNorm(y, mean, rstd, x, w, b kernels.Operand, rows, n int, eps float64) {
	s.cpu.LayerNorm(s.h(y), s.h(mean), s.h(rstd), s.h(x), s.h(w), s.h(b), rows, n, eps)
}
func (s *standIn) LayerNormBackward(dx, dw, db, g, x, mean, rstd, w kernels.Operand, rows, n int) {
	s.cpu.LayerNormBackward(s.h(dx), s.h(dw), s.h(db), s.h(g), s.h(x), s.h(mean), s.h(rstd), s.h(w), rows, n)
}
func (s *standIn) CrossEntropy(loss, lse, logits, labels kernels.Operand, n, c int, ignore int64) error {
	return s.cpu.CrossEntropy(s.h(loss), s.h(lse), s.h(logits), s.h(labels), n, c, ignore)
}
func (s *standIn) CrossEntropyBackward(dlogits, logits, lse, labels, g kernels.Operand, n, c int, ignore int64) {
	s.cpu.CrossEntropyBackward(s.h(dlogits), s.h(logits), s.h(lse), s.h(labels), s.h(g), n, c, ignore)
}
func (s *standIn) MSE(loss, a, b kernels.Operand) { s.cpu.MSE(s.h(loss), s.h(a), s.h(b)) }
func (s *standIn) MSEBackward(da, db, a, b, g kernels.Operand) {
	s.cpu.MSEBackward(s.h(da), s.h(db), s.h(a), s.h(b), s.h(g))
}
func (s *standIn) Embedding(dst, w, idx kernels.Operand, dim int) error {
	return s.cpu.Embedding(s.h(dst), s.h(w), s.h(idx), dim)
}
func (s *standIn) EmbeddingBackward(dw, g, idx kernels.Operand, dim int) error {
	return s.cpu.EmbeddingBackward(s.h(dw), s.h(g), s.h(idx), dim)
}
func (s *standIn) SGD(c kernels.SGD, p, g, buf kernels.Operand, first bool) {
	s.cpu.SGD(c, s.h(p), s.h(g), s.h(buf), first)
}
func (s *standIn) Adam(c kernels.Adam, step int, p, g, m, v kernels.Operand) {
	s.cpu.Adam(c, step, s.h(p), s.h(g), s.h(m), s.h(v))
}
func (s *standIn) Unscale(g kernels.Operand, inv float64, found kernels.Operand) {
	s.cpu.Unscale(s.h(g), inv, s.h(found))
}
func (s *standIn) NonFinite(x kernels.Operand) bool { return s.cpu.NonFinite(s.h(x)) }

// hs is h over a list (nil stays nil).
func (s *standIn) hs(os []kernels.Operand) []kernels.Operand {
	if os == nil {
		return nil
	}
	out := make([]kernels.Operand, len(os))
	for i, o := range os {
		out[i] = s.h(o)
	}
	return out
}
func (s *standIn) SGDMulti(c kernels.SGD, p, g, buf []kernels.Operand, first []bool) {
	s.cpu.SGDMulti(c, s.hs(p), s.hs(g), s.hs(buf), first)
}
func (s *standIn) AdamMulti(c kernels.Adam, steps []int, p, g, m, v []kernels.Operand) {
	s.cpu.AdamMulti(c, steps, s.hs(p), s.hs(g), s.hs(m), s.hs(v))
}
func (s *standIn) AdamMultiCapturable(c kernels.Adam, lr, steps kernels.Operand, slot []int, p, g, m, v []kernels.Operand) {
	s.cpu.AdamMultiCapturable(c, s.h(lr), s.h(steps), slot, s.hs(p), s.hs(g), s.hs(m), s.hs(v))
}
func (s *standIn) UnscaleMulti(g []kernels.Operand, inv float64, found kernels.Operand) {
	s.cpu.UnscaleMulti(s.hs(g), inv, s.h(found))
}
func (s *standIn) BinaryCrossEntropy(dst, x, y kernels.Operand) error {
	return s.cpu.BinaryCrossEntropy(s.h(dst), s.h(x), s.h(y))
}
func (s *standIn) BinaryCrossEntropyBackward(wrt kernels.Arg, dst, g, x, y kernels.Operand) {
	s.cpu.BinaryCrossEntropyBackward(wrt, s.h(dst), s.h(g), s.h(x), s.h(y))
}
func (s *standIn) BinaryCrossEntropyWithLogits(dst, x, y, pw kernels.Operand) {
	s.cpu.BinaryCrossEntropyWithLogits(s.h(dst), s.h(x), s.h(y), s.h(pw))
}
func (s *standIn) BinaryCrossEntropyWithLogitsBackward(wrt kernels.Arg, dst, g, x, y, pw kernels.Operand) {
	s.cpu.BinaryCrossEntropyWithLogitsBackward(wrt, s.h(dst), s.h(g), s.h(x), s.h(y), s.h(pw))
}
func (s *standIn) Addc(op kernels.BinaryOp, dst, x, a, b kernels.Operand, value float64) {
	s.cpu.Addc(op, s.h(dst), s.h(x), s.h(a), s.h(b), value)
}
func (s *standIn) Compare(op kernels.CompareOp, dst, a, b kernels.Operand) {
	s.cpu.Compare(op, s.h(dst), s.h(a), s.h(b))
}
func (s *standIn) Where(dst, cond, a, b kernels.Operand) {
	s.cpu.Where(s.h(dst), s.h(cond), s.h(a), s.h(b))
}
