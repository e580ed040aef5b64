package dtype

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSizeStringIsFloat(t *testing.T) {
	cases := []struct {
		d     DType
		size  int
		name  string
		float bool
	}{
		{F32, 4, "float32", true},
		{F16, 2, "float16", true},
		{BF16, 2, "bfloat16", true},
		{I32, 4, "int32", false},
		{I64, 8, "int64", false},
		{Bool, 1, "bool", false},
		{F64, 8, "float64", true},
	}
	require.Len(t, All(), len(cases))
	for i, c := range cases {
		assert.Equal(t, c.d, All()[i])
		assert.Equal(t, c.size, c.d.Size(), c.name)
		assert.Equal(t, c.name, c.d.String())
		assert.Equal(t, c.float, c.d.IsFloat(), c.name)
		assert.True(t, c.d.IsValid(), c.name)
		p, err := Parse(c.name)
		require.NoError(t, err)
		assert.Equal(t, c.d, p)
	}
	assert.Equal(t, 0, Invalid.Size())
	assert.False(t, Invalid.IsValid())
	assert.False(t, Invalid.IsFloat())
	assert.Equal(t, "invalid", Invalid.String())
	assert.Equal(t, "dtype.DType(200)", DType(200).String())
	assert.False(t, DType(200).IsValid())
	assert.Equal(t, 0, DType(200).Size())
}

func TestParseAliases(t *testing.T) {
	for s, want := range map[string]DType{"f64": F64, "double": F64, "f32": F32, "float": F32, "half": F16, "f16": F16, "bf16": BF16, "i32": I32, "i64": I64} {
		got, err := Parse(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	_, err := Parse("float8")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"float8"`)
	assert.Contains(t, err.Error(), "bfloat16")
}

func TestRound(t *testing.T) {
	x := 0.1
	assert.Equal(t, float64(float32(x)), F32.Round(x))
	assert.Equal(t, x, F64.Round(x))
	assert.Equal(t, float64(F16ToF32(F64ToF16(x))), F16.Round(x))
	assert.Equal(t, float64(BF16ToF32(F64ToBF16(x))), BF16.Round(x))
	assert.Equal(t, 1.5, I64.Round(1.5), "not a floating type: unchanged")
	tie := 1 + 1.0/2048 + 1e-12 // just above a tie of F16: up, not to even
	assert.Equal(t, 1+1.0/1024, F16.Round(tie))
}
