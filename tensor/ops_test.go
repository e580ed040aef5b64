package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/tensor"
)

func TestOpTable(t *testing.T) {
	names := map[string]int{}
	for _, o := range tensor.Ops() {
		names[o.Name]++
		require.NotEmpty(t, o.Saves, o.Name)
		require.GreaterOrEqual(t, o.MinInputs, 1, o.Name)
		if o.MaxInputs != -1 {
			require.GreaterOrEqual(t, o.MaxInputs, o.MinInputs, o.Name)
		}
		got, ok := tensor.LookupOp(o.Name)
		require.True(t, ok)
		require.Equal(t, o.Autocast, got.Autocast, "rows of one name agree on autocast")
	}
	for name, n := range names {
		if name == tensor.OpGelu {
			require.Equal(t, 2, n, "Gelu and GeluTanh")
			continue
		}
		require.Equal(t, 1, n, "one row per op: %s", name)
	}
	// PyTorch's CUDA autocast lists for the ops tensor has.
	want := map[tensor.AutocastClass][]string{
		// A Linear with its ReLU is a Linear (addmm) for autocast.
		tensor.AutocastLower: {tensor.OpMatMul, tensor.OpLinear, tensor.OpLinearRelu},
		tensor.AutocastF32: {tensor.OpExp, tensor.OpLog, tensor.OpPow, tensor.OpPowScalar, tensor.OpLayerNorm,
			tensor.OpMSE, tensor.OpCrossEntropy, tensor.OpBinaryCrossEntropyWithLogits, tensor.OpNorm},
		tensor.AutocastF32Out: {tensor.OpSoftmax, tensor.OpLogSoftmax, tensor.OpSum, tensor.OpSumTo},
		tensor.AutocastBanned: {tensor.OpBinaryCrossEntropy},
	}
	listed := 0
	for class, ops := range want {
		for _, op := range ops {
			o, ok := tensor.LookupOp(op)
			require.True(t, ok, op)
			require.Equal(t, class, o.Autocast, "%s is %v in PyTorch's lists", op, class)
		}
		listed += len(ops)
	}
	others := 0
	for _, o := range tensor.Ops() {
		if o.Autocast != tensor.AutocastNone {
			others++
		}
	}
	require.Equal(t, listed, others, "no op is in an autocast list PyTorch does not put it in")
	_, ok := tensor.LookupOp("softmax backward")
	require.False(t, ok, "a backward rule is no op")
	require.Equal(t, "fp32 result", tensor.AutocastF32Out.String())
}
