package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// TestWordKernelsWhereOperandsAllow: a 16-bit to float32 copy and a 16-bit GeluTanh
// take their kernels of contiguous words (cast_to_f32, gelu_tanh) exactly where the
// operands are dense, of whole words and on the words' alignment, with the words'
// count and addresses as arguments; anything else the general walk.
func TestWordKernelsWhereOperandsAllow(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	offset := func(dt dtype.DType, off int, shape ...int) kernels.Operand {
		l := kernels.Contiguous(shape...)
		l.Offset = off
		return o.over(dt, l, int64(l.Span()+off))
	}
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			name     string
			dst, src kernels.Operand
			want     kernel // 0: the walk's copy
		}{
			{"dense", o.dense(dtype.F32, 6, 8), o.dense(dt, 6, 8), kCastToF32.of16(dt)},
			{"whole words of 4", o.dense(dtype.F32, 3, 4), o.dense(dt, 3, 4), kCastToF32.of16(dt)},
			{"source on 8 bytes", o.dense(dtype.F32, 48), offset(dt, 4, 48), kCastToF32.of16(dt)},
			{"source off 8 bytes", o.dense(dtype.F32, 48), offset(dt, 2, 48), kCopy},
			{"output off 16 bytes", offset(dtype.F32, 2, 48), o.dense(dt, 48), kCopy},
			{"not whole words", o.dense(dtype.F32, 3, 5), o.dense(dt, 3, 5), kCopy},
			{"strided source", o.dense(dtype.F32, 4, 8), o.over(dt, kernels.Layout{Shape: []int{4, 8}, Strides: []int{16, 1}}, 64), kCopy},
			{"broadcast source", o.dense(dtype.F32, 4, 8), o.over(dt, kernels.Layout{Shape: []int{4, 8}, Strides: []int{0, 1}}, 8), kCopy},
		} {
			b.Copy(c.dst, c.src)
			l, _ := rec.take()
			require.Len(t, l, 1, "%v %s", dt, c.name)
			assert.Equal(t, c.want, l[0].k, "%v %s", dt, c.name)
			if c.want != kCopy {
				n := c.dst.Size()
				assert.Equal(t, []uint64{addr(c.src), addr(c.dst), uint64(n / 4)}, []uint64{l[0].args[0].bits, l[0].args[1].bits, l[0].args[2].bits}, "%v %s", dt, c.name)
				assert.Equal(t, uint32((n/4+hdrCastU*block-1)/(hdrCastU*block)), l[0].cfg.Grid.X, "%v %s", dt, c.name)
			}
		}
		for _, c := range []struct {
			name   string
			dst, x kernels.Operand
			op     kernels.UnaryOp
			want   kernel // 0: the walk's unary
		}{
			{"dense", o.dense(dt, 6, 8), o.dense(dt, 6, 8), kernels.GeluTanh, kGeluTanh16.of16(dt)},
			{"another op", o.dense(dt, 6, 8), o.dense(dt, 6, 8), kernels.GeluErf, kUnary},
			{"another input type", o.dense(dt, 6, 8), o.dense(dtype.F32, 6, 8), kernels.GeluTanh, kUnary},
			{"off 16 bytes", o.dense(dt, 48), offset(dt, 4, 48), kernels.GeluTanh, kUnary},
			{"not whole words", o.dense(dt, 3, 4), o.dense(dt, 3, 4), kernels.GeluTanh, kUnary},
			{"strided", o.dense(dt, 4, 8), o.over(dt, kernels.Layout{Shape: []int{4, 8}, Strides: []int{16, 1}}, 64), kernels.GeluTanh, kUnary},
		} {
			b.Unary(c.op, c.dst, c.x)
			l, _ := rec.take()
			require.Len(t, l, 1, "%v %s", dt, c.name)
			assert.Equal(t, c.want, l[0].k, "%v %s", dt, c.name)
			if c.want != kUnary {
				n := c.dst.Size()
				assert.Equal(t, []uint64{addr(c.x), addr(c.dst), uint64(n / 8)}, []uint64{l[0].args[0].bits, l[0].args[1].bits, l[0].args[2].bits}, "%v %s", dt, c.name)
			}
		}
	}
	// F32 to F16 and F32 to F32 keep their paths.
	b.Copy(o.dense(dtype.F16, 4, 8), o.dense(dtype.F32, 4, 8))
	l, _ := rec.take()
	require.Len(t, l, 1)
	assert.Equal(t, kCopy, l[0].k)
}

// TestSumAllWhereOperandsAllow: a float32 Sum or Mean of every element of a dense F16
// or BF16 input cut into two pieces or more, on 16 bytes and in whole words, is one
// launch of sum_all with the stream's scratch and the ticket after it; anything else
// keeps reduce_block and its finishing kernel.
func TestSumAllWhereOperandsAllow(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			name     string
			dst, src kernels.Operand
			mean     bool
			want     []kernel
		}{
			{"sum of 6 pieces", o.dense(dtype.F32), o.dense(dt, 3, 1<<16), false, []kernel{kSumAll.of16(dt)}},
			{"mean of 96 pieces into the input's type", o.dense(dt, 1, 1), o.dense(dt, 48, 1<<16), true, []kernel{kSumAll.of16(dt)}},
			{"off 16 bytes", o.dense(dtype.F32), o.over(dt, kernels.Layout{Shape: []int{1 << 18}, Strides: []int{1}, Offset: 1}, 1<<18+1), false,
				[]kernel{kReduceBlock, kReduceFinish}},
			{"not whole words", o.dense(dtype.F32), o.dense(dt, 3, 1<<16+1), false, []kernel{kReduceBlock, kReduceFinish}},
			{"into F64", o.dense(dtype.F64), o.dense(dt, 3, 1<<16), false, []kernel{kReduceBlock.in(true), kReduceFinish.in(true)}},
			{"one piece", o.dense(dtype.F32), o.dense(dt, 1<<14), false, []kernel{kReduceBlock}},
			{"two outputs", o.dense(dtype.F32, 2, 1), o.dense(dt, 2, 1<<17), false, []kernel{kReduceBlock, kReduceFinish}},
		} {
			if c.mean {
				b.Mean(c.dst, c.src)
			} else {
				b.Sum(c.dst, c.src)
			}
			l, _ := rec.take()
			got := kernelsOf(l)
			require.Equal(t, c.want, got, "%v %s", dt, c.name)
			if got[0] == kSumAll.of16(dt) {
				sc := b.scratch[c.dst.Mem.Stream]
				require.NotNil(t, sc)
				r := reductionOf(t, l[0].args[0])
				assert.Equal(t, uint64(sc.ptr), l[0].args[2].bits, "%v %s: the scratch", dt, c.name)
				assert.Equal(t, uint64(sc.ticket()), l[0].args[3].bits, "%v %s: the ticket after it", dt, c.name)
				assert.Equal(t, uint32(r.pieces), l[0].cfg.Grid.X, "%v %s: a block a piece", dt, c.name)
				assert.Greater(t, r.pieces, int64(1), "%v %s", dt, c.name)
			}
		}
	}
}

// TestRowWordsWhereOperandsAllow: Max over dense F16 or BF16 rows of whole words on 16
// bytes (a warp a row) is max_rows, with the positions' address; Sum, Mean and
// SumSquares are sum_rows, with the mode; anything else keeps reduce_warp.
func TestRowWordsWhereOperandsAllow(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			name     string
			dst, src kernels.Operand
			words    bool
			general  kernel
		}{
			{"rows of 1024", o.dense(dt, 64, 1), o.dense(dt, 64, 1024), true, kReduceWarp},
			{"into F32", o.dense(dtype.F32, 64, 1), o.dense(dt, 64, 1024), true, kReduceWarp},
			{"positions only", kernels.Operand{}, o.dense(dt, 64, 1024), true, kReduceWarp},
			{"rows of 1020", o.dense(dt, 64, 1), o.dense(dt, 64, 1020), false, kReduceWarp},
			{"rows off 16 bytes", o.dense(dt, 4, 1), o.over(dt, kernels.Layout{Shape: []int{4, 1024}, Strides: []int{1028, 1}}, 4*1028), false, kReduceWarp},
			{"input off 16 bytes", o.dense(dt, 4, 1), o.over(dt, kernels.Layout{Shape: []int{4, 1024}, Strides: []int{1024, 1}, Offset: 1}, 4*1024+1), false, kReduceWarp},
			{"into F64", o.dense(dtype.F64, 64, 1), o.dense(dt, 64, 1024), false, kReduceWarp.in(true)},
		} {
			rows := c.src.Shape[0]
			idx := o.dense(dtype.I64, rows, 1)
			b.Max(c.dst, idx, c.src)
			l, _ := rec.take()
			require.Len(t, l, 1, "%v %s", dt, c.name)
			if c.words {
				assert.Equal(t, kMaxRows.of16(dt), l[0].k, "%v %s", dt, c.name)
				assert.Equal(t, addr(idx), l[0].args[1].bits, "%v %s", dt, c.name)
			} else {
				assert.Equal(t, c.general, l[0].k, "%v %s", dt, c.name)
			}
			if c.dst.Absent() {
				continue
			}
			for _, m := range []struct {
				mode int32
				run  func(dst, src kernels.Operand)
			}{{hdrRedSum, b.Sum}, {hdrRedMean, b.Mean}, {hdrRedSumSq, b.SumSquares}} {
				m.run(c.dst, c.src)
				l, _ := rec.take()
				require.Len(t, l, 1, "%v %s", dt, c.name)
				if c.words {
					assert.Equal(t, kSumRows.of16(dt), l[0].k, "%v %s", dt, c.name)
					assert.Equal(t, uint64(m.mode), l[0].args[1].bits, "%v %s: the mode", dt, c.name)
				} else {
					assert.Equal(t, c.general, l[0].k, "%v %s", dt, c.name)
				}
			}
		}
	}
}

// TestSumColsWhereOperandsAllow: a float32 Sum, Mean or SumSquares over the rows of a
// matrix of F32, F16 or BF16 whose columns are dense, whole 16-byte words and on 16 bytes
// is one launch of sum_cols: a block per column group and piece of the rows, about
// colsWordBlocks of them, with the stream's scratch and its tickets where there are
// several pieces; anything else keeps reduce_cols or reduce_thread.
func TestSumColsWhereOperandsAllow(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	for _, c := range []struct {
		name           string
		dst, src       kernels.Operand
		want           []kernel
		groups, pieces int64
	}{
		{"F32 bias gradient", o.dense(dtype.F32, 1024), o.dense(dtype.F32, 65536, 1024), []kernel{kSumCols}, 8, 33},
		{"F16", o.dense(dtype.F16, 1, 1024), o.dense(dtype.F16, 65536, 1024), []kernel{kSumCols.stored(dtype.F16)}, 4, 66},
		{"BF16 into F32", o.dense(dtype.F32, 1024), o.dense(dtype.BF16, 65536, 1024), []kernel{kSumCols.stored(dtype.BF16)}, 4, 66},
		{"F16 of 4096 columns", o.dense(dtype.F16, 4096), o.dense(dtype.F16, 4096, 4096), []kernel{kSumCols.stored(dtype.F16)}, 16, 17},
		{"one piece", o.dense(dtype.F32, 8), o.dense(dtype.F32, 6, 8), []kernel{kSumCols}, 1, 1},
		{"a group half full", o.dense(dtype.BF16, 40), o.dense(dtype.BF16, 5000, 40), []kernel{kSumCols.stored(dtype.BF16)}, 1, 39},
		{"rows apart by more than their length", o.dense(dtype.F32, 40),
			o.over(dtype.F32, kernels.Layout{Shape: []int{500, 40}, Strides: []int{44, 1}}, 500*44), []kernel{kSumCols}, 1, 3},
		{"F16 columns of 4", o.dense(dtype.F16, 36), o.dense(dtype.F16, 256, 36), []kernel{kReduceCols, kReduceFinish}, 0, 0},
		{"input off 16 bytes", o.dense(dtype.F32, 8),
			o.over(dtype.F32, kernels.Layout{Shape: []int{8, 8}, Strides: []int{8, 1}, Offset: 2}, 66), []kernel{kReduceThread}, 0, 0},
		{"into F64", o.dense(dtype.F64, 1024), o.dense(dtype.F32, 4096, 1024), []kernel{kReduceCols.in(true), kReduceFinish.in(true)}, 0, 0},
		{"F64", o.dense(dtype.F64, 1024), o.dense(dtype.F64, 4096, 1024), []kernel{kReduceCols.in(true), kReduceFinish.in(true)}, 0, 0},
	} {
		b.Sum(c.dst, c.src)
		l, _ := rec.take()
		got := kernelsOf(l)
		require.Equal(t, c.want, got, c.name)
		if c.groups == 0 {
			continue
		}
		r := reductionOf(t, l[0].args[0])
		assert.Equal(t, c.pieces, r.pieces, "%s: pieces", c.name)
		assert.Equal(t, uint32(c.groups*c.pieces), l[0].cfg.Grid.X, "%s: a block a group and piece", c.name)
		assert.Equal(t, uint64(min(c.groups, ticketBytes/4)), l[0].args[4].bits, "%s: ticket classes", c.name)
		if c.pieces == 1 {
			assert.Zero(t, l[0].args[2].bits, "%s: no scratch", c.name)
			continue
		}
		sc := b.scratch[c.dst.Mem.Stream]
		require.NotNil(t, sc)
		assert.Equal(t, uint64(sc.ptr), l[0].args[2].bits, "%s: the scratch", c.name)
		assert.Equal(t, uint64(sc.ticket()), l[0].args[3].bits, "%s: the tickets after it", c.name)
	}
}

// TestTransposeWordsWhereOperandsAllow: a transposed view made dense takes
// copy_transpose_words (tiles of 128 bytes by hdrTwordsCols columns) for 2- and 4-byte
// elements exactly where every output row and source column is whole 16-byte words on
// the words' alignment, copy_transpose (tiles of hdrTile elements) otherwise.
func TestTransposeWordsWhereOperandsAllow(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	tr := func(dt dtype.DType, rows, cols, ld, off int) kernels.Operand {
		return o.over(dt, kernels.Layout{Shape: []int{rows, cols}, Strides: []int{1, ld}, Offset: off}, int64(cols*ld+off))
	}
	for _, c := range []struct {
		name     string
		dt       dtype.DType
		dst, src kernels.Operand
		tiles    int64 // of the kernel wanted
		words    bool
	}{
		{"F32", dtype.F32, o.dense(dtype.F32, 64, 128), tr(dtype.F32, 64, 128, 64, 0), 2 * 2, true},
		{"F16", dtype.F16, o.dense(dtype.F16, 64, 128), tr(dtype.F16, 64, 128, 64, 0), 1 * 2, true},
		{"BF16, partial tiles", dtype.BF16, o.dense(dtype.BF16, 72, 136), tr(dtype.BF16, 72, 136, 80, 8), 2 * 3, true},
		{"F32, source off 16 bytes", dtype.F32, o.dense(dtype.F32, 64, 128), tr(dtype.F32, 64, 128, 64, 2), 2 * 4, false},
		{"F32, column pitch not whole words", dtype.F32, o.dense(dtype.F32, 64, 128), tr(dtype.F32, 64, 128, 66, 0), 2 * 4, false},
		{"F16, rows not whole words", dtype.F16, o.dense(dtype.F16, 64, 124), tr(dtype.F16, 64, 124, 64, 0), 2 * 4, false},
		{"F16, output pitch not whole words", dtype.F16, o.over(dtype.F16, kernels.Layout{Shape: []int{64, 128}, Strides: []int{130, 1}}, 64*130), tr(dtype.F16, 64, 128, 64, 0), 2 * 4, false},
		{"F64", dtype.F64, o.dense(dtype.F64, 64, 128), tr(dtype.F64, 64, 128, 64, 0), 2 * 4, false},
		{"I32", dtype.I32, o.dense(dtype.I32, 64, 128), tr(dtype.I32, 64, 128, 64, 0), 2 * 2, true},
	} {
		b.Copy(c.dst, c.src)
		l, _ := rec.take()
		require.Len(t, l, 1, c.name)
		want := kCopyTranspose
		if c.words {
			want = kCopyTransposeWords
		}
		assert.Equal(t, want, l[0].k, c.name)
		assert.Equal(t, uint32(c.tiles), l[0].cfg.Grid.X, c.name)
	}
}

// kernelsOf is the kernels of the launches l, in launch order.
func kernelsOf(l []launchRec) []kernel {
	ks := make([]kernel, len(l))
	for i, x := range l {
		ks[i] = x.k
	}
	return ks
}
