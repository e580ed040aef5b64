package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// manifest is gen/manifest.json as scripts/gpu/gen_kernels.sh writes it.
type manifest struct {
	NVCC        string            `json:"nvcc"`
	PTXISA      string            `json:"ptx_isa"`
	PTXFlags    string            `json:"ptx_flags"`
	FatbinFlags string            `json:"fatbin_flags"`
	Sources     map[string]string `json:"sources"`
	Outputs     map[string]string `json:"outputs"`
	ZConst      string            `json:"zconst.go"`
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestGeneratedFilesMatchManifest fails when a file of src changed (or was added or
// removed) without scripts/gpu/gen_kernels.sh being run again, or when an output was
// edited by hand: the committed PTX and fatbins are then not what the sources make.
func TestGeneratedFilesMatchManifest(t *testing.T) {
	skipWithoutPTX(t)
	raw, err := os.ReadFile("gen/manifest.json")
	require.NoError(t, err)
	var m manifest
	require.NoError(t, json.Unmarshal(raw, &m))
	const fix = "run scripts/gpu/gen_kernels.sh (needs nvcc >= 11.8, no GPU) and commit gen/ and zconst.go"

	srcs, err := filepath.Glob("src/*")
	require.NoError(t, err)
	var names []string
	for _, p := range srcs {
		names = append(names, filepath.ToSlash(p))
	}
	var listed []string
	for n := range m.Sources {
		listed = append(listed, n)
	}
	slices.Sort(listed)
	require.Equal(t, listed, names, "the sources in src/ and in gen/manifest.json differ: %s", fix)
	for _, n := range names {
		assert.Equal(t, m.Sources[n], sha256File(t, n), "%s changed since gen/ was made: %s", n, fix)
	}
	for n, sum := range m.Outputs {
		assert.Equal(t, sum, sha256File(t, n), "%s is not the generator's output: %s", n, fix)
	}
	assert.Equal(t, m.ZConst, sha256File(t, "zconst.go"), "zconst.go is not the generator's output: %s", fix)

	// Every family is compiled and embedded.
	for _, f := range familyNames {
		assert.Contains(t, m.Outputs, "gen/"+f+".fatbin")
		assert.Contains(t, m.Outputs, "gen/"+f+".ptx")
		b, err := fatbins.ReadFile("gen/" + f + ".fatbin")
		require.NoError(t, err, f)
		assert.Equal(t, []byte{0x50, 0xed, 0x55, 0xba}, b[:4], "gen/%s.fatbin starts with the fatbin magic", f)
	}
	// Every product and sum rounds on its own (doc.go, "Numbers"): the flag is in the
	// PTX's compilation and in ptxas's.
	assert.Contains(t, strings.Fields(m.PTXFlags), "-fmad=false")
	assert.Contains(t, strings.Fields(m.FatbinFlags), "-fmad=false")
	t.Logf("gen/ from %s, PTX ISA %s", m.NVCC, m.PTXISA)
}

// TestStructLayouts checks the Go mirrors of src/common.cuh's structs against the
// sizes and offsets nvcc gave them (zconst.go).
func TestStructLayouts(t *testing.T) {
	var w walk
	assert.Equal(t, uintptr(hdrSizeofWalk), unsafe.Sizeof(w))
	assert.Equal(t, uintptr(hdrWalkRank), unsafe.Offsetof(w.rank))
	assert.Equal(t, uintptr(hdrWalkShape), unsafe.Offsetof(w.shape))
	assert.Equal(t, uintptr(hdrWalkStride), unsafe.Offsetof(w.stride))
	assert.Equal(t, uintptr(hdrWalkBase), unsafe.Offsetof(w.base))
	assert.Equal(t, uintptr(hdrWalkDtype), unsafe.Offsetof(w.dtype))
	assert.Equal(t, uintptr(hdrWalkImm), unsafe.Offsetof(w.imm))
	var r reduction
	assert.Equal(t, uintptr(hdrSizeofReduction), unsafe.Sizeof(r))
	assert.Equal(t, uintptr(hdrReductionKshape), unsafe.Offsetof(r.kshape))
	assert.Equal(t, uintptr(hdrReductionKstride), unsafe.Offsetof(r.kstride))
	assert.Equal(t, uintptr(hdrReductionRshape), unsafe.Offsetof(r.rshape))
	assert.Equal(t, uintptr(hdrReductionRstride), unsafe.Offsetof(r.rstride))
	assert.Equal(t, uintptr(hdrReductionDst), unsafe.Offsetof(r.dst))
	assert.Equal(t, uintptr(hdrReductionDtd), unsafe.Offsetof(r.dtd))
	assert.Equal(t, uintptr(hdrReductionPiece), unsafe.Offsetof(r.piece))
	assert.Equal(t, uintptr(hdrReductionPieces), unsafe.Offsetof(r.pieces))
	var a acc
	assert.Equal(t, uintptr(hdrSizeofAcc), unsafe.Sizeof(a))
	assert.Equal(t, uintptr(hdrAccMax), unsafe.Offsetof(a.max))
	assert.Equal(t, uintptr(hdrAccArg), unsafe.Offsetof(a.arg))
	var mt mat
	assert.Equal(t, uintptr(hdrSizeofMat), unsafe.Sizeof(mt))
	assert.Equal(t, uintptr(hdrMatCs), unsafe.Offsetof(mt.cs))
	var ol optimList
	assert.Equal(t, uintptr(hdrSizeofOptimList), unsafe.Sizeof(ol))
	assert.Equal(t, uintptr(hdrOptimListP), unsafe.Offsetof(ol.p))
	assert.Equal(t, uintptr(hdrOptimListN), unsafe.Offsetof(ol.n))
	assert.Equal(t, uintptr(hdrOptimListStepSize), unsafe.Offsetof(ol.stepSize))
	assert.Equal(t, uintptr(hdrOptimListFirst), unsafe.Offsetof(ol.first))
	assert.Equal(t, uintptr(hdrOptimListCount), unsafe.Offsetof(ol.count))
	var sl scaleList
	assert.Equal(t, uintptr(hdrSizeofScaleList), unsafe.Sizeof(sl))
	assert.Equal(t, uintptr(hdrScaleListG), unsafe.Offsetof(sl.g))
	assert.Equal(t, uintptr(hdrScaleListN), unsafe.Offsetof(sl.n))
	assert.Equal(t, uintptr(hdrScaleListDtype), unsafe.Offsetof(sl.dtype))
	assert.Equal(t, uintptr(hdrScaleListCount), unsafe.Offsetof(sl.count))
	// The device block holds a record and, after it, the lock (an int, 4-aligned); the
	// record starts with the lock's address.
	assert.LessOrEqual(t, flagLock+4, flagBytes)
	assert.Zero(t, flagLock%4)
	assert.Equal(t, 0, hdrErrorFlagLock)
	assert.LessOrEqual(t, hdrErrorFlagLock+8, hdrErrorFlagSeq, "the lock pointer comes before what Check clears")
}

// TestCodesMatchHeaders checks that src/common.cuh's codes are package dtype's and
// package kernels' values.
func TestCodesMatchHeaders(t *testing.T) {
	assert.Equal(t, []int{hdrF32, hdrF16, hdrBF16, hdrI32, hdrI64, hdrBool, hdrF64},
		[]int{int(dtype.F32), int(dtype.F16), int(dtype.BF16), int(dtype.I32), int(dtype.I64), int(dtype.Bool), int(dtype.F64)})
	assert.Equal(t, int(kernels.Neg), hdrNeg)
	assert.Equal(t, int(kernels.GeluErf), hdrGeluErf)
	assert.Equal(t, int(kernels.Add), hdrAdd)
	assert.Equal(t, int(kernels.Minimum), hdrMinimum)
	assert.Equal(t, int(kernels.ArgA), hdrArgA)
	assert.Equal(t, int(kernels.ArgB), hdrArgB)
	assert.Equal(t, kernels.MaxRank, hdrMaxRank)
	// The codes in between: every #define of the op enums, in order.
	src, err := os.ReadFile("src/common.cuh")
	require.NoError(t, err)
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (OP_\w+) (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]] = atoi(t, m[2])
	}
	for op := kernels.Neg; op.Valid(); op++ {
		assert.Equal(t, int(op), defs["OP_"+upper(op.String())], "unary %v", op)
	}
	for op := kernels.Add; op.Valid(); op++ {
		assert.Equal(t, int(op), defs["OP_"+upper(op.String())], "binary %v", op)
	}
}

// upper turns an op's name into its #define: "gelu_tanh" → "GELU_TANH"; kernels names
// the erf form "gelu", the header GELU_ERF.
func upper(s string) string {
	if s == "gelu" {
		return "GELU_ERF"
	}
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
