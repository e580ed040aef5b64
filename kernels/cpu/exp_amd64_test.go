package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

// TestExpVectorWidthsAgree checks that the AVX2 and AVX-512 kernels, where this CPU
// has them, give the same bits: the same steps on narrower vectors.
func TestExpVectorWidthsAgree(t *testing.T) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		t.Skip("needs both AVX-512 and AVX2")
	}
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = math.Float32frombits(r.Uint32())
		if i%2 == 0 {
			x[i] = float32(r.NormFloat64() * 30)
		}
	}
	a := make([]float32, len(x))
	b := make([]float32, len(x))
	expAVX512(&a[0], &x[0], len(x))
	expAVX2(&b[0], &x[0], len(x))
	for i := range x {
		if math.IsNaN(float64(a[i])) {
			require.True(t, math.IsNaN(float64(b[i])))
			continue
		}
		require.Equal(t, math.Float32bits(a[i]), math.Float32bits(b[i]), "exp(%v)", x[i])
	}
}
