package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// sample is one tensor of each type sublet writes, a scalar and an empty one among
// them, owned by s on d.
func sample(s *tensor.Scope, d device.Device) []safetensors.Named {
	return []safetensors.Named{
		{"w.f32", tensor.FromSlice(s, d, dtype.F32, []float32{1.5, -2, 0.25, 3, 4, 5}, 2, 3)},
		{"d.f64", tensor.FromSlice(s, d, dtype.F64, []float64{0.1, -1e300})},
		{"h.f16", tensor.FromSlice(s, d, dtype.F16, []float32{1, -2, 0.5})},
		{"b.bf16", tensor.FromSlice(s, d, dtype.BF16, []float32{-1, 256})},
		{"i32", tensor.FromSlice(s, d, dtype.I32, []int32{7, -7})},
		{"labels", tensor.FromSlice(s, d, dtype.I64, []int64{1 << 40, -3, 0})},
		{"mask", tensor.FromSlice(s, d, dtype.Bool, []uint8{1, 0, 1, 1})},
		{"scalar", tensor.FromSlice(s, d, dtype.F32, []float32{42}).Reshape()},
		{"empty", s.Zeros(d, dtype.F32, 0, 3)},
		{"strided", tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3).T()},
	}
}

// A file written and read back gives every tensor back, laid out as the reference
// implementation lays it out: the header padded to 8 bytes, the largest elements
// first, then by name, each aligned to its element size, no hole.
func TestRoundTrip(t *testing.T) {
	for _, dev := range tensortest.DataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope()
			ts := sample(s, d)
			var b bytes.Buffer
			require.NoError(t, safetensors.Write(&b, ts, map[string]string{"epoch": "3"}))
			file := b.Bytes()
			n := binary.LittleEndian.Uint64(file)
			require.Zero(t, (8+n)%8, "the data starts 8-byte aligned")
			r, err := safetensors.NewReader(bytes.NewReader(file), int64(len(file)))
			require.NoError(t, err)
			require.Equal(t, map[string]string{"epoch": "3"}, r.Metadata())
			var order []string
			var at int64
			for _, info := range r.Tensors() {
				order = append(order, info.Name)
				require.Equal(t, at, info.Begin)
				require.Zero(t, info.Begin%int64(info.DType.Size()), "%s aligned", info.Name)
				at = info.End
			}
			require.Equal(t, int64(len(file))-8-int64(n), at)
			require.Equal(t, []string{"d.f64", "labels", "empty", "i32", "scalar", "strided", "w.f32", "b.bf16", "h.f16", "mask"}, order)
			for _, nt := range ts {
				got, err := r.Load(s, d, nt.Name)
				require.NoError(t, err)
				require.Equal(t, nt.Tensor.Shape(), got.Shape(), nt.Name)
				require.Equal(t, nt.Tensor.DType(), got.DType(), nt.Name)
				require.Equal(t, tensor.ToSlice[float64](nt.Tensor), tensor.ToSlice[float64](got), nt.Name)
			}
			_, err = r.Load(s, d, "nothing")
			require.ErrorIs(t, err, safetensors.ErrNotFound)

			path := filepath.Join(t.TempDir(), "all.safetensors")
			require.NoError(t, safetensors.WriteFile(path, ts, nil))
			f, err := safetensors.Open(path)
			require.NoError(t, err)
			require.Empty(t, f.Metadata())
			into := s.Zeros(d, dtype.F32, 2, 3)
			require.NoError(t, f.LoadInto(into, "w.f32"))
			require.Equal(t, []float32{1.5, -2, 0.25, 3, 4, 5}, tensortest.Values(into))
			require.ErrorContains(t, f.LoadInto(s.Zeros(d, dtype.F16, 2, 3), "w.f32"), "F32 [2 3] in the file, float16 [2 3] here")
			require.NoError(t, f.Close())
			s.Close()
			tensortest.RequireEmpty(t, d)
		})
	}
}

func TestWriteRefuses(t *testing.T) {
	d, meta := tensortest.CPU(t), tensortest.Meta(t)
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 2)
	for name, ts := range map[string][]safetensors.Named{
		"empty name": {{"", x}},
		"reserved":   {{"__metadata__", x}},
		"twice":      {{"a", x}, {"a", s.Ones(d, dtype.I64, 1)}},
		"nil":        {{"a", nil}},
		"no data":    {{"a", s.Ones(meta, dtype.F32, 2)}},
	} {
		require.Error(t, safetensors.Write(&bytes.Buffer{}, ts, nil), name)
	}
	path := filepath.Join(t.TempDir(), "keep.safetensors")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	require.Error(t, safetensors.WriteFile(path, []safetensors.Named{{"", x}}, nil))
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(old), "a failed write leaves the file as it was")
	s.Close()
	tensortest.RequireEmpty(t, d)
	tensortest.RequireEmpty(t, meta)
}

// file assembles a safetensors file from a header and data.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// Every malformed file is an ErrFormat error naming what is wrong, found before any
// tensor is read.
func TestMalformedFiles(t *testing.T) {
	f4 := make([]byte, 4)
	for name, c := range map[string]struct {
		file []byte
		want string
	}{
		"short":           {[]byte{1, 2, 3}, "at least the 8"},
		"header too long": {file(`{}`, nil)[:8], "a header of 2 bytes in a file of 8"},
		"huge header":     {binary.LittleEndian.AppendUint64(nil, 1<<40), "at most"},
		"not an object":   {file(`[]`, nil), "does not start with '{'"},
		"bad json":        {file(`{"a":`, nil), "JSON"},
		"twice":           {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4), "appears twice"},
		"metadata":        {file(`{"__metadata__":{"k":1}}`, nil), "strings to strings"},
		"dtype":           {file(`{"a":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), "unknown dtype"},
		"size":            {file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, f4), "takes 8 bytes"},
		"negative":        {file(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f4), "not a size"},
		"overflow":        {file(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, f4), "overflows"},
		"offsets":         {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, f4), "want [begin, end]"},
		"hole":            {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "hole or overlap"},
		"overlap": {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f4),
			"hole or overlap"},
		"extra data": {file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)), "cover 4 bytes of data, the file holds 8"},
		"trailing":   {file(`{} x`, nil), "not space padding"},
	} {
		_, err := safetensors.NewReader(bytes.NewReader(c.file), int64(len(c.file)))
		require.ErrorIs(t, err, safetensors.ErrFormat, name)
		require.ErrorContains(t, err, c.want, name)
	}
	ok := file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}    `, []byte{7, 9})
	r, err := safetensors.NewReader(bytes.NewReader(ok), int64(len(ok)))
	require.NoError(t, err, "space padding is allowed")
	info, _ := r.Info("a")
	require.Equal(t, "U8", info.DTypeName)
	require.False(t, info.DType.IsValid(), "sublet has no U8 tensors")
	b, err := r.Bytes("a")
	require.NoError(t, err)
	require.Equal(t, []byte{7, 9}, b)
	_, err = r.Load(tensor.NewScope(), tensortest.CPU(t), "a")
	require.ErrorContains(t, err, "read its Bytes")
}
