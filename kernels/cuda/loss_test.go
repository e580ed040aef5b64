package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// TestCrossEntropyIsOneLaunchEachWay: the forward is one launch (its last block
// finishes the loss) and the backward one (each thread divides g by lse[n]), over
// logits stored as each row type, whatever the rows; the forward's grid stops at
// ceMaxBlocks, and rows for a block (c > 1024) get a block each.
func TestCrossEntropyIsOneLaunchEachWay(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	for _, st := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		word := 16 / st.Size() // elements a 16-byte word
		for _, c := range []struct {
			n, c   int
			blocks uint32
			form   string // the forward's: "warp" or "block"
		}{
			{5, 10, 1, "warp"},
			{0, 10, 1, "warp"},
			{3000, 10, 375, "warp"},
			{100000, 10, ceMaxBlocks, "warp"},
			{40, 1500, 40, "block"},
			{5000, 1500, ceMaxBlocks, "block"},
			{7, 1024, 1, "warp"},
			{3, 4096, 3, "block"},
			{2, 9000, 2, "block"},
		} {
			what := fmt.Sprintf("%v [%d, %d]", st, c.n, c.c)
			lt := rowType(kernels.Operand{DType: st})
			x, lse, labels := o.dense(st, c.n, c.c), o.dense(lt, c.n+1), o.dense(dtype.I64, c.n)
			// The forward keeps float32, F16 and BF16 rows of up to regsRow in registers
			// (16 bytes a load when a row is whole words), reads the others from memory;
			// 16-bit rows for a block of up to regs4Row get the block4 form.
			want := "cross_entropy_rows_" + c.form + "_" + suffix(st)
			if st != dtype.F64 && c.c <= regsRow {
				form := c.form
				if st.Size() == 2 && form == "block" && c.c <= regs4Row {
					form = "block4"
				}
				want = "cross_entropy_regs_" + form + "_" + suffix(st)
				if c.c%word == 0 {
					want += "_v16"
				}
			}
			ls := launched(rec, func() { require.NoError(t, b.CrossEntropy(o.dense(dtype.F32), lse, x, labels, c.n, c.c, -100)) })
			require.Len(t, ls, 1, "%s: the forward's launches", what)
			assert.Equal(t, want, entries[ls[0].k].name, what)
			assert.Equal(t, c.blocks, ls[0].cfg.Grid.X, "%s: the forward's blocks", what)
			ls = launched(rec, func() { b.CrossEntropyBackward(x, x, lse, labels, o.dense(dtype.BF16), c.n, c.c, -100) })
			if c.n == 0 {
				assert.Empty(t, ls, "%s: a backward without elements launches nothing", what)
				continue
			}
			// The backward moves 16-byte words when a row is whole words.
			want = "cross_entropy_backward_" + suffix(st) + "_i32"
			if c.c%word == 0 {
				want = "cross_entropy_backward_words_" + suffix(st)
				words := c.n * c.c / word
				assert.Equal(t, uint32(min((words+hdrCEU*block-1)/(hdrCEU*block), 32*b.sms)), ls[0].cfg.Grid.X, "%s: the backward's blocks", what)
			}
			require.Len(t, ls, 1, "%s: the backward's launches", what)
			assert.Equal(t, want, entries[ls[0].k].name, what)
		}
	}
	// Rows off 16 bytes: element by element.
	x := o.over(dtype.F16, kernels.Layout{Shape: []int{4, 1024}, Strides: []int{1024, 1}, Offset: 1}, 4*1024+1)
	lse, labels := o.dense(dtype.F32, 5), o.dense(dtype.I64, 4)
	ls := launched(rec, func() { require.NoError(t, b.CrossEntropy(o.dense(dtype.F16), lse, x, labels, 4, 1024, -100)) })
	require.Len(t, ls, 1)
	assert.Equal(t, "cross_entropy_regs_warp_f16", entries[ls[0].k].name)
	ls = launched(rec, func() { b.CrossEntropyBackward(x, x, lse, labels, o.dense(dtype.F16), 4, 1024, -100) })
	require.Len(t, ls, 1)
	assert.Equal(t, "cross_entropy_backward_f16_i32", entries[ls[0].k].name)
}

// suffix is a row storage type's kernel suffix.
func suffix(st dtype.DType) string {
	return map[dtype.DType]string{dtype.F32: "f32", dtype.F64: "f64", dtype.F16: "f16", dtype.BF16: "bf16"}[st]
}

// TestCrossEntropyLseHoldsTheCount: lse must have a place for the count after the rows'
// log-sum-exps, in the compute type (F32 for 16-bit logits).
func TestCrossEntropyLseHoldsTheCount(t *testing.T) {
	b, _ := newRecording(t)
	var o operands
	x, labels := o.dense(dtype.F16, 4, 5), o.dense(dtype.I64, 4)
	requirePanicNaming(t, "lse has 4 elements, want 5", func() { _ = b.CrossEntropy(o.dense(dtype.F32), o.dense(dtype.F32, 4), x, labels, 4, 5, -100) })
	requirePanicNaming(t, "contiguous float32", func() { _ = b.CrossEntropy(o.dense(dtype.F32), o.dense(dtype.F16, 5), x, labels, 4, 5, -100) })
	requirePanicNaming(t, "lse has 4 elements, want 5", func() {
		b.CrossEntropyBackward(x, x, o.dense(dtype.F32, 4), labels, o.dense(dtype.F32), 4, 5, -100)
	})
}
