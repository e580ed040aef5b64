package dist

// This file is the CPU backend's only access to tensor elements: it copies them out of
// a tensor into wire bytes and back, through the public tensor API (ToSlice, FromSlice
// and CopyFrom). Floating elements (float32, float16, bfloat16) travel as float32,
// integer and boolean ones as int64, little-endian; a reduction computes in those
// types and the write converts back to the tensor's.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// wireSize is the bytes one element of dt takes on the wire.
func wireSize(dt dtype.DType) int {
	if dt.IsFloat() {
		return 4
	}
	return 8
}

// hostReadable reports whether the CPU can read t's elements: its device keeps data
// the host addresses (cpu, sim with a backing store).
func hostReadable(t *tensor.Tensor) bool {
	hm, ok := t.Device().(device.HostMemory)
	if !ok {
		return false
	}
	st := t.Storage()
	if st.Size() == 0 {
		return true
	}
	_, ok = hm.Bytes(st.Ptr(), st.Size())
	return ok
}

// readElements returns t's elements, in row-major order, as wire bytes.
func readElements(t *tensor.Tensor) (b []byte, err error) {
	err = tensor.Try(func() {
		if t.DType().IsFloat() {
			b = encodeFloats(tensor.ToSlice[float32](t))
			return
		}
		b = encodeInts(tensor.ToSlice[int64](t))
	})
	return b, err
}

// writeElements writes wire bytes b (t's element count of them) into t, in place,
// converting to t's type.
func writeElements(t *tensor.Tensor, b []byte) error {
	if n := t.Numel() * wireSize(t.DType()); len(b) != n {
		return fmt.Errorf("dist: internal error: %d bytes for a tensor of %d wire bytes", len(b), n)
	}
	return tensor.Try(func() {
		s := tensor.NewScope(tensor.NoGrad())
		defer s.Close()
		var src *tensor.Tensor
		if t.DType().IsFloat() {
			src = tensor.FromSlice(s, t.Device(), t.DType(), decodeFloats(b))
		} else {
			src = tensor.FromSlice(s, t.Device(), t.DType(), decodeInts(b))
		}
		s.Bind(t).CopyFrom(src.Reshape(t.Shape()...))
	})
}

func encodeFloats(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:4*i+4], math.Float32bits(x))
	}
	return b
}

func decodeFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i : 4*i+4]))
	}
	return v
}

func encodeInts(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:8*i+8], uint64(x))
	}
	return b
}

func decodeInts(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i : 8*i+8]))
	}
	return v
}
