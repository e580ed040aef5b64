package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// TestRowKernelForms: softmax, layer norm and their backward keep float32 and 16-bit
// rows of up to regsRow in registers, a warp a row up to warpRow and a block beyond;
// 16-bit rows for a block of up to regs4Row get the block4 form (4 chunk slots a
// thread), longer ones the block form; 16 bytes a load when a row is whole 16-byte
// words, longer rows from memory. The grid is a block per 8 rows for a warp, a block a
// row otherwise.
func TestRowKernelForms(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	const rows = 16
	for _, st := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			n    int
			form string // of the register-row kernels; "" reads rows from memory
		}{
			{1024, "warp"},
			{1032, "block"},
			{4096, "block"},
			{4100, "block"},
			{8192, "block"},
			{8200, ""},
		} {
			form, word := c.form, 16/st.Size()
			if st.Size() == 2 && form == "block" && c.n <= regs4Row {
				form = "block4"
			}
			suf := "_" + suffix(st)
			if c.n%word == 0 {
				suf += "_v16"
			}
			blocks := uint32(rows)
			if c.form == "warp" {
				blocks = rows / 8
			}
			x, w := o.dense(st, rows, c.n), o.dense(st, c.n)
			stats := func() kernels.Operand { return o.dense(dtype.F32, rows) }
			for _, k := range []struct {
				name string
				run  func()
			}{
				{"softmax_regs_", func() { b.Softmax(x, x, rows, c.n, 1) }},
				{"softmax_backward_regs_", func() { b.LogSoftmaxBackward(x, x, x, rows, c.n, 1) }},
				{"layer_norm_regs_", func() { b.LayerNorm(x, stats(), stats(), x, w, w, rows, c.n, 1e-5) }},
				{"layer_norm_dx_regs_", func() {
					b.LayerNormBackward(x, kernels.Operand{}, kernels.Operand{}, x, x, stats(), stats(), w, rows, c.n)
				}},
			} {
				what := fmt.Sprintf("%s over %v rows of %d", k.name, st, c.n)
				ls := launched(rec, k.run)
				require.Len(t, ls, 1, what)
				if form == "" {
					assert.NotContains(t, entries[ls[0].k].name, "_regs_", what)
					continue
				}
				assert.Equal(t, k.name+form+suf, entries[ls[0].k].name, what)
				assert.Equal(t, blocks, ls[0].cfg.Grid.X, what)
			}
		}
	}
}
