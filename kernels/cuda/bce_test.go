package cuda

import (
	"encoding/binary"
	"math"
	"os"
	"regexp"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// TestBCELaunches: the host side of the binary cross-entropy and Addc kernels, as
// recorded: the operands each walk carries, in kernels/cpu's order, an absent positive
// weight as an immediate 1 (an absent operand reads as 0), the target left out of the
// logits form's target gradient (kernels/cpu does not read it, so a target of another
// shape is no error there), the forward loss armed with the error flag and a fresh
// launch number each call, and Addc's value rounded to float32.
func TestBCELaunches(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	dst, x, y := o.dense(dtype.F16, 4, 5), o.dense(dtype.F32, 4, 5), o.dense(dtype.BF16, 5)
	g, pw := o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5)
	only := func() launchRec {
		t.Helper()
		l, _ := rec.take()
		require.Len(t, l, 1)
		return l[0]
	}

	for seq := uint32(1); seq <= 2; seq++ {
		require.NoError(t, b.BinaryCrossEntropy(dst, x, y))
		l := only()
		assert.Equal(t, kBCE, l.k)
		w := walkOf(t, l.args[0])
		assert.Equal(t, int32(3), w.ops)
		assert.Equal(t, []uint64{addr(dst), addr(x), addr(y)}, w.base[:3])
		require.Len(t, l.args, 3)
		assert.Equal(t, uint64(recordedPtr), l.args[1].bits, "the error flag")
		assert.Equal(t, uint64(seq), l.args[2].bits, "the launch number")
	}
	assert.True(t, b.armed, "the next Check reads the flag")
	require.NoError(t, b.Check(), "the recorded flag is clear")
	assert.False(t, b.armed)

	b.BinaryCrossEntropyBackward(kernels.ArgB, dst, g, x, y)
	l := only()
	assert.Equal(t, kBCEBackward, l.k)
	w := walkOf(t, l.args[0])
	assert.Equal(t, []uint64{addr(dst), addr(g), addr(x), addr(y)}, w.base[:4])
	assert.Equal(t, uint64(kernels.ArgB), l.args[1].bits)

	b.BinaryCrossEntropyWithLogits(dst, x, y, kernels.Operand{})
	w = walkOf(t, only().args[0])
	assert.Equal(t, int32(4), w.ops)
	assert.Equal(t, int32(hdrImm), w.dtype[3], "no positive weight")
	assert.Equal(t, 1.0, w.imm[3], "reads as 1")

	b.BinaryCrossEntropyWithLogitsBackward(kernels.ArgA, dst, g, x, y, pw)
	l = only()
	assert.Equal(t, kBCELogitsBackward, l.k)
	w = walkOf(t, l.args[0])
	assert.Equal(t, int32(5), w.ops, "all five operands in one walk")
	assert.Equal(t, []uint64{addr(dst), addr(g), addr(x), addr(y), addr(pw)}, w.base[:5])
	assert.Equal(t, uint64(kernels.ArgA), l.args[1].bits)

	b.BinaryCrossEntropyWithLogitsBackward(kernels.ArgB, dst, g, x, o.dense(dtype.F32, 3), kernels.Operand{})
	w = walkOf(t, only().args[0])
	assert.Equal(t, []int32{int32(dtype.F16), int32(dtype.F32), int32(dtype.F32), hdrImm, hdrImm}, w.dtype[:])
	assert.Equal(t, 1.0, w.imm[4])

	b.Addc(kernels.Div, dst, x, y, kernels.Scalar(3), 0.1)
	l = only()
	assert.Equal(t, kAddc, l.k)
	w = walkOf(t, l.args[0])
	assert.Equal(t, []uint64{addr(dst), addr(x), addr(y)}, w.base[:3])
	assert.Equal(t, 3.0, w.imm[3])
	assert.Equal(t, uint64(kernels.Div), l.args[1].bits)
	assert.Equal(t, uint64(math.Float32bits(0.1)), l.args[2].bits, "value as float32")

	// No elements: nothing launched, the flag not armed.
	empty := o.dense(dtype.F32, 0, 5)
	require.NoError(t, b.BinaryCrossEntropy(empty, empty, empty))
	l2, _ := rec.take()
	assert.Empty(t, l2)
	assert.False(t, b.armed)
}

// flagBytesOf is an ErrorFlag's bytes as a kernel leaves them.
func flagBytesOf(seq uint32, code int32, fields map[int]int64) []byte {
	raw := make([]byte, hdrSizeofErrorFlag)
	binary.LittleEndian.PutUint32(raw[hdrErrorFlagSeq:], seq)
	binary.LittleEndian.PutUint32(raw[hdrErrorFlagOp:], uint32(code))
	for off, v := range fields {
		binary.LittleEndian.PutUint64(raw[off:], uint64(v))
	}
	return raw
}

// TestFlagRecords: the flag's bytes become the error kernels/cpu returns: a range
// error with the count for binary_cross_entropy, an index error with position, value
// and limit for the others.
func TestFlagRecords(t *testing.T) {
	err := flagRecord(flagBytesOf(3, hdrErrBinaryCrossEntropy, map[int]int64{hdrErrorFlagCount: 70001}))
	var re *kernels.RangeError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, kernels.RangeError{Op: "binary_cross_entropy", Count: 70001, Lo: 0, Hi: 1}, *re)

	err = flagRecord(flagBytesOf(1, hdrErrEmbedding, map[int]int64{hdrErrorFlagPos: 4, hdrErrorFlagIndex: -2, hdrErrorFlagLimit: 9}))
	var ie *kernels.IndexError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, kernels.IndexError{Op: "embedding", Pos: 4, Index: -2, Limit: 9}, *ie)

	assert.Contains(t, flagRecord(flagBytesOf(1, 99, nil)).Error(), "kernel error 99")
}

// TestEveryErrorCodeIsNamed: each ERR_* code of src/common.cuh has its op's name (and
// a range error its domain) in flagErrors, and no name is given twice.
func TestEveryErrorCodeIsNamed(t *testing.T) {
	src, err := os.ReadFile("src/common.cuh")
	require.NoError(t, err)
	defs := regexp.MustCompile(`(?m)^#define ERR_(\w+) (\d+)`).FindAllStringSubmatch(string(src), -1)
	require.NotEmpty(t, defs)
	names := map[string]bool{}
	for _, d := range defs {
		e, ok := flagErrors[int32(atoi(t, d[2]))]
		require.True(t, ok, "ERR_%s has no entry in flagErrors", d[1])
		assert.False(t, names[e.op], "%s is named twice", e.op)
		names[e.op] = true
	}
	assert.Len(t, flagErrors, len(defs))
	assert.True(t, flagErrors[hdrErrBinaryCrossEntropy].isRange)
}

// TestHostRecordReadInPlace: with the record in host memory (here a Go slice standing
// for the page-locked one a GPU's Backend takes), kernels get the record's own address,
// Check reads the error from it with no copy and clears all of it but the lock's
// address, so the next Check after a clean launch is nil.
func TestHostRecordReadInPlace(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	x := o.dense(dtype.F32, 4)
	b.flagMu.Lock()
	require.NoError(t, b.makeFlag())
	b.record = make([]byte, hdrSizeofErrorFlag)
	binary.LittleEndian.PutUint64(b.record[hdrErrorFlagLock:], uint64(b.flag+flagLock))
	b.flagMu.Unlock()
	defer func() { b.record = nil }() // not from HostAlloc: Release must not free it

	require.NoError(t, b.BinaryCrossEntropy(x, x, x))
	l, _ := rec.take()
	require.Len(t, l, 1)
	assert.Equal(t, uint64(uintptr(unsafe.Pointer(&b.record[0]))), l[0].args[1].bits, "the host record's address")
	copy(b.record[hdrErrorFlagSeq:], flagBytesOf(1, hdrErrBinaryCrossEntropy, map[int]int64{hdrErrorFlagCount: 2})[hdrErrorFlagSeq:])
	var re *kernels.RangeError
	require.ErrorAs(t, b.Check(), &re)
	assert.Equal(t, kernels.RangeError{Op: "binary_cross_entropy", Count: 2, Lo: 0, Hi: 1}, *re)
	want := make([]byte, hdrSizeofErrorFlag)
	binary.LittleEndian.PutUint64(want[hdrErrorFlagLock:], uint64(b.flag+flagLock))
	assert.Equal(t, want, b.record, "cleared, the lock's address kept")

	require.NoError(t, b.BinaryCrossEntropy(x, x, x))
	rec.take()
	assert.NoError(t, b.Check())
	held := b.Held()
	assert.Contains(t, held, Held{What: "kernels/cuda error flag", Bytes: flagBytes})
	assert.Contains(t, held, Held{What: "kernels/cuda error record", Bytes: hdrSizeofErrorFlag, Host: true})
}
