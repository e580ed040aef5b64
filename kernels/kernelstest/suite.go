// Package kernelstest is the conformance suite of kernels.Backend: Run calls every
// method of a backend on operands of each float type (F64, F32, F16, BF16, and mixes of
// them; integer types where a method takes them), contiguous, strided, transposed,
// broadcast, offset and empty, and compares the outputs with an independent float64
// reference written here (never with kernels/cpu itself, so the suite also proves the
// CPU backend), with tolerances that follow the output's type and the op's
// conditioning. For a backend other than kernels/cpu it also compares with kernels/cpu
// run on the same inputs. The CPU backend runs it in CI (this package's test); the
// CUDA backend on a GPU machine (kernels/cuda's TestConformance, skipped without a GPU).
//
// Invariants of the suite:
//   - Float64 is float64: an op computing in float64 (an F64 operand, the first input
//     of a row kernel F64) is held to float64's precision, about 2²⁹ times tighter
//     than float32's (in64, tolRow: bounds on the order of float64 sums where results
//     sum), so one float32 rounding anywhere fails; number arguments and Scalars are
//     checked rounded to the compute type as kernels.Backend says (0.1 where it shows).
//   - Exact where the contract is exact: conversions (Copy, Fill) bit for bit as
//     package dtype converts (F64 to F16 and BF16 rounding once), dropout masks as
//     Philox4x32-10 defines them, Max's positions and values, index errors with their
//     position, value and limit, range errors with their count (an asynchronous
//     backend's at the next Check, once, the earliest launch's when several failed).
//   - Nothing but the output is written: every block is filled with a sentinel first,
//     and every byte outside the output's layout must keep it (catching stray writes
//     of strided outputs and empty ones).
//   - Deterministic: reductions run twice give the same bits.
//   - Each case frees what it allocated (Memory.Free); the target's own check (the
//     caching allocator back to zero) runs after Run.
package kernelstest

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// Memory is how the suite puts operands where a backend computes and reads them back.
type Memory interface {
	// Alloc returns a block of n bytes (n may be 0), 8-byte aligned.
	Alloc(t testing.TB, n int64) kernels.Mem
	// Write copies b (the block's size) into the block.
	Write(t testing.TB, m kernels.Mem, b []byte)
	// Read returns the block's bytes once the work ordered before has completed.
	Read(t testing.TB, m kernels.Mem) []byte
	// Free gives the block back.
	Free(t testing.TB, m kernels.Mem)
}

// Target is a backend and the memory it computes on.
type Target struct {
	Backend kernels.Backend
	Memory  Memory
}

// HostMemory is Memory in the Go heap, for backends over host memory (kernels/cpu).
func HostMemory() Memory { return hostMemory{} }

type hostMemory struct{}

func (hostMemory) Alloc(_ testing.TB, n int64) kernels.Mem {
	w := make([]uint64, (n+7)/8)
	b := []byte{}
	if n > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
	}
	return kernels.Mem{Host: b, Size: n}
}

func (hostMemory) Write(_ testing.TB, m kernels.Mem, b []byte) { copy(m.Host, b) }
func (hostMemory) Read(_ testing.TB, m kernels.Mem) []byte     { return append([]byte(nil), m.Host...) }
func (hostMemory) Free(testing.TB, kernels.Mem)                {}

// Run runs the suite on tg.
func Run(t *testing.T, tg Target) {
	s := &suite{tg: tg}
	if _, isCPU := tg.Backend.(*cpu.Backend); !isCPU {
		s.cpu = cpu.NewBackend(nil)
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"Unary", testUnary},
		{"UnaryBackward", testUnaryBackward},
		{"Binary", testBinary},
		{"DenseF32", testDenseF32}, // elementwise.go: where the backend takes host slices
		{"BinaryBackward", testBinaryBackward},
		{"Copy", testCopy},
		{"Fill", testFill},
		{"Axpy", testAxpy},
		{"Addc", testAddc},
		{"Dropout", testDropout},
		{"Reduce", testReduce},
		{"Max", testMax},
		{"Matmul", testMatmul},
		{"MatmulBias", testMatmulBias}, // matmul.go: where the backend folds a bias in
		{"MatmulBiasGrad", testMatmulBiasGrad},
		{"MatmulActivation", testMatmulActivation}, // activation.go: where the backend folds an activation in
		{"Softmax", testSoftmax},
		{"LayerNorm", testLayerNorm},
		{"CrossEntropy", testCrossEntropy},
		{"Rows16", testRows16}, // rows16.go
		{"MSE", testMSE},
		{"BinaryCrossEntropy", testBCE},
		{"BinaryCrossEntropyWithLogits", testBCEWithLogits},
		{"Embedding", testEmbedding},
		{"Optimizers", testOptimizers},
		{"Multi", testMulti}, // multi.go
		{"AMP", testAMP},
		{"Wide", testWide},
		{"Compare", testCompare}, // compare.go
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, &suite{tg: s.tg, cpu: s.cpu, r: rand.New(rand.NewPCG(uint64(len(c.name)), 7))})
		})
	}
}

// suite is one subtest's state.
type suite struct {
	tg  Target
	cpu kernels.Backend // kernels/cpu, when the target is another backend
	r   *rand.Rand
}

// check returns the errors an asynchronous backend kept (nil for a synchronous one).
func (s *suite) check() error {
	if a, ok := s.tg.Backend.(kernels.Async); ok {
		return a.Check()
	}
	return nil
}
