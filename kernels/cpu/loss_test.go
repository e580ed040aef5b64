package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/kernels"
)

// refCE is cross entropy in float64 with a mean over counted rows.
func refCE(logits []float64, labels []int64, n, c int, ignore int64) float64 {
	s, count := 0.0, 0
	for i := range n {
		if labels[i] == ignore {
			continue
		}
		mx := math.Inf(-1)
		for j := range c {
			mx = math.Max(mx, logits[i*c+j])
		}
		e := 0.0
		for j := range c {
			e += math.Exp(logits[i*c+j] - mx)
		}
		s += mx + math.Log(e) - logits[i*c+int(labels[i])]
		count++
	}
	return s / float64(count)
}

func toF64[T float](x []T) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// numGrad is the central-difference gradient of f at x in float64.
func numGrad(x []float64, f func([]float64) float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		h := 1e-6 * math.Max(1, math.Abs(old))
		x[i] = old + h
		up := f(x)
		x[i] = old - h
		down := f(x)
		x[i] = old
		g[i] = (up - down) / (2 * h)
	}
	return g
}

func TestCrossEntropy(t *testing.T) {
	bothTypes(t, testCrossEntropy[float32], testCrossEntropy[float64])
}

func testCrossEntropy[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(60, 61))
	for _, s := range [][2]int{{1, 1}, {4, 3}, {7, 10}, {33, 5}, {3, 1000}} {
		n, c := s[0], s[1]
		logits := randFloats[T](r, n*c, 3)
		labels := make([]int64, n)
		for i := range labels {
			labels[i] = int64(r.IntN(c))
		}
		for _, ignore := range []int64{NoIgnore, -100, labels[0]} {
			lse := make([]T, n+1)
			loss, err := CrossEntropy(lse, logits, labels, n, c, ignore)
			require.NoError(t, err)
			allIgnored, count := true, 0
			for _, l := range labels {
				allIgnored = allIgnored && l == ignore
				if l != ignore {
					count++
				}
			}
			assert.Equal(t, T(count), lse[n], "the count of rows that count, after the rows' lse")
			want := refCE(toF64(logits), labels, n, c, ignore)
			if allIgnored {
				assert.True(t, math.IsNaN(float64(loss)))
				continue
			}
			require.InDelta(t, want, loss, tl[T](1e-5, 1e-13)*(1+math.Abs(want)), "%v ignore %d", s, ignore)

			dl := make([]T, n*c)
			CrossEntropyBackward(dl, logits, lse, labels, n, c, ignore, 2)
			num := numGrad(toF64(logits), func(x []float64) float64 { return 2 * refCE(x, labels, n, c, ignore) })
			for i := range dl {
				require.InDelta(t, num[i], dl[i], tl[T](1e-4, 1e-8), "%v grad at %d", s, i)
			}
			// In place: dlogits is logits.
			cp := append([]T(nil), logits...)
			CrossEntropyBackward(cp, cp, lse, labels, n, c, ignore, 2)
			assert.Equal(t, dl, cp)
		}
	}
}

func TestCrossEntropyBadLabel(t *testing.T) {
	logits := make([]float32, 6)
	lse := []float32{7, 7, 7}
	_, err := CrossEntropy(lse, logits, []int64{0, 3}, 2, 3, -100)
	var ie *kernels.IndexError
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, kernels.IndexError{Op: "cross_entropy", Pos: 1, Index: 3, Limit: 3}, *ie)
	assert.Equal(t, "cross_entropy: index 3 at position 1 is outside [0, 3)", err.Error())
	assert.Equal(t, []float32{7, 7, 7}, lse, "nothing written")
	_, err = CrossEntropy(lse, logits, []int64{-100, -1}, 2, 3, -100)
	require.Error(t, err, "-1 is not the ignore index")
}

func TestCrossEntropyExtremeLogits(t *testing.T) {
	logits := []float32{1e4, 0, -1e4, float32(math.Inf(-1)), 0, 0}
	lse := make([]float32, 3)
	loss, err := CrossEntropy(lse, logits, []int64{1, 2}, 2, 3, NoIgnore)
	require.NoError(t, err)
	assert.InDelta(t, (1e4+math.Log(2))/2, loss, 1e-2)
}

func TestMSE(t *testing.T) { bothTypes(t, testMSE[float32], testMSE[float64]) }

func testMSE[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(62, 63))
	for _, n := range []int{1, 17, 3*reducePiece + 5} {
		a := randFloats[T](r, n, 1)
		b := randFloats[T](r, n, 1)
		want := 0.0
		for i := range a {
			d := float64(a[i]) - float64(b[i])
			want += d * d
		}
		want /= float64(n)
		got := MSE(a, b)
		require.InDelta(t, want, got, tl[T](1e-6, 1e-13)*want)
		da := make([]T, n)
		db := make([]T, n)
		MSEBackward(da, db, a, b, 3)
		for i := range a {
			w := 6 * (float64(a[i]) - float64(b[i])) / float64(n)
			require.InDelta(t, w, da[i], tl[T](1e-6, 1e-14)*(1+math.Abs(w)))
			require.Equal(t, -da[i], db[i])
		}
	}
	assert.True(t, math.IsNaN(float64(MSE[float32](nil, nil))))
	MSEBackward(nil, nil, []float32{1}, []float32{2}, 1) // nothing wanted, nothing written
}
