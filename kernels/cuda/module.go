package cuda

import (
	"embed"
	"fmt"
	"sync"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
)

// fatbins holds gen/FAMILY.fatbin for every family: SASS for sm_80 and sm_90 and PTX
// for compute_80, made by scripts/gpu/gen_kernels.sh from src/FAMILY.cu.
//
//go:embed gen/*.fatbin
var fatbins embed.FS

// family is one source file of src and its fatbin: the kernels loaded together.
type family uint8

const (
	famElementwise family = iota
	famCopy
	famReduce
	famSoftmax
	famLayerNorm
	famLoss
	famEmbedding
	famDropout
	famOptim
	famAmp
	famGemm
	famCompare
	numFamilies
)

var familyNames = [numFamilies]string{
	famElementwise: "elementwise",
	famCopy:        "copy",
	famReduce:      "reduce",
	famSoftmax:     "softmax",
	famLayerNorm:   "layernorm",
	famLoss:        "loss",
	famEmbedding:   "embedding",
	famDropout:     "dropout",
	famOptim:       "optim",
	famAmp:         "amp",
	famGemm:        "gemm",
	famCompare:     "compare",
}

// kernel names one entry point: a base below plus a variant. Each base owns variants
// consecutive numbers, one per compute type and index width (vF64, vWide); its form
// says which of them exist and what they are called in the fatbin.
type kernel uint16

// The variants of a base: the compute type (float32, or float64 when an operand is
// F64, +vF64) and, for kernels over a Walk, the index width (32-bit, or 64-bit where an
// offset passes 2³¹-1, +vWide; see wide).
const (
	vWide    = 1
	vF64     = 2
	variants = 4
	// vV16 is formV16's and formRegs16's variant that moves 16 bytes a load (the bit
	// vWide has in formWalk).
	vV16 = vWide
	// vF16 and vBF16 are formStore's variants for rows stored as F16 and BF16 (F32 and
	// F64 are its 0 and vF64).
	vF16  = vWide
	vBF16 = vWide + vF64
	// vRegsBF16 is formRegs16's, formWalk16's and form16's variant for BF16 (F16's is
	// 0), beside which the first two have their vV16 (formWalk16: vWide) one.
	vRegsBF16 = vF64
)

// The bases, variants apart.
const (
	// famElementwise, over a Walk (formWalk).
	kUnary kernel = iota * variants
	kUnaryBackward
	kBinary
	kBinaryBackward
	kAxpy
	kDropout
	kBCE
	kBCEBackward
	kBCELogits
	kBCELogitsBackward
	kAddc
	kGeluTanh16 // form16: Unary(GeluTanh) over contiguous F16 or BF16
	// famCopy.
	kCopy
	kFill               // formIndex: the bits are the host's, no compute type
	kCopyTranspose      // formOne: the bits as they are
	kCopyTransposeWords // formOne: the same, 16-byte words of 2- or 4-byte elements
	kCastToF32          // form16: contiguous F16 or BF16 to F32
	// famReduce.
	kNonFinite // formWalk
	kReduceThread
	kReduceBlock
	kReduceCols
	kReduceWarp
	kReduceFinish
	kReduceFinishBlock
	kMaxBackward
	kSumAll  // form16: Sum or Mean of all of a dense F16 or BF16 input, one launch
	kMaxRows // form16: Max over dense rows of F16 or BF16, a warp a row
	kSumRows // form16: Sum, Mean or SumSquares over dense rows of F16 or BF16, a warp a row
	kSumCols // formWords: Sum, Mean or SumSquares over the rows of dense columns, one launch
	// famAmp.
	kUnscale      // formWalk
	kUnscaleMulti // formOne: the compute type follows each gradient's type
	// famLoss.
	kCrossEntropyBackward      // formWalk: a thread per element, 32- or 64-bit indices
	kCrossEntropyBackward16    // formWalk16: the same over F16 and BF16 logits
	kCrossEntropyBackwardWords // formStore: 16-byte words, c a multiple of a word's elements
	kCrossEntropyRowsWarp      // formF64: float64 rows a warp reads from memory
	kCrossEntropyRowsBlock     // formStore
	kCrossEntropyRegsWarp      // formV16, and the one below
	kCrossEntropyRegsBlock     //
	kCrossEntropyRegs16Warp    // formRegs16, and the two below (rowKernel: warp, block, block4)
	kCrossEntropyRegs16Block   //
	kCrossEntropyRegs16Block4  //
	kMSEPartial
	kSumFinish
	kMSEBackward
	// famSoftmax.
	kSoftmaxRowsWarp
	kSoftmaxRowsBlock
	kSoftmaxBackwardRowsWarp
	kSoftmaxBackwardRowsBlock
	kSoftmaxCols
	kSoftmaxBackwardCols
	kSoftmaxRegsWarp             // formV16, and the three below
	kSoftmaxRegsBlock            //
	kSoftmaxBackwardRegsWarp     //
	kSoftmaxBackwardRegsBlock    //
	kSoftmaxRegs16Warp           // formRegs16, and the five below (rowKernel: warp, block, block4)
	kSoftmaxRegs16Block          //
	kSoftmaxRegs16Block4         //
	kSoftmaxBackwardRegs16Warp   //
	kSoftmaxBackwardRegs16Block  //
	kSoftmaxBackwardRegs16Block4 //
	// famLayerNorm.
	kLayerNormWarp
	kLayerNormBlock
	kLayerNormDxWarp
	kLayerNormDxBlock
	kLayerNormDwdb
	kLayerNormDwdbFinish
	kLayerNormRegsWarp       // formV16, and the three below
	kLayerNormRegsBlock      //
	kLayerNormDxRegsWarp     //
	kLayerNormDxRegsBlock    //
	kLayerNormRegs16Warp     // formRegs16, and the five below (rowKernel: warp, block, block4)
	kLayerNormRegs16Block    //
	kLayerNormRegs16Block4   //
	kLayerNormDxRegs16Warp   //
	kLayerNormDxRegs16Block  //
	kLayerNormDxRegs16Block4 //
	// famEmbedding.
	kEmbedding
	kEmbeddingBackward
	kEmbeddingKeys       // formOne
	kEmbeddingSortGlobal // formOne
	kEmbeddingSortLocal  // formOne
	// famDropout.
	kDropoutMask // formOne: integers only
	// famOptim.
	kSGD
	kAdam
	kSGDMulti
	kAdamMulti
	kAdamMultiCapturable
	kAdamCount // formOne
	// famGemm.
	kGemmTiled
	// famCompare (compare.go).
	kCompare   // formIndex: the comparison type is an argument
	kWhere     // formWalk: a float output
	kWhereInt  // formIndex: an integer or Bool output
	kSumInt    // formIndex
	numKernels = iota * variants
)

// in is k's variant computing in float64 when f64 is set (the _f64 instantiation).
func (k kernel) in(f64 bool) kernel {
	if f64 {
		return k + vF64
	}
	return k
}

// stored is the variant of a formStore base k for rows stored as dt: _f32, _f16, _f64
// or _bf16 (of a formWords base: _f32, _f16 or _bf16).
func (k kernel) stored(dt dtype.DType) kernel {
	switch dt {
	case dtype.F16:
		return k + vF16
	case dtype.BF16:
		return k + vBF16
	}
	return k.in(dt == dtype.F64)
}

// of16 is the variant of a form16 base k for 16-bit operands of dt (F16 or BF16).
func (k kernel) of16(dt dtype.DType) kernel {
	if dt == dtype.BF16 {
		return k + vRegsBF16
	}
	return k
}

// form says which variants of a base exist and how they are named.
type form uint8

const (
	formTyped  form = iota // NAME_f32, NAME_f64
	formWalk               // NAME_f32_i32, NAME_f32_i64, NAME_f64_i32, NAME_f64_i64
	formIndex              // NAME_i32, NAME_i64
	formOne                // NAME
	formV16                // NAME_f32, NAME_f32_v16 (float32 only)
	formF64                // NAME_f64 (float32's is another base's)
	formStore              // NAME_f32, NAME_f16, NAME_f64, NAME_bf16: rows stored as each
	formRegs16             // NAME_f16, NAME_f16_v16, NAME_bf16, NAME_bf16_v16 (vRegsBF16, vV16)
	formWalk16             // NAME_f16_i32, NAME_f16_i64, NAME_bf16_i32, NAME_bf16_i64 (vRegsBF16, vWide)
	form16                 // NAME_f16, NAME_bf16 (vRegsBF16): one op over contiguous 16-bit operands
	formWords              // NAME_f32, NAME_f16, NAME_bf16 (formStore's variants): 16-byte words of each
)

// bases lists each base's family, name and form, in the order of the constants.
var bases = [numKernels / variants]struct {
	fam  family
	name string
	form form
}{
	kUnary / variants:                       {famElementwise, "unary", formWalk},
	kUnaryBackward / variants:               {famElementwise, "unary_backward", formWalk},
	kBinary / variants:                      {famElementwise, "binary", formWalk},
	kBinaryBackward / variants:              {famElementwise, "binary_backward", formWalk},
	kAxpy / variants:                        {famElementwise, "axpy", formWalk},
	kDropout / variants:                     {famElementwise, "dropout", formWalk},
	kBCE / variants:                         {famElementwise, "bce", formWalk},
	kBCEBackward / variants:                 {famElementwise, "bce_backward", formWalk},
	kBCELogits / variants:                   {famElementwise, "bce_logits", formWalk},
	kBCELogitsBackward / variants:           {famElementwise, "bce_logits_backward", formWalk},
	kAddc / variants:                        {famElementwise, "addc", formWalk},
	kGeluTanh16 / variants:                  {famElementwise, "gelu_tanh", form16},
	kCopy / variants:                        {famCopy, "copy", formWalk},
	kFill / variants:                        {famCopy, "fill", formIndex},
	kCopyTranspose / variants:               {famCopy, "copy_transpose", formOne},
	kCopyTransposeWords / variants:          {famCopy, "copy_transpose_words", formOne},
	kCastToF32 / variants:                   {famCopy, "cast_to_f32", form16},
	kNonFinite / variants:                   {famReduce, "non_finite", formWalk},
	kReduceThread / variants:                {famReduce, "reduce_thread", formTyped},
	kReduceBlock / variants:                 {famReduce, "reduce_block", formTyped},
	kReduceCols / variants:                  {famReduce, "reduce_cols", formTyped},
	kReduceWarp / variants:                  {famReduce, "reduce_warp", formTyped},
	kReduceFinish / variants:                {famReduce, "reduce_finish", formTyped},
	kReduceFinishBlock / variants:           {famReduce, "reduce_finish_block", formTyped},
	kMaxBackward / variants:                 {famReduce, "max_backward", formTyped},
	kSumAll / variants:                      {famReduce, "sum_all", form16},
	kMaxRows / variants:                     {famReduce, "max_rows", form16},
	kSumRows / variants:                     {famReduce, "sum_rows", form16},
	kSumCols / variants:                     {famReduce, "sum_cols", formWords},
	kUnscale / variants:                     {famAmp, "unscale", formWalk},
	kUnscaleMulti / variants:                {famAmp, "unscale_multi", formOne},
	kCrossEntropyBackward / variants:        {famLoss, "cross_entropy_backward", formWalk},
	kCrossEntropyBackward16 / variants:      {famLoss, "cross_entropy_backward", formWalk16},
	kCrossEntropyBackwardWords / variants:   {famLoss, "cross_entropy_backward_words", formStore},
	kCrossEntropyRowsWarp / variants:        {famLoss, "cross_entropy_rows_warp", formF64},
	kCrossEntropyRowsBlock / variants:       {famLoss, "cross_entropy_rows_block", formStore},
	kCrossEntropyRegsWarp / variants:        {famLoss, "cross_entropy_regs_warp", formV16},
	kCrossEntropyRegsBlock / variants:       {famLoss, "cross_entropy_regs_block", formV16},
	kCrossEntropyRegs16Warp / variants:      {famLoss, "cross_entropy_regs_warp", formRegs16},
	kCrossEntropyRegs16Block / variants:     {famLoss, "cross_entropy_regs_block", formRegs16},
	kCrossEntropyRegs16Block4 / variants:    {famLoss, "cross_entropy_regs_block4", formRegs16},
	kMSEPartial / variants:                  {famLoss, "mse_partial", formTyped},
	kSumFinish / variants:                   {famLoss, "sum_finish", formTyped},
	kMSEBackward / variants:                 {famLoss, "mse_backward", formTyped},
	kSoftmaxRowsWarp / variants:             {famSoftmax, "softmax_rows_warp", formF64},
	kSoftmaxRowsBlock / variants:            {famSoftmax, "softmax_rows_block", formStore},
	kSoftmaxBackwardRowsWarp / variants:     {famSoftmax, "softmax_backward_rows_warp", formF64},
	kSoftmaxBackwardRowsBlock / variants:    {famSoftmax, "softmax_backward_rows_block", formStore},
	kSoftmaxCols / variants:                 {famSoftmax, "softmax_cols", formStore},
	kSoftmaxBackwardCols / variants:         {famSoftmax, "softmax_backward_cols", formStore},
	kSoftmaxRegsWarp / variants:             {famSoftmax, "softmax_regs_warp", formV16},
	kSoftmaxRegsBlock / variants:            {famSoftmax, "softmax_regs_block", formV16},
	kSoftmaxBackwardRegsWarp / variants:     {famSoftmax, "softmax_backward_regs_warp", formV16},
	kSoftmaxBackwardRegsBlock / variants:    {famSoftmax, "softmax_backward_regs_block", formV16},
	kSoftmaxRegs16Warp / variants:           {famSoftmax, "softmax_regs_warp", formRegs16},
	kSoftmaxRegs16Block / variants:          {famSoftmax, "softmax_regs_block", formRegs16},
	kSoftmaxRegs16Block4 / variants:         {famSoftmax, "softmax_regs_block4", formRegs16},
	kSoftmaxBackwardRegs16Warp / variants:   {famSoftmax, "softmax_backward_regs_warp", formRegs16},
	kSoftmaxBackwardRegs16Block / variants:  {famSoftmax, "softmax_backward_regs_block", formRegs16},
	kSoftmaxBackwardRegs16Block4 / variants: {famSoftmax, "softmax_backward_regs_block4", formRegs16},
	kLayerNormWarp / variants:               {famLayerNorm, "layer_norm_warp", formF64},
	kLayerNormBlock / variants:              {famLayerNorm, "layer_norm_block", formStore},
	kLayerNormDxWarp / variants:             {famLayerNorm, "layer_norm_dx_warp", formF64},
	kLayerNormDxBlock / variants:            {famLayerNorm, "layer_norm_dx_block", formStore},
	kLayerNormDwdb / variants:               {famLayerNorm, "layer_norm_dwdb", formStore},
	kLayerNormDwdbFinish / variants:         {famLayerNorm, "layer_norm_dwdb_finish", formTyped},
	kLayerNormRegsWarp / variants:           {famLayerNorm, "layer_norm_regs_warp", formV16},
	kLayerNormRegsBlock / variants:          {famLayerNorm, "layer_norm_regs_block", formV16},
	kLayerNormDxRegsWarp / variants:         {famLayerNorm, "layer_norm_dx_regs_warp", formV16},
	kLayerNormDxRegsBlock / variants:        {famLayerNorm, "layer_norm_dx_regs_block", formV16},
	kLayerNormRegs16Warp / variants:         {famLayerNorm, "layer_norm_regs_warp", formRegs16},
	kLayerNormRegs16Block / variants:        {famLayerNorm, "layer_norm_regs_block", formRegs16},
	kLayerNormRegs16Block4 / variants:       {famLayerNorm, "layer_norm_regs_block4", formRegs16},
	kLayerNormDxRegs16Warp / variants:       {famLayerNorm, "layer_norm_dx_regs_warp", formRegs16},
	kLayerNormDxRegs16Block / variants:      {famLayerNorm, "layer_norm_dx_regs_block", formRegs16},
	kLayerNormDxRegs16Block4 / variants:     {famLayerNorm, "layer_norm_dx_regs_block4", formRegs16},
	kEmbedding / variants:                   {famEmbedding, "embedding", formTyped},
	kEmbeddingBackward / variants:           {famEmbedding, "embedding_backward", formTyped},
	kEmbeddingKeys / variants:               {famEmbedding, "embedding_keys", formOne},
	kEmbeddingSortGlobal / variants:         {famEmbedding, "embedding_sort_global", formOne},
	kEmbeddingSortLocal / variants:          {famEmbedding, "embedding_sort_local", formOne},
	kDropoutMask / variants:                 {famDropout, "dropout_mask", formOne},
	kSGD / variants:                         {famOptim, "sgd", formTyped},
	kAdam / variants:                        {famOptim, "adam", formTyped},
	kSGDMulti / variants:                    {famOptim, "sgd_multi", formTyped},
	kAdamMulti / variants:                   {famOptim, "adam_multi", formTyped},
	kAdamMultiCapturable / variants:         {famOptim, "adam_multi_capturable", formTyped},
	kAdamCount / variants:                   {famOptim, "adam_count", formOne},
	kGemmTiled / variants:                   {famGemm, "gemm_tiled", formTyped},
	kCompare / variants:                     {famCompare, "compare", formIndex},
	kWhere / variants:                       {famCompare, "where", formWalk},
	kWhereInt / variants:                    {famCompare, "where_int", formIndex},
	kSumInt / variants:                      {famCompare, "sum_int", formIndex},
}

// entries is every kernel's family and name in the fatbin, "" for a variant its base's
// form does not have: the bases expanded once.
var entries = func() (e [numKernels]struct {
	fam  family
	name string
}) {
	suffixes := [...][variants]string{
		formTyped:  {"_f32", "", "_f64", ""},
		formWalk:   {"_f32_i32", "_f32_i64", "_f64_i32", "_f64_i64"},
		formIndex:  {"_i32", "_i64", "", ""},
		formOne:    {"", "", "", ""},
		formV16:    {"_f32", "_f32_v16", "", ""},
		formF64:    {"", "", "_f64", ""},
		formStore:  {"_f32", "_f16", "_f64", "_bf16"},
		formRegs16: {"_f16", "_f16_v16", "_bf16", "_bf16_v16"},
		formWalk16: {"_f16_i32", "_f16_i64", "_bf16_i32", "_bf16_i64"},
		form16:     {"_f16", "", "_bf16", ""},
		formWords:  {"_f32", "_f16", "", "_bf16"},
	}
	for i, b := range bases {
		for v, suf := range suffixes[b.form] {
			k := i*variants + v
			if suf != "" || b.form == formOne && v == 0 {
				e[k].fam, e[k].name = b.fam, b.name+suf
			}
		}
	}
	return e
}()

// modules is one Device's kernels: each family's fatbin is loaded on first use, and
// all of its functions resolved then, once; after that a lookup is an array read.
type modules struct {
	dev  *cudadev.Device
	fams [numFamilies]struct {
		once sync.Once
		err  error // why the family did not load; final
	}
	// fns[k] is set by its family's once, before that once returns.
	fns [numKernels]*cudadev.Function
}

// function returns kernel k, loading its family on first use.
func (m *modules) function(k kernel) (*cudadev.Function, error) {
	fam := entries[k].fam
	f := &m.fams[fam]
	f.once.Do(func() { f.err = m.load(fam) })
	if f.err != nil {
		return nil, f.err
	}
	return m.fns[k], nil
}

func (m *modules) load(fam family) error {
	name := "gen/" + familyNames[fam] + ".fatbin"
	image, err := fatbins.ReadFile(name)
	if err != nil {
		return fmt.Errorf("kernels/cuda: %s is not embedded: %w", name, err)
	}
	mod, err := m.dev.LoadFatbin(image)
	if err != nil {
		return fmt.Errorf("kernels/cuda: loading the %s kernels (%s): %w", familyNames[fam], name, err)
	}
	for k, e := range entries {
		if e.name == "" || e.fam != fam {
			continue
		}
		fn, err := mod.Function(e.name)
		if err != nil {
			return fmt.Errorf("kernels/cuda: %s: %w", name, err)
		}
		m.fns[k] = fn
	}
	return nil
}
