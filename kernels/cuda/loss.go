package cuda

import (
	"math"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// msePiece is the elements one block sums before partials are combined.
const msePiece = 1 << 15

// ceMaxBlocks bounds the blocks of the cross-entropy forward (a block's groups then
// take every ceMaxBlocks-th row group): enough to fill the card, and their parts fit in
// the scratch. The grid depends on n and c only, so the loss's bits do too.
const ceMaxBlocks = 2048

// CrossEntropy computes in the logits' type (F32 or F64; lse is of it too), or in
// float32 for F16 and BF16 logits (lse F32), in one launch: its last block sums the
// blocks' parts (taking a ticket in the stream's scratch). It returns nil: a label
// outside [0, c) is found on the GPU and reported by the next Check as a
// *kernels.IndexError of "cross_entropy" (its row is left out of the loss meanwhile).
func (b *Backend) CrossEntropy(loss, lse, logits, labels kernels.Operand, n, c int, ignore int64) error {
	const op = "cross_entropy"
	checkAxis(op, n, c, 1)
	pl, dtl := floatScalar(op, "the loss", loss)
	st := rowStorage(logits)
	plse := rowsOf(op, "lse", lse, rowType(logits), n+1)
	px, plab := rowsOf(op, "logits", logits, st, n*c), rowsOf(op, "labels", labels, i64, n)
	s := loss.Mem.Stream
	k, g := rowKernel(kCrossEntropyRegsWarp, kCrossEntropyRegs16Warp, kCrossEntropyRowsWarp, st, c, px)
	cfg := rowsGrid(int64(n), g, s)
	cfg.Grid.X = min(cfg.Grid.X, ceMaxBlocks)
	sc, ok := b.useScratch(s)
	if !ok {
		return nil
	}
	defer sc.mu.Unlock()
	flag, seq, ok := b.flagged()
	if !ok {
		return nil
	}
	defer b.done()
	b.launch(k, cfg, cudadev.ArgUint64(pl), cudadev.ArgInt32(dtl), cudadev.ArgUint64(plse), cudadev.ArgUint64(px), cudadev.ArgUint64(plab),
		cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(int64(c)), cudadev.ArgInt64(ignore), cudadev.ArgPtr(sc.ptr), cudadev.ArgPtr(sc.ticket()),
		cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
	return nil
}

// oneBlock is the launch shape of a kernel that runs as a single block.
func oneBlock(s device.Stream) cudadev.LaunchConfig {
	return cudadev.LaunchConfig{Grid: cudadev.Dim3{X: 1}, Block: cudadev.Dim3{X: block}, Stream: s}
}

// CrossEntropyBackward computes as CrossEntropy does, in one launch: each thread
// divides g (rounded to the compute type) by the count CrossEntropy left in lse[n].
func (b *Backend) CrossEntropyBackward(dlogits, logits, lse, labels, g kernels.Operand, n, c int, ignore int64) {
	const op = "cross_entropy backward"
	checkAxis(op, n, c, 1)
	st := rowStorage(logits)
	pd, px := rowsOf(op, "dlogits", dlogits, st, n*c), rowsOf(op, "logits", logits, st, n*c)
	plse, plab := rowsOf(op, "lse", lse, rowType(logits), n+1), rowsOf(op, "labels", labels, i64, n)
	pg, dtg := floatScalar(op, "the gradient", g)
	if n*c == 0 {
		return
	}
	flag, seq, ok := b.flagged()
	if !ok {
		return
	}
	defer b.done()
	s := dlogits.Mem.Stream
	if b.crossEntropyBackwardWords(st, pd, px, plse, plab, pg, dtg, n, c, ignore, flag, seq, s) {
		return
	}
	cfg := b.grid(int64(n*c), s)
	k := kCrossEntropyBackward.in(st == dtype.F64)
	switch st {
	case dtype.F16:
		k = kCrossEntropyBackward16
	case dtype.BF16:
		k = kCrossEntropyBackward16 + vRegsBF16
	}
	var args [11]cudadev.Arg
	args[0], args[1], args[2], args[3] = cudadev.ArgUint64(pd), cudadev.ArgUint64(px), cudadev.ArgUint64(plse), cudadev.ArgUint64(plab)
	if int64(n*c)+int64(cfg.Grid.X)*block > 1<<31-1 {
		k += vWide
		args[4], args[5] = cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(int64(c))
	} else {
		args[4], args[5] = cudadev.ArgInt32(int32(n)), cudadev.ArgInt32(int32(c))
	}
	args[6], args[7], args[8] = cudadev.ArgInt64(ignore), cudadev.ArgUint64(pg), cudadev.ArgInt32(dtg)
	args[9], args[10] = cudadev.ArgUint64(flag), cudadev.ArgUint32(seq)
	b.launch(k, cfg, args[:]...)
}

// crossEntropyBackwardWords launches CrossEntropyBackward's word kernel (16 bytes a
// load and a store, a word's row looked up once) when its operands allow: a row a
// whole number of words, dlogits and logits on 16 bytes, the words' int indices below
// 2³¹-1. It reports whether it did.
func (b *Backend) crossEntropyBackwardWords(st dtype.DType, pd, px, plse, plab, pg uint64, dtg int32, n, c int, ignore int64, flag uint64, seq uint32, s device.Stream) bool {
	e := 16 / st.Size()
	if c%e != 0 || pd%16 != 0 || px%16 != 0 {
		return false
	}
	words := int64(n * c / e)
	cfg := b.grid((words+hdrCEU-1)/hdrCEU, s)
	if words+int64(cfg.Grid.X)*block*hdrCEU > math.MaxInt32 || c > math.MaxInt32 {
		return false
	}
	b.launch(kCrossEntropyBackwardWords.stored(st), cfg, cudadev.ArgUint64(pd), cudadev.ArgUint64(px), cudadev.ArgUint64(plse), cudadev.ArgUint64(plab),
		cudadev.ArgInt32(int32(n)), cudadev.ArgInt32(int32(c)), cudadev.ArgInt64(ignore), cudadev.ArgUint64(pg), cudadev.ArgInt32(dtg),
		cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
	return true
}

// MSE computes in a's type (F32 or F64, b's too) and rounds the mean to it, then to
// the loss's type, as kernels/cpu does.
func (b *Backend) MSE(loss, x, y kernels.Operand) {
	const op = "mse"
	pl, dtl := floatScalar(op, "the loss", loss)
	n := x.Size()
	ft := rowType(x)
	f64 := ft == dtype.F64
	px, py := rowsOf(op, "a", x, ft, n), rowsOf(op, "b", y, ft, n)
	s := loss.Mem.Stream
	pieces := max(1, min((int64(n)+msePiece-1)/msePiece, scratchBytes/8))
	piece := max(1, (int64(n)+pieces-1)/pieces)
	sc, ok := b.partials(s, pieces)
	if !ok {
		return
	}
	defer sc.unlock()
	part := sc.addr()
	cfg := oneBlock(s)
	cfg.Grid.X = uint32(pieces)
	b.launch(kMSEPartial.in(f64), cfg, cudadev.ArgUint64(pl), cudadev.ArgInt32(dtl), cudadev.ArgUint64(px), cudadev.ArgUint64(py),
		cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(piece), cudadev.ArgUint64(part))
	if pieces > 1 {
		b.launch(kSumFinish.in(f64), oneBlock(s), cudadev.ArgUint64(pl), cudadev.ArgInt32(dtl), cudadev.ArgUint64(part),
			cudadev.ArgInt64(pieces), cudadev.ArgInt64(int64(n)))
	}
}

// MSEBackward computes in a's type, g rounded to it.
func (b *Backend) MSEBackward(da, db, x, y, g kernels.Operand) {
	const op = "mse backward"
	n := x.Size()
	ft := rowType(x)
	px, py := rowsOf(op, "a", x, ft, n), rowsOf(op, "b", y, ft, n)
	pda, pdb := rowsOf(op, "da", da, ft, n), rowsOf(op, "db", db, ft, n)
	pg, dtg := floatScalar(op, "the gradient", g)
	if n == 0 || pda == 0 && pdb == 0 {
		return
	}
	s := x.Mem.Stream
	if !da.Absent() {
		s = da.Mem.Stream
	} else if !db.Absent() {
		s = db.Mem.Stream
	}
	b.launch(kMSEBackward.in(ft == dtype.F64), b.grid(int64(n), s), cudadev.ArgUint64(pda), cudadev.ArgUint64(pdb), cudadev.ArgUint64(px),
		cudadev.ArgUint64(py), cudadev.ArgInt64(int64(n)), cudadev.ArgUint64(pg), cudadev.ArgInt32(dtg))
}
