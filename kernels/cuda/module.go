package cuda

import (
	"embed"
	"fmt"
	"sync"

	cudadev "github.com/subletml/sublet/device/cuda"
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
}

// kernel names one entry point. Kernels over a Walk come in pairs, the 32-bit index
// variant first (even) and the 64-bit one right after (see wide).
type kernel uint8

const (
	kUnary kernel = iota
	kUnary64
	kUnaryBackward
	kUnaryBackward64
	kBinary
	kBinary64
	kBinaryBackward
	kBinaryBackward64
	kAxpy
	kAxpy64
	kDropout
	kDropout64
	kBCE
	kBCE64
	kBCEBackward
	kBCEBackward64
	kBCELogits
	kBCELogits64
	kBCELogitsBackward
	kBCELogitsBackward64
	kAddc
	kAddc64
	kCopy
	kCopy64
	kFill
	kFill64
	kNonFinite
	kNonFinite64
	kUnscale
	kUnscale64
	kCrossEntropyBackward
	kCrossEntropyBackward64
	kReduceThread
	kReduceBlock
	kReduceFinish
	kMaxBackward
	kSoftmaxRowsWarp
	kSoftmaxRowsBlock
	kSoftmaxBackwardRowsWarp
	kSoftmaxBackwardRowsBlock
	kSoftmaxCols
	kSoftmaxBackwardCols
	kLayerNormWarp
	kLayerNormBlock
	kLayerNormDxWarp
	kLayerNormDxBlock
	kLayerNormDwdb
	kLayerNormDwdbFinish
	kCrossEntropyRowsWarp
	kCrossEntropyRowsBlock
	kCrossEntropyLoss
	kCrossEntropyScale
	kMSEPartial
	kSumFinish
	kMSEBackward
	kEmbedding
	kEmbeddingBackward
	kDropoutMask
	kSGD
	kAdam
	kGemmTiled
	numKernels
)

// entries lists every entry point: its family and its name in the fatbin (F64: the
// _f64 instantiations join here).
var entries = [numKernels]struct {
	fam  family
	name string
}{
	kUnary:                    {famElementwise, "unary_f32_i32"},
	kUnary64:                  {famElementwise, "unary_f32_i64"},
	kUnaryBackward:            {famElementwise, "unary_backward_f32_i32"},
	kUnaryBackward64:          {famElementwise, "unary_backward_f32_i64"},
	kBinary:                   {famElementwise, "binary_f32_i32"},
	kBinary64:                 {famElementwise, "binary_f32_i64"},
	kBinaryBackward:           {famElementwise, "binary_backward_f32_i32"},
	kBinaryBackward64:         {famElementwise, "binary_backward_f32_i64"},
	kAxpy:                     {famElementwise, "axpy_f32_i32"},
	kAxpy64:                   {famElementwise, "axpy_f32_i64"},
	kDropout:                  {famElementwise, "dropout_f32_i32"},
	kDropout64:                {famElementwise, "dropout_f32_i64"},
	kBCE:                      {famElementwise, "bce_f32_i32"},
	kBCE64:                    {famElementwise, "bce_f32_i64"},
	kBCEBackward:              {famElementwise, "bce_backward_f32_i32"},
	kBCEBackward64:            {famElementwise, "bce_backward_f32_i64"},
	kBCELogits:                {famElementwise, "bce_logits_f32_i32"},
	kBCELogits64:              {famElementwise, "bce_logits_f32_i64"},
	kBCELogitsBackward:        {famElementwise, "bce_logits_backward_f32_i32"},
	kBCELogitsBackward64:      {famElementwise, "bce_logits_backward_f32_i64"},
	kAddc:                     {famElementwise, "addc_f32_i32"},
	kAddc64:                   {famElementwise, "addc_f32_i64"},
	kCopy:                     {famCopy, "copy_f32_i32"},
	kCopy64:                   {famCopy, "copy_f32_i64"},
	kFill:                     {famCopy, "fill_i32"},
	kFill64:                   {famCopy, "fill_i64"},
	kNonFinite:                {famReduce, "non_finite_i32"},
	kNonFinite64:              {famReduce, "non_finite_i64"},
	kUnscale:                  {famAmp, "unscale_f32_i32"},
	kUnscale64:                {famAmp, "unscale_f32_i64"},
	kCrossEntropyBackward:     {famLoss, "cross_entropy_backward_f32_i32"},
	kCrossEntropyBackward64:   {famLoss, "cross_entropy_backward_f32_i64"},
	kReduceThread:             {famReduce, "reduce_thread"},
	kReduceBlock:              {famReduce, "reduce_block"},
	kReduceFinish:             {famReduce, "reduce_finish"},
	kMaxBackward:              {famReduce, "max_backward"},
	kSoftmaxRowsWarp:          {famSoftmax, "softmax_rows_warp_f32"},
	kSoftmaxRowsBlock:         {famSoftmax, "softmax_rows_block_f32"},
	kSoftmaxBackwardRowsWarp:  {famSoftmax, "softmax_backward_rows_warp_f32"},
	kSoftmaxBackwardRowsBlock: {famSoftmax, "softmax_backward_rows_block_f32"},
	kSoftmaxCols:              {famSoftmax, "softmax_cols_f32"},
	kSoftmaxBackwardCols:      {famSoftmax, "softmax_backward_cols_f32"},
	kLayerNormWarp:            {famLayerNorm, "layer_norm_warp_f32"},
	kLayerNormBlock:           {famLayerNorm, "layer_norm_block_f32"},
	kLayerNormDxWarp:          {famLayerNorm, "layer_norm_dx_warp_f32"},
	kLayerNormDxBlock:         {famLayerNorm, "layer_norm_dx_block_f32"},
	kLayerNormDwdb:            {famLayerNorm, "layer_norm_dwdb_f32"},
	kLayerNormDwdbFinish:      {famLayerNorm, "layer_norm_dwdb_finish_f32"},
	kCrossEntropyRowsWarp:     {famLoss, "cross_entropy_rows_warp_f32"},
	kCrossEntropyRowsBlock:    {famLoss, "cross_entropy_rows_block_f32"},
	kCrossEntropyLoss:         {famLoss, "cross_entropy_loss_f32"},
	kCrossEntropyScale:        {famLoss, "cross_entropy_scale"},
	kMSEPartial:               {famLoss, "mse_partial_f32"},
	kSumFinish:                {famLoss, "sum_finish"},
	kMSEBackward:              {famLoss, "mse_backward_f32"},
	kEmbedding:                {famEmbedding, "embedding_f32"},
	kEmbeddingBackward:        {famEmbedding, "embedding_backward_f32"},
	kDropoutMask:              {famDropout, "dropout_mask"},
	kSGD:                      {famOptim, "sgd_f32"},
	kAdam:                     {famOptim, "adam_f32"},
	kGemmTiled:                {famGemm, "gemm_tiled"},
}

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
		if e.fam != fam {
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
