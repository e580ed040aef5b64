package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
// Linear's ReLU or GELU (tanh) goes into the epilogue too (MatmulActivation:
// CUBLASLT_EPILOGUE_RELU_BIAS, GELU_BIAS, and GELU_AUX_BIAS, which also writes GELU's
// input, the tensor GELU's backward reads), where Unary would read the Linear's output
// back and write the activation's.

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
	// mu is held from setting the bias and auxiliary pointers to the end of
	// cublasLtMatmul: the descriptor is shared by every product of the shape.
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
	epi           int32 // a cublasLtEpilogue_t (ltEpilogue.epi)
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
	return b.ltMatmul(dst, x, y, ltEpilogue{epi: cublasLtEpilogueBias, vec: bias})
}

// MatmulBiasGrad implements kernels.BiasGradMatmul with cuBLASLt's BGRADB epilogue, on
// the operands MatmulBias takes: in the column-major product cuBLASLt sees, x is the B
// operand and its sum over k (the rows of dst) is what BGRADB writes into dbias.
func (b *Backend) MatmulBiasGrad(dst, dbias, x, y kernels.Operand) bool {
	return b.ltMatmul(dst, x, y, ltEpilogue{epi: cublasLtEpilogueBGradB, vec: dbias})
}

// MatmulActivation implements kernels.ActivationMatmul on the operands MatmulBias
// takes (the bias optional): ReLU through CUBLASLT_EPILOGUE_RELU(_BIAS), GELU through
// CUBLASLT_EPILOGUE_GELU(_BIAS), whose GELU is the tanh approximation (cuBLAS's
// documentation), kernels.GeluTanh, and with pre through GELU_AUX(_BIAS), which writes
// the activation's input into pre beside dst. cuBLASLt wants that matrix's leading
// dimension (n) a multiple of 8: for other widths it reports false.
func (b *Backend) MatmulActivation(op kernels.UnaryOp, dst, pre, x, y, bias kernels.Operand) bool {
	var e ltEpilogue
	switch {
	case op == kernels.Relu && pre.Absent():
		e.epi = cublasLtEpilogueRelu
	case op == kernels.GeluTanh && pre.Absent():
		e.epi = cublasLtEpilogueGelu
	case op == kernels.GeluTanh:
		e.epi, e.aux = cublasLtEpilogueGeluAux, pre
	default:
		return false // the epilogues have no other activation, nor ReLU's input (only a bit mask)
	}
	if !bias.Absent() {
		e.epi |= cublasLtEpilogueBias
		e.vec = bias
	}
	return b.ltMatmul(dst, x, y, e)
}

// ltEpilogue is what a product's epilogue does (a cublasLtEpilogue_t) and the operands
// it reads or writes besides the product's.
type ltEpilogue struct {
	epi int32
	// vec is the bias added to each row of dst ([n], read; epi has the BIAS bit) or
	// the sum of x over k (BGRADB, [m], written); absent for neither.
	vec kernels.Operand
	// aux is GELU's input written beside dst (epi has the AUX bit): dst's shape, type
	// and layout; absent otherwise.
	aux kernels.Operand
}

// The epilogues beside BIAS and BGRADB (cublasLt.h's cublasLtEpilogue_t, and the
// attributes of the auxiliary matrix): written here until src/zconst_gen.cu prints
// them with the others into zconst.go.
const (
	cublasLtEpilogueRelu    = 2
	cublasLtEpilogueGelu    = 32
	cublasLtEpilogueGeluAux = 32 | 128 // GELU, and its input written to the aux pointer
	cublasLtDescAuxPointer  = 11       // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
	cublasLtDescAuxLD       = 12       // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64
	cublasLtAuxBit          = 128
)

// ltMatmul runs dst = x·y through cublasLtMatmul with the epilogue e. It reports false,
// writing nothing, where cuBLASLt cannot take the operands.
func (b *Backend) ltMatmul(dst, x, y kernels.Operand, e ltEpilogue) bool {
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
	if e.vec.Absent() != (e.epi&(cublasLtEpilogueBias|cublasLtEpilogueBGradB) == 0) || e.aux.Absent() != (e.epi&cublasLtAuxBit == 0) {
		return false
	}
	if !e.vec.Absent() {
		vecLen := n
		if e.epi == cublasLtEpilogueBGradB {
			vecLen = m
		}
		if len(e.vec.Shape) != 1 || e.vec.DType != dt || e.vec.Shape[0] != vecLen || e.vec.Strides[0] != 1 {
			return false
		}
		checkOperand(op, e.vec)
	}
	if !e.aux.Absent() {
		if e.aux.DType != dt || !slices.Equal(e.aux.Shape, dst.Shape) || !slices.Equal(e.aux.Strides, dst.Strides) || n%8 != 0 {
			return false
		}
		checkOperand(op, e.aux)
	}
	checkOperand(op, dst)
	checkOperand(op, x)
	checkOperand(op, y)
	ta, lda, okA := blasLayout(m, k, int64(x.Strides[0]), int64(x.Strides[1]))
	tb, ldb, okB := blasLayout(k, n, int64(y.Strides[0]), int64(y.Strides[1]))
	tc, ldc, okC := blasLayout(m, n, int64(dst.Strides[0]), int64(dst.Strides[1]))
	pa, pb, pc, pvec, paux := addr(x), addr(y), addr(dst), addr(e.vec), addr(e.aux)
	if !okA || !okB || !okC || tc || (pa|pb|pc|pvec|paux)%ltAlign != 0 {
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
	key := ltKey{m: n, n: m, k: k, ta: tb, tb: ta, lda: ldb, ldb: lda, ldc: ldc, dt: dt, tf32: dt == dtype.F32 && b.tf32.Load(), ws: wsBytes, epi: e.epi}
	p, err := lt.plan(b, key, pvec, paux)
	if err != nil {
		b.fault(err)
		return true
	}
	if !p.ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.setPointers(b, lt, key, pvec, paux); err != nil {
		b.fault(err)
		return true
	}
	b.launches.Add(1)
	err = b.blas.call(lt.lib.matmul, "cublasLtMatmul", lt.h, p.desc,
		uintptr(unsafe.Pointer(&alphaOne)), uintptr(pb), p.la, uintptr(pa), p.lb,
		uintptr(unsafe.Pointer(&betaZero)), uintptr(pc), p.ld, uintptr(pc), p.ld,
		uintptr(unsafe.Pointer(&p.algo[0])), uintptr(ws), uintptr(wsBytes), uintptr(s))
	if err != nil {
		b.fault(fmt.Errorf("%w (m=%d n=%d k=%d, %v, epilogue %d)", err, m, n, k, dt, e.epi))
	}
	return true
}

// setPointers sets the descriptor's bias and auxiliary pointers, those key's epilogue
// reads (the heuristic reads their alignment when the plan is made; each product sets
// its own), under p.mu or while the plan is made.
func (p *ltPlan) setPointers(b *Backend, lt *blasLt, key ltKey, vec, aux uint64) error {
	set := func(attr uintptr, name string, v uint64) error {
		return b.blas.call(lt.lib.descSet, name, p.desc, attr, uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v))
	}
	if key.epi&(cublasLtEpilogueBias|cublasLtEpilogueBGradB) != 0 {
		if err := set(cublasLtDescBiasPointer, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", vec); err != nil {
			return err
		}
	}
	if key.epi&cublasLtAuxBit != 0 {
		return set(cublasLtDescAuxPointer, "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", aux)
	}
	return nil
}

// plan returns key's plan, making it on first use (vec and aux: the epilogue's vector
// and matrix, whose alignment the heuristic reads).
func (lt *blasLt) plan(b *Backend, key ltKey, vec, aux uint64) (*ltPlan, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if p, ok := lt.plans[key]; ok {
		return p, nil
	}
	p := &ltPlan{}
	err := lt.makePlan(b, key, p, vec, aux)
	if err != nil {
		lt.destroyPlan(b, p)
		return nil, err
	}
	lt.plans[key] = p
	return p, nil
}

// makePlan creates p's descriptors for key and asks the heuristic for one algorithm.
func (lt *blasLt) makePlan(b *Backend, key ltKey, p *ltPlan, vec, aux uint64) error {
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
	if key.epi&(cublasLtEpilogueBias|cublasLtEpilogueBGradB) != 0 {
		if err := set(cublasLtDescBiasDataType, int32(ty)); err != nil {
			return err
		}
	}
	if key.epi&cublasLtAuxBit != 0 { // the auxiliary matrix is laid out as the output
		ld := key.ldc
		if err := call(l.descSet, "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)", p.desc, cublasLtDescAuxLD,
			uintptr(unsafe.Pointer(&ld)), unsafe.Sizeof(ld)); err != nil {
			return err
		}
	}
	if err := p.setPointers(b, lt, key, vec, aux); err != nil {
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
