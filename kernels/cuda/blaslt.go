package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// cuBLASLt folds a Linear's bias into its product: cublasLtMatmul with
// CUBLASLT_EPILOGUE_BIAS adds the bias to each output row in the product's epilogue,
// in the compute type, before the one rounding to the output's type, where Matmul and
// then Binary would write the product, read it back and write it again (PyTorch 2.11's
// addmm does the same). The library sits beside cuBLAS (libcublasLt.so.N); without it,
// or for a product it does not suit, MatmulBias reports false and the op runs as before.
// The same way a Linear's backward gets its bias gradient from the weight gradient's
// product (CUBLASLT_EPILOGUE_BGRADB: the sum over the batch of the output's gradient,
// which that product reads anyway), where it would run a reduction of its own. And a
// Linear's ReLU goes into the epilogue too (MatmulActivation:
// CUBLASLT_EPILOGUE_RELU_BIAS), where Unary would read the Linear's output back and
// write the activation's; GELU's epilogues measured slower than the product followed by
// the gelu-tanh kernel and are not used (MatmulActivation says by how much).

// ltLib is the process's cuBLASLt: loaded on first use, immutable after.
type ltLib struct {
	lib                              *cudadev.Library
	create                           uintptr
	descCreate, descDestroy, descSet uintptr
	layoutCreate, layoutDestroy      uintptr
	prefCreate, prefDestroy, prefSet uintptr
	heuristic, matmul                uintptr
}

var loadedLt = sync.OnceValues(loadLt)

// loadLt opens cuBLASLt: first beside the cuBLAS that products use, then by soname.
func loadLt() (*ltLib, error) {
	blas, err := loadedBLAS()
	if err != nil {
		return nil, err
	}
	var cands []string
	if p := blas.lib.Path(); strings.Contains(p, "libcublas.so.") {
		cands = append(cands, filepath.Join(filepath.Dir(p), strings.Replace(filepath.Base(p), "libcublas.so.", "libcublasLt.so.", 1)))
	}
	cands = append(cands, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11")
	lib, err := cudadev.OpenLibrary(cands...)
	if err != nil {
		return nil, fmt.Errorf("kernels/cuda: no cuBLASLt beside %s: %w", blas.lib.Path(), err)
	}
	l := &ltLib{lib: lib}
	for _, s := range []struct {
		fn   *uintptr
		name string
	}{
		{&l.create, "cublasLtCreate"},
		{&l.descCreate, "cublasLtMatmulDescCreate"},
		{&l.descDestroy, "cublasLtMatmulDescDestroy"},
		{&l.descSet, "cublasLtMatmulDescSetAttribute"},
		{&l.layoutCreate, "cublasLtMatrixLayoutCreate"},
		{&l.layoutDestroy, "cublasLtMatrixLayoutDestroy"},
		{&l.prefCreate, "cublasLtMatmulPreferenceCreate"},
		{&l.prefDestroy, "cublasLtMatmulPreferenceDestroy"},
		{&l.prefSet, "cublasLtMatmulPreferenceSetAttribute"},
		{&l.heuristic, "cublasLtMatmulAlgoGetHeuristic"},
		{&l.matmul, "cublasLtMatmul"},
	} {
		if *s.fn, err = lib.Symbol(s.name); err != nil {
			return nil, fmt.Errorf("kernels/cuda: %s: %w", lib.Path(), err)
		}
	}
	return l, nil
}

// ltPlan is one product shape's descriptors and the algorithm cuBLASLt's heuristic
// chose for it: made on the shape's first product, kept until Release.
type ltPlan struct {
	// mu is held from setting the bias pointer to the end of cublasLtMatmul: the
	// descriptor is shared by every product of the shape.
	mu               sync.Mutex
	desc, la, lb, ld uintptr // immutable once made
	algo             [cublasLtSizeofAlgo]byte
	ok               bool // the heuristic found an algorithm
}

// ltKey is what a plan depends on: the column-major product cuBLASLt sees, the
// element type, TF32, the workspace the algorithm may use and the epilogue.
type ltKey struct {
	m, n, k       int
	ta, tb        bool
	lda, ldb, ldc int64
	dt            dtype.DType
	tf32          bool
	ws            int64
	epi           int32 // a cublasLtEpilogue_t: BIAS, BGRADB, RELU or RELU_BIAS
}

// blasLt is a Backend's cuBLASLt handle and plans.
type blasLt struct {
	once sync.Once
	lib  *ltLib  // nil when cuBLASLt is not there; set by once
	h    uintptr // set by once

	mu    sync.Mutex
	plans map[ltKey]*ltPlan // guarded by mu
}

// lt returns the backend's cuBLASLt, or nil when it has none.
func (b *Backend) lt() *blasLt {
	b.blt.once.Do(func() {
		if b.rec != nil {
			return // a recording Backend calls no library it has no handle for
		}
		l, err := loadedLt()
		if err != nil {
			return
		}
		var h uintptr
		if err := b.blas.call(l.create, "cublasLtCreate", uintptr(unsafe.Pointer(&h))); err != nil {
			return
		}
		b.blt.lib, b.blt.h = l, h
		b.blt.plans = make(map[ltKey]*ltPlan)
	})
	if b.blt.lib == nil {
		return nil
	}
	return &b.blt
}

// ltAlign is the alignment, in bytes, of every operand of a product MatmulBias takes:
// cuBLASLt's heuristic returns algorithms that may assume it (its preferences'
// MIN_ALIGNMENT_*_BYTES default to 256), and the caching allocator's blocks start on
// 512 bytes, so a whole tensor always has it.
const ltAlign = 256

// MatmulBias implements kernels.BiasMatmul: dst = a·b + bias for rank-2 operands of
// one float type (F32, F16, BF16), a contiguous bias of dst's type, dst row-major, all
// on ltAlign bytes, through cublasLtMatmul with the bias in the epilogue. It reports false,
// writing nothing, for anything else or when cuBLASLt is missing or finds no
// algorithm.
func (b *Backend) MatmulBias(dst, x, y, bias kernels.Operand) bool {
	return b.ltMatmul(dst, x, y, bias, cublasLtEpilogueBias)
}

// MatmulBiasGrad implements kernels.BiasGradMatmul with cuBLASLt's BGRADB epilogue, on
// the operands MatmulBias takes: in the column-major product cuBLASLt sees, x is the B
// operand and its sum over k (the rows of dst) is what BGRADB writes into dbias.
func (b *Backend) MatmulBiasGrad(dst, dbias, x, y kernels.Operand) bool {
	return b.ltMatmul(dst, x, y, dbias, cublasLtEpilogueBGradB)
}

// MatmulActivation implements kernels.ActivationMatmul on the operands MatmulBias
// takes (the bias optional) for ReLU, through CUBLASLT_EPILOGUE_RELU_BIAS
// (CUBLASLT_EPILOGUE_RELU without a bias); any other op it declines.
//
// GELU is not folded, though cuBLASLt has its tanh form (GELU_BIAS, and GELU_AUX_BIAS,
// which also writes GELU's input for the backward): on an H100 80GB HBM3 (driver
// 580.159.04, 2026-12-06 19:51 UTC, `kernels_cuda.test -test.run '^$' -test.bench
// BenchmarkLinearActivation -test.benchtime 30x`, the benchmark as merged in ca9b450,
// which had GELU's lines: 4096×4096×4096 with a bias, GELU's input kept as in
// training) the epilogue took, in ns a call, F32 2776773 against
// 2763680 for the product followed by the gelu-tanh kernel, F16 212985 against 204703,
// BF16 207882 against 195229: 0.5%, 4% and 6.5% slower. ReLU's in the same run: F32
// 2725193 against 2756226, F16 183035 against 202232, BF16 174119 against 198062 (1%,
// 10% and 14% faster).
func (b *Backend) MatmulActivation(op kernels.UnaryOp, dst, x, y, bias kernels.Operand) bool {
	if op != kernels.Relu {
		return false
	}
	if bias.Absent() {
		return b.ltMatmul(dst, x, y, bias, cublasLtEpilogueRelu)
	}
	return b.ltMatmul(dst, x, y, bias, cublasLtEpilogueReluBias)
}

// ltMatmul runs dst = x·y through cublasLtMatmul with the epilogue epi and its vector
// vec: the bias added to each row of dst (epi has the BIAS bit, vec [n]), the sum of x
// over k written into vec (cublasLtEpilogueBGradB, vec [m]), or absent for an epilogue
// with neither (cublasLtEpilogueRelu). It reports false, writing nothing, where
// cuBLASLt cannot take the operands.
func (b *Backend) ltMatmul(dst, x, y, vec kernels.Operand, epi int32) bool {
	const op = "matmul"
	if len(dst.Shape) != 2 || len(x.Shape) != 2 || len(y.Shape) != 2 {
		return false
	}
	dt := dst.DType
	if (dt != dtype.F32 && !dt.Is16()) || x.DType != dt || y.DType != dt {
		return false
	}
	m, k, n := x.Shape[0], x.Shape[1], y.Shape[1]
	if y.Shape[0] != k || dst.Shape[0] != m || dst.Shape[1] != n {
		return false
	}
	if m < 2 || n < 2 || k < 2 { // cuBLASLt's epilogues want real matrices, as PyTorch's addmm asks
		return false
	}
	if vec.Absent() == hasVector(epi) {
		return false
	}
	if !vec.Absent() {
		vecLen := n
		if epi == cublasLtEpilogueBGradB {
			vecLen = m
		}
		if len(vec.Shape) != 1 || vec.DType != dt || vec.Shape[0] != vecLen || vec.Strides[0] != 1 {
			return false
		}
	}
	checkOperand(op, dst)
	checkOperand(op, x)
	checkOperand(op, y)
	if !vec.Absent() {
		checkOperand(op, vec)
	}
	ta, lda, okA := blasLayout(m, k, int64(x.Strides[0]), int64(x.Strides[1]))
	tb, ldb, okB := blasLayout(k, n, int64(y.Strides[0]), int64(y.Strides[1]))
	tc, ldc, okC := blasLayout(m, n, int64(dst.Strides[0]), int64(dst.Strides[1]))
	pa, pb, pc, pvec := addr(x), addr(y), addr(dst), addr(vec)
	if !okA || !okB || !okC || tc || (pa|pb|pc|pvec)%ltAlign != 0 {
		return false
	}
	lt := b.lt()
	if lt == nil {
		return false
	}
	l, err := b.blasLib()
	if err != nil {
		return false
	}
	s := dst.Mem.Stream
	h, err := b.blas.acquire(l, s)
	if err != nil {
		b.fault(err)
		return true // the error is the op's, kept for Check; nothing to run instead
	}
	defer b.blas.put(h)
	ws, wsBytes := b.blas.workspace(h, s)
	// Row-major dst = x·y is column-major dstᵀ = yᵀ·xᵀ: cuBLASLt's A is y, its B is x;
	// a bias runs along its rows, the columns of dst, and BGRADB sums its B (x) over k.
	key := ltKey{m: n, n: m, k: k, ta: tb, tb: ta, lda: ldb, ldb: lda, ldc: ldc, dt: dt, tf32: dt == dtype.F32 && b.tf32.Load(), ws: wsBytes, epi: epi}
	p, err := lt.plan(b, key, pvec)
	if err != nil {
		b.fault(err)
		return true
	}
	if !p.ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setVector(b, lt, key, pvec); err != nil {
		b.fault(err)
		return true
	}
	b.launches.Add(1)
	err = b.blas.call(lt.lib.matmul, "cublasLtMatmul", lt.h, p.desc,
		uintptr(unsafe.Pointer(&alphaOne)), uintptr(pb), p.la, uintptr(pa), p.lb,
		uintptr(unsafe.Pointer(&betaZero)), uintptr(pc), p.ld, uintptr(pc), p.ld,
		uintptr(unsafe.Pointer(&p.algo[0])), uintptr(ws), uintptr(wsBytes), uintptr(s))
	if err != nil {
		b.fault(fmt.Errorf("%w (m=%d n=%d k=%d, %v, epilogue %d)", err, m, n, k, dt, epi))
	}
	return true
}

// hasVector reports whether the epilogue epi reads or writes a vector: the bias
// (BIAS, RELU_BIAS) or the bias gradient (BGRADB).
func hasVector(epi int32) bool { return epi&(cublasLtEpilogueBias|cublasLtEpilogueBGradB) != 0 }

// setVector sets the descriptor's bias pointer to vec where key's epilogue has a
// vector (the heuristic reads its alignment when the plan is made; each product sets
// its own), under p.mu or while the plan is made.
func (p *ltPlan) setVector(b *Backend, lt *blasLt, key ltKey, vec uint64) error {
	if !hasVector(key.epi) {
		return nil
	}
	return b.blas.call(lt.lib.descSet, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", p.desc, cublasLtDescBiasPointer,
		uintptr(unsafe.Pointer(&vec)), unsafe.Sizeof(vec))
}

// plan returns key's plan, making it on first use (vec: the epilogue's vector, whose
// alignment the heuristic reads; 0 for none).
func (lt *blasLt) plan(b *Backend, key ltKey, vec uint64) (*ltPlan, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if p, ok := lt.plans[key]; ok {
		return p, nil
	}
	p := &ltPlan{}
	err := lt.makePlan(b, key, p, vec)
	if err != nil {
		lt.destroyPlan(b, p)
		return nil, err
	}
	lt.plans[key] = p
	return p, nil
}

// makePlan creates p's descriptors for key and asks the heuristic for one algorithm.
func (lt *blasLt) makePlan(b *Backend, key ltKey, p *ltPlan, vec uint64) error {
	l, call := lt.lib, b.blas.call
	compute := uintptr(cublasCompute32F)
	if key.tf32 {
		compute = cublasCompute32FFastTF32
	}
	if err := call(l.descCreate, "cublasLtMatmulDescCreate", uintptr(unsafe.Pointer(&p.desc)), compute, cudaR32F); err != nil {
		return err
	}
	set := func(attr uintptr, v int32) error {
		return call(l.descSet, "cublasLtMatmulDescSetAttribute", p.desc, attr, uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v))
	}
	opA, opB := int32(cublasOpN), int32(cublasOpN)
	if key.ta {
		opA = cublasOpT
	}
	if key.tb {
		opB = cublasOpT
	}
	ty := blasType(key.dt)
	if err := errors.Join(set(cublasLtDescTransA, opA), set(cublasLtDescTransB, opB), set(cublasLtDescEpilogue, key.epi)); err != nil {
		return err
	}
	if hasVector(key.epi) {
		if err := set(cublasLtDescBiasDataType, int32(ty)); err != nil {
			return err
		}
	}
	if err := p.setVector(b, lt, key, vec); err != nil {
		return err
	}
	// Layouts of the column-major operands: A is m×k (k×m transposed), B k×n (n×k).
	layout := func(d *uintptr, rows, cols int, ld int64) error {
		return call(l.layoutCreate, "cublasLtMatrixLayoutCreate", uintptr(unsafe.Pointer(d)), ty, uintptr(rows), uintptr(cols), uintptr(ld))
	}
	ar, ac := key.m, key.k
	if key.ta {
		ar, ac = ac, ar
	}
	br, bc := key.k, key.n
	if key.tb {
		br, bc = bc, br
	}
	if err := errors.Join(layout(&p.la, ar, ac, key.lda), layout(&p.lb, br, bc, key.ldb), layout(&p.ld, key.m, key.n, key.ldc)); err != nil {
		return err
	}
	var pref uintptr
	if err := call(l.prefCreate, "cublasLtMatmulPreferenceCreate", uintptr(unsafe.Pointer(&pref))); err != nil {
		return err
	}
	defer func() { _ = call(l.prefDestroy, "cublasLtMatmulPreferenceDestroy", pref) }()
	ws := uint64(key.ws)
	if err := call(l.prefSet, "cublasLtMatmulPreferenceSetAttribute", pref, cublasLtPrefMaxWorkspaceBytes,
		uintptr(unsafe.Pointer(&ws)), unsafe.Sizeof(ws)); err != nil {
		return err
	}
	var res [cublasLtSizeofHeuristicResult]byte
	var found int32
	if err := call(l.heuristic, "cublasLtMatmulAlgoGetHeuristic", lt.h, p.desc, p.la, p.lb, p.ld, p.ld, pref, 1,
		uintptr(unsafe.Pointer(&res[0])), uintptr(unsafe.Pointer(&found))); err != nil {
		var be *BLASError
		if errors.As(err, &be) {
			return nil // CUBLAS_STATUS_NOT_SUPPORTED and the like: no algorithm, not a failure
		}
		return err
	}
	state := *(*int32)(unsafe.Pointer(&res[cublasLtHeuristicState]))
	need := *(*uint64)(unsafe.Pointer(&res[cublasLtHeuristicWorkspaceSize]))
	if found > 0 && state == cublasStatusSuccess && need <= ws {
		copy(p.algo[:], res[:cublasLtSizeofAlgo])
		p.ok = true
	}
	return nil
}

// destroyPlan destroys what p holds.
func (lt *blasLt) destroyPlan(b *Backend, p *ltPlan) []error {
	var errs []error
	for _, d := range []struct {
		fn   uintptr
		name string
		h    *uintptr
	}{
		{lt.lib.layoutDestroy, "cublasLtMatrixLayoutDestroy", &p.la},
		{lt.lib.layoutDestroy, "cublasLtMatrixLayoutDestroy", &p.lb},
		{lt.lib.layoutDestroy, "cublasLtMatrixLayoutDestroy", &p.ld},
		{lt.lib.descDestroy, "cublasLtMatmulDescDestroy", &p.desc},
	} {
		if *d.h != 0 {
			if err := b.blas.call(d.fn, d.name, *d.h); err != nil {
				errs = append(errs, err)
			}
			*d.h = 0
		}
	}
	return errs
}

// release destroys the plans (the handle stays: plans are made again on demand). The
// device is idle.
func (lt *blasLt) release(b *Backend) []error {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	var errs []error
	for k, p := range lt.plans {
		errs = append(errs, lt.destroyPlan(b, p)...)
		delete(lt.plans, k)
	}
	return errs
}

// workspace returns the workspace h has on stream s (acquire set it), 0 when none.
func (p *blasPool) workspace(h *blasHandle, s device.Stream) (device.Ptr, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws, ok := h.ws[s]
	if !ok {
		return 0, 0
	}
	return ws, p.wsBytes
}
