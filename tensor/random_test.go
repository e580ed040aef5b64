package tensor_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// On host memory a contiguous tensor's random values are drawn straight into it (a
// chunk at a time for F16 and BF16), where a strided one still has them made on the
// host first and copied in. Both give the same values for one seed, at sizes that end
// inside a chunk and past several; and a large fill makes no Go garbage of its size.
func TestRandomValuesDrawnInPlace(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(7)))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		for _, n := range []int{1, 1<<14 + 3, 2<<14 + 5} {
			dense := s.Zeros(d, dt, n)
			strided := s.Zeros(d, dt, n, 2).Slice(1, 1, 2) // [n, 1], n elements two apart
			require.Equal(t, n == 1, strided.IsContiguous())
			for _, normal := range []bool{false, true} {
				fill := func(x *tensor.Tensor) {
					if normal {
						x.FillNormal(tensor.NewGenerator(9), 0.5, 2)
					} else {
						x.FillUniform(tensor.NewGenerator(9), -1, 3)
					}
				}
				fill(dense)
				fill(strided)
				require.Equal(t, rawBytes(strided.Contiguous()), rawBytes(dense), "%v, %d elements, normal %v", dt, n, normal)
			}
			st := s.Generator().State()
			r := s.Randn(d, dt, n)
			s.Generator().Restore(st)
			ref := s.Zeros(d, dt, n, 2).Slice(1, 0, 1)
			ref.FillNormal(s.Generator(), 0, 1)
			require.Equal(t, rawBytes(ref.Contiguous()), rawBytes(r), "Randn %v, %d elements", dt, n)
		}
	}
	s.Close()
	requireEmpty(t, d)

	s = tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	defer func() { s.Close(); requireEmpty(t, d) }()
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		const n = 1 << 22 // 16 MB of float32
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x := s.Randn(d, dt, n)
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(256<<10), "%v: Go heap allocated by a Randn of %d elements", dt, n)
		x.Release()
	}
}

// TestRandomValuesUploadedInPieces: on a GPU (a stand-in without kernels, and cuda:0
// where the machine has one) a contiguous tensor's random values are drawn and
// uploaded a piece at a time, the values the same draws give on cpu (whose path
// TestRandomValuesDrawnInPlace holds to store's), at an offset into a storage too
// (where the GPU has kernels to fill one in place), and without host copies of the
// tensor's size.
func TestRandomValuesUploadedInPieces(t *testing.T) {
	gpus := []tensortest.Device{{Name: "stand-in", Device: tensortest.NewRemote(t, "cuda:0")}}
	for _, d := range tensortest.DataDevices(t) {
		if d.Name == "cuda" {
			gpus = append(gpus, d)
		}
	}
	host := newCPU(t)
	const piece = 1 << 18 // tensor's randomUpload
	for _, gpu := range gpus {
		s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(5)))
		for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
			for _, n := range []int{1, piece - 1, piece + 3, 2*piece + 5} {
				st := s.Generator().State()
				want := s.Rand(host, dt, n)
				s.Generator().Restore(st)
				got := s.Rand(gpu.Device, dt, n)
				require.Equal(t, rawBytes(want), rawBytes(got), "%s: Rand %v, %d elements", gpu.Name, dt, n)
				st = s.Generator().State()
				wantN := s.Randn(host, dt, n)
				s.Generator().Restore(st)
				gotN := s.Randn(gpu.Device, dt, n)
				require.Equal(t, rawBytes(wantN), rawBytes(gotN), "%s: Randn %v, %d elements", gpu.Name, dt, n)
				if gpu.Name == "cuda" {
					base := s.Zeros(gpu.Device, dt, n+7)
					s.Generator().Restore(st)
					base.Slice(0, 7, n+7).FillNormal(s.Generator(), 0, 1)
					require.Equal(t, append(make([]byte, 7*dt.Size()), rawBytes(wantN)...), rawBytes(base), "%s: FillNormal of %v, %d elements at offset 7", gpu.Name, dt, n)
					base.Release()
				}
				for _, x := range []*tensor.Tensor{want, got, wantN, gotN} {
					x.Release()
				}
			}
		}
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			const n = 1 << 22 // 16 MB of float32
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			x := s.Randn(gpu.Device, dt, n)
			runtime.ReadMemStats(&after)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2<<20), "%s: Go heap allocated by a Randn of %v, %d elements", gpu.Name, dt, n)
			x.Release()
		}
		s.Close()
		requireEmpty(t, gpu.Device)
	}
	requireEmpty(t, host)
}

// rawBytes is x's elements as the bytes of its type.
func rawBytes(x *tensor.Tensor) []byte {
	b := make([]byte, x.Bytes())
	x.CopyToHost(b)
	return b
}
