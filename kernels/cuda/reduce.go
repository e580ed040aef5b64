package cuda

import (
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// reduction mirrors src/common.cuh's Reduction (TestStructLayouts checks it).
type reduction struct {
	nOut, nRed   int64
	krank, rrank int32
	kshape       [hdrMaxRank]int64
	kstride      [2][hdrMaxRank]int64
	rshape       [hdrMaxRank]int64
	rstride      [hdrMaxRank]int64
	dst, src     uint64
	dtd, dts     int32
	piece        int64
	pieces       int64
}

// acc mirrors src/common.cuh's Acc: one partial result in the scratch.
type acc struct {
	sum float64
	max float64
	arg int64
}

func (r *reduction) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(r)), unsafe.Sizeof(*r))
}

// newReduction fills r with the reduction of src (any type) to dst's shape, which
// broadcasts to src's: the dimensions where dst has size 1 or is missing are reduced,
// as kernels/cpu's newReduction splits them; kept and reduced dimensions are merged.
func newReduction(op string, r *reduction, dst, src kernels.Operand) {
	rank := len(src.Shape)
	d := rank - len(dst.Shape)
	if d < 0 {
		panic(fmt.Sprintf("kernels/cuda: %s: output shape %v has more dimensions than the input %v", op, dst.Shape, src.Shape))
	}
	var ks, rs [hdrMaxRank]int64
	var kst, rst [hdrMaxOps][hdrMaxRank]int64
	nk, nr := 0, 0
	for i, n := range src.Shape {
		switch {
		case i >= d && dst.Shape[i-d] == n:
			ks[nk] = int64(n)
			kst[0][nk], kst[1][nk] = int64(dst.Strides[i-d]), int64(src.Strides[i])
			nk++
		case i < d || dst.Shape[i-d] == 1:
			rs[nr] = int64(n)
			rst[0][nr] = int64(src.Strides[i])
			nr++
		default:
			panic(fmt.Sprintf("kernels/cuda: %s: output shape %v does not broadcast to the input shape %v", op, dst.Shape, src.Shape))
		}
	}
	r.nOut, r.nRed = 1, 1
	for i := range nk {
		r.nOut *= ks[i]
	}
	for i := range nr {
		r.nRed *= rs[i]
	}
	var mst [hdrMaxOps][hdrMaxRank]int64
	r.krank = int32(merge(2, nk, &ks, &kst, &r.kshape, &mst))
	r.kstride[0], r.kstride[1] = mst[0], mst[1]
	r.rrank = int32(merge(1, nr, &rs, &rst, &r.rshape, &mst))
	r.rstride = mst[0]
}

// Pieces of a reduction: a block folds at most blockPiece elements, a thread
// threadPiece; partials never pass the scratch.
const (
	blockPiece  = 1 << 15
	threadPiece = 1 << 10
	maxPartials = scratchBytes / int64(unsafe.Sizeof(acc{}))
	// threadsWanted is how many threads a thread-per-piece reduction is cut for, at
	// least, so that a few outputs over many elements (a bias gradient: the columns of
	// a [batch, width] matrix) still fill the GPU; minPiece the fewest elements a
	// thread is given for it.
	threadsWanted = 1 << 18
	minPiece      = 4 * hdrUnroll
	// maxThreadPieces bounds the partials reduce_finish's thread combines per output.
	maxThreadPieces = 1 << 10
	// finishBlockPieces is the most partials per output a thread of reduce_finish
	// combines; more take a block per output (reduce_finish_block).
	finishBlockPieces = hdrFinishBlockPieces
)

// pieceCount cuts n reduced elements of each of nOut outputs into pieces of at most
// per, fewer when their partials would not fit the scratch; it returns the piece size
// and count (at least 1). Both depend on the shapes only.
func pieceCount(n, nOut, per int64) (piece, pieces int64) {
	pieces = max(1, min((n+per-1)/per, maxPartials/max(nOut, 1)))
	return max(1, (n+pieces-1)/pieces), pieces
}

// threadPieces is pieceCount for a reduction with a thread per piece: pieces of at most
// threadPiece elements, and more of them while nOut·pieces is under threadsWanted, the
// pieces keep minPiece elements and there are at most maxThreadPieces; still shapes
// only.
func threadPieces(n, nOut int64) (piece, pieces int64) {
	want := min((threadsWanted+nOut-1)/max(nOut, 1), (n+minPiece-1)/minPiece, maxThreadPieces)
	per := min(int64(threadPiece), max(1, (n+want-1)/max(want, 1)))
	return pieceCount(n, nOut, per)
}

// Column sums (reduce_cols in src/reduce.cu): a block takes colsPerBlock columns, a
// thread colsVec adjacent ones, read as one word; colsBlocksWanted blocks fill an H100
// or H200 several times over, and a thread folds at least colsMinRows rows of a piece.
const (
	colsVec          = hdrColsV
	colsPerBlock     = hdrColsX * hdrColsV
	colsBlocksWanted = 1024
	colsMinRows      = 4 * hdrColsY * hdrColsU
)

// Column sums over 16-byte words (sum_cols in src/reduce.cu): a block takes hdrCwX words
// of a row (a column group) and a piece of the rows; colsWordBlocks blocks, two on each
// of an H100's or H200's 132 SMs, each thread at least colsWordMinRows/hdrCwY rows of
// its piece (two rounds of hdrCwU).
const (
	colsWordBlocks  = 264
	colsWordMinRows = 2 * hdrCwY * hdrCwU
)

// warpElements is the most elements per output a warp folds alone (reduce_warp);
// longer outputs take a block a piece.
const warpElements = 8192

// columnsDense reports whether reduce_cols can take r: one kept and one reduced
// dimension after merging, the kept one dense in a float src, its length and the row
// stride multiples of colsVec, and the input's start on the kernel's read (colsVec
// elements, at most 16 bytes).
func columnsDense(r *reduction, src kernels.Operand) bool {
	if !src.DType.IsFloat() {
		return false
	}
	read := uint64(min(colsVec*src.DType.Size(), 16))
	return r.krank == 1 && r.rrank == 1 && r.kstride[1][0] == 1 &&
		r.nOut%colsVec == 0 && r.rstride[0]%colsVec == 0 && r.src%read == 0
}

// colPieces cuts the nRed rows of a column sum over groups column groups into pieces:
// enough pieces for colsBlocksWanted blocks, each at least colsMinRows rows, their
// partials within the scratch (pieceCount).
func colPieces(nRed, nOut, groups int64) (piece, pieces int64) {
	want := max(1, min((colsBlocksWanted+groups-1)/groups, nRed/colsMinRows))
	return pieceCount(nRed, nOut, (nRed+want-1)/want)
}

// columnWords reports whether sum_cols can take r, a float32 sum over the rows of a
// matrix of F32, F16 or BF16 whose columns are the outputs: one kept and one reduced
// dimension after merging, the kept one dense, its length and the row stride whole
// 16-byte words, and the input on 16 bytes.
func columnWords(r *reduction, src kernels.Operand) bool {
	if src.DType != dtype.F32 && !src.DType.Is16() {
		return false
	}
	n := int64(16 / src.DType.Size())
	return r.krank == 1 && r.rrank == 1 && r.kstride[1][0] == 1 && r.nOut%n == 0 && r.rstride[0]%n == 0 && r.src%16 == 0
}

// colWordPieces cuts the nRed rows of sum_cols over groups column groups into pieces:
// enough for colsWordBlocks blocks, each at least colsWordMinRows rows, their partials
// within the scratch (pieceCount).
func colWordPieces(nRed, nOut, groups int64) (piece, pieces int64) {
	want := max(1, min((colsWordBlocks+groups-1)/groups, nRed/colsWordMinRows))
	return pieceCount(nRed, nOut, (nRed+want-1)/want)
}

func (b *Backend) Sum(dst, src kernels.Operand) {
	if dst.DType == dtype.I64 {
		b.sumInts(dst, src) // compare.go
		return
	}
	b.reduce("sum", hdrRedSum, dst, kernels.Operand{}, src)
}
func (b *Backend) Mean(dst, src kernels.Operand) {
	b.reduce("mean", hdrRedMean, dst, kernels.Operand{}, src)
}

func (b *Backend) SumSquares(dst, src kernels.Operand) {
	b.reduce("sum of squares", hdrRedSumSq, dst, kernels.Operand{}, src)
}

func (b *Backend) Max(dst, idx, src kernels.Operand) {
	const op = "max"
	if !dst.Absent() && dst.Size() != idx.Size() {
		panic(fmt.Sprintf("kernels/cuda: %s: %d indices for an output of %d elements", op, idx.Size(), dst.Size()))
	}
	b.reduce(op, hdrRedMax, dst, idx, src)
}

// reduce runs Sum, Mean or Max (mode), in float64 when dst or src is F64, as kernels/cpu
// chooses (sums accumulate in float64 either way). For Max without dst the reduction's
// shape is idx's and only the positions are written.
func (b *Backend) reduce(op string, mode int32, dst, idx, src kernels.Operand) {
	checkOperand(op, src)
	var r reduction
	shape := dst
	if mode == hdrRedMax {
		ip := rowOperand(op, idx, i64)
		if dst.Absent() {
			shape = idx
		} else {
			requireFloat(op, dst)
		}
		r.dtd = int32(dst.DType) // invalid (0) when absent: the kernels store no value
		newReduction(op, &r, shape, src)
		if r.nRed == 0 && r.nOut > 0 {
			panic(fmt.Sprintf("kernels/cuda: %s: reducing %v to %v reduces nothing", op, src.Shape, shape.Shape))
		}
		s := idx.Mem.Stream
		if !dst.Absent() {
			s = dst.Mem.Stream
		}
		b.runReduction(&r, mode, ip, dst, src, s)
		return
	}
	requireFloat(op, dst)
	r.dtd = int32(dst.DType)
	newReduction(op, &r, dst, src)
	b.runReduction(&r, mode, 0, dst, src, dst.Mem.Stream)
}

// runReduction picks the kernel and the pieces and launches them on stream s.
func (b *Backend) runReduction(r *reduction, mode int32, idx uint64, dst, src kernels.Operand, s device.Stream) {
	if r.nOut == 0 {
		return
	}
	f64 := in64(dst, src)
	r.dst, r.src, r.dts = addr(dst), addr(src), int32(src.DType)
	// A thread per output when the outputs sit closer together in the input than the
	// reduced elements do, or when there is little to reduce, and then, for a sum over
	// dense columns, a thread per few columns (reduce_cols); otherwise a warp per
	// output of up to warpElements elements, a block per piece of a longer one.
	keptInner, redInner := r.kstride[1][r.krank-1], r.rstride[r.rrank-1]
	thread := r.nRed <= 32 || (r.nOut >= 32 && keptInner < redInner)
	if thread && mode != hdrRedMax && !f64 && columnWords(r, src) && b.sumCols(r, mode, src.DType, s) {
		return
	}
	cols := thread && mode != hdrRedMax && columnsDense(r, src)
	var k kernel
	var cfg cudadev.LaunchConfig
	switch {
	case !thread && r.nRed <= warpElements: // a warp per output, whole
		k = kReduceWarp.in(f64)
		r.piece, r.pieces = r.nRed, 1
		cfg = b.grid(r.nOut*32, s)
	case cols:
		k = kReduceCols.in(f64)
		groups := (r.nOut + colsPerBlock - 1) / colsPerBlock
		r.piece, r.pieces = colPieces(r.nRed, r.nOut, groups)
		cfg = cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(min(groups*r.pieces, 1<<31-1))}, Block: cudadev.Dim3{X: block}, Stream: s}
	case thread:
		k = kReduceThread.in(f64)
		r.piece, r.pieces = threadPieces(r.nRed, r.nOut)
		cfg = b.grid(r.nOut*r.pieces, s)
	default:
		k = kReduceBlock.in(f64)
		r.piece, r.pieces = pieceCount(r.nRed, r.nOut, blockPiece)
		cfg = cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(min(r.nOut*r.pieces, 1<<31-1))}, Block: cudadev.Dim3{X: block}, Stream: s}
	}
	sc, ok := b.partials(s, r.pieces)
	if !ok {
		return
	}
	defer sc.unlock()
	if k == kReduceWarp && rowsWords(r, src) {
		if mode == hdrRedMax {
			b.launch(kMaxRows.of16(src.DType), cfg, cudadev.ArgBytes(r.bytes()), cudadev.ArgUint64(idx))
		} else {
			b.launch(kSumRows.of16(src.DType), cfg, cudadev.ArgBytes(r.bytes()), cudadev.ArgInt32(mode))
		}
		return
	}
	if k == kReduceBlock && sumAllWords(r, mode, src) {
		// The pieces and their combination in one launch: its last block combines.
		b.launch(kSumAll.of16(src.DType), cfg, cudadev.ArgBytes(r.bytes()), cudadev.ArgInt32(mode), cudadev.ArgUint64(sc.addr()), cudadev.ArgPtr(sc.ticket()))
		return
	}
	args := [4]cudadev.Arg{cudadev.ArgBytes(r.bytes()), cudadev.ArgInt32(mode), cudadev.ArgUint64(idx), cudadev.ArgUint64(sc.addr())}
	b.launch(k, cfg, args[:]...)
	switch {
	case r.pieces > finishBlockPieces: // a block per output combines its many partials
		b.launch(kReduceFinishBlock.in(f64), cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(min(r.nOut, 1<<31-1))}, Block: cudadev.Dim3{X: block}, Stream: s}, args[:]...)
	case r.pieces > 1:
		b.launch(kReduceFinish.in(f64), b.grid(r.nOut, s), args[:]...)
	}
}

// sumAllWords reports whether sum_all takes r, a float32 reduction cut into pieces for
// a block each: a Sum or Mean of every element of a dense F16 or BF16 input into one
// output, in two pieces or more, each starting on 16 bytes and of whole 16-byte words
// (what reduce_block reads as words alone, with no element before or after them).
func sumAllWords(r *reduction, mode int32, src kernels.Operand) bool {
	return (mode == hdrRedSum || mode == hdrRedMean) && src.DType.Is16() &&
		r.nOut == 1 && r.rrank == 1 && r.rstride[0] == 1 && r.pieces > 1 && r.src%16 == 0 && r.piece%8 == 0 && r.nRed%8 == 0
}

// rowsWords reports whether max_rows (a Max) or sum_rows (a Sum, Mean or SumSquares)
// takes r, a float32 reduction with a warp per output: over rows of an F16 or BF16
// input, each row dense, of whole 16-byte words and starting on 16 bytes.
func rowsWords(r *reduction, src kernels.Operand) bool {
	return src.DType.Is16() && r.krank == 1 && r.rrank == 1 &&
		r.rstride[0] == 1 && r.nRed%8 == 0 && r.src%16 == 0 && r.kstride[1][0]%8 == 0
}

// sumCols launches sum_cols over r (columnWords holds) in mode on stream s: a block per
// column group and piece of the rows; with several pieces their partials go to the
// stream's scratch and the last block of the groups sharing a ticket (one ticket per
// group while there are enough) combines them. It reports false, launching nothing,
// where that grid would not fit a launch.
func (b *Backend) sumCols(r *reduction, mode int32, dt dtype.DType, s device.Stream) bool {
	groups := (r.nOut + hdrCwX*int64(16/dt.Size()) - 1) / (hdrCwX * int64(16/dt.Size()))
	r.piece, r.pieces = colWordPieces(r.nRed, r.nOut, groups)
	if groups*r.pieces > 1<<31-1 {
		return false
	}
	sc, ok := b.partials(s, r.pieces)
	if !ok {
		return true
	}
	defer sc.unlock()
	var tickets uint64
	if sc != nil {
		tickets = uint64(sc.ticket())
	}
	cfg := cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(groups * r.pieces)}, Block: cudadev.Dim3{X: block}, Stream: s}
	b.launch(kSumCols.stored(dt), cfg, cudadev.ArgBytes(r.bytes()), cudadev.ArgInt32(mode), cudadev.ArgUint64(sc.addr()),
		cudadev.ArgUint64(tickets), cudadev.ArgInt32(int32(min(groups, ticketBytes/4))))
	return true
}

// MaxBackward zeroes dx, then writes g at the positions idx names. An index outside
// the reduction (never one Max wrote) is reported at the next Check and skipped.
func (b *Backend) MaxBackward(dx, g, idx kernels.Operand) {
	const op = "max backward"
	requireFloat(op, dx)
	checkOperand(op, g)
	var r reduction
	newReduction(op, &r, g, dx) // g in the output's place: kstride[0] is g's, [1] dx's
	ip := rowsOf(op, "idx", idx, i64, int(r.nOut))
	b.Fill(dx, 0)
	if r.nOut == 0 {
		return
	}
	r.kstride[0], r.kstride[1] = r.kstride[1], r.kstride[0]
	r.dst, r.dtd, r.src, r.dts = addr(dx), int32(dx.DType), addr(g), int32(g.DType)
	flag, seq, ok := b.flagged()
	if !ok {
		return
	}
	defer b.done()
	b.launch(kMaxBackward.in(in64(dx, g)), b.grid(r.nOut, dx.Mem.Stream),
		cudadev.ArgBytes(r.bytes()), cudadev.ArgUint64(ip), cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
}
