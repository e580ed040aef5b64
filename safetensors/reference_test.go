package safetensors_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// python3 is the interpreter the reference scripts run with, or a skip.
func python3(t *testing.T) string {
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the reference writer and reader (Python's standard library) cannot run")
	}
	return p
}

// A file written by another implementation, Python's standard library laying it out
// its own way (no padding, spaces in the JSON, metadata last), reads back value for
// value.
func TestReadsAFileFromAnotherWriter(t *testing.T) {
	py := python3(t)
	path := filepath.Join(t.TempDir(), "python.safetensors")
	out, err := exec.Command(py, "testdata/reference_writer.py", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := safetensors.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, map[string]string{"writer": "python-stdlib", "format": "pt"}, f.Metadata())
	d := tensortest.CPU(t)
	s := tensor.NewScope()
	for _, c := range []struct {
		name  string
		dt    dtype.DType
		shape []int
		want  []float64
	}{
		{"weight", dtype.F32, []int{2, 2}, []float64{1.5, -2.25, float64(float32(3e10)), math.Copysign(0, -1)}},
		{"double", dtype.F64, []int{2}, []float64{0.1, -1e300}},
		{"half", dtype.F16, []int{4}, []float64{1, -2, 65504, 0.00006103515625}},
		{"brain", dtype.BF16, []int{3}, []float64{1, -1.5, 3.140625}},
		{"ids", dtype.I64, []int{2}, []float64{-(1 << 62), 5}},
		{"counts", dtype.I32, []int{1, 3}, []float64{7, -8, 2147483647}},
		{"flags", dtype.Bool, []int{2}, []float64{1, 0}},
		{"scalar", dtype.F32, nil, []float64{0.125}},
		{"none", dtype.F32, []int{0, 4}, []float64{}},
	} {
		x, err := f.Load(s, d, c.name)
		require.NoError(t, err, c.name)
		require.Equal(t, c.dt, x.DType(), c.name)
		require.Equal(t, c.shape, nilIfEmpty(x.Shape()), c.name)
		if c.dt.IsFloat() {
			require.Equal(t, c.want, tensor.ToSlice[float64](x), c.name)
			continue
		}
		// Integers are read as int64, which holds every value of theirs.
		got := tensor.ToSlice[int64](x)
		for i, w := range c.want {
			require.Equal(t, int64(w), got[i], "%s[%d]", c.name, i)
		}
	}
	require.Equal(t, math.Float64bits(math.Copysign(0, -1)), math.Float64bits(tensor.ToSlice[float64](mustLoad(t, f, s, "weight"))[3]), "−0 keeps its sign")
	ids := tensor.ToSlice[int64](mustLoad(t, f, s, "ids"))
	require.Equal(t, int64(-(1 << 62)), ids[0], "I64 exactly")
	raw, err := f.Bytes("raw")
	require.NoError(t, err)
	require.Equal(t, []byte{1, 2, 255}, raw, "a U8 tensor reads as bytes")
	s.Close()
	tensortest.RequireEmpty(t, d)
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

func mustLoad(t *testing.T, f *safetensors.File, s *tensor.Scope, name string) *tensor.Tensor {
	x, err := f.Load(s, tensortest.CPU(t), name)
	require.NoError(t, err)
	return x
}

// A file sublet writes reads back, value for value, with a reader written from the
// format's description in Python's standard library.
func TestAnotherReaderReadsSubletsFile(t *testing.T) {
	py := python3(t)
	d := tensortest.CPU(t)
	s := tensor.NewScope()
	ts := sample(s, d)
	path := filepath.Join(t.TempDir(), "sublet.safetensors")
	require.NoError(t, safetensors.WriteFile(path, ts, map[string]string{"note": "ünïcode \"quoted\""}))
	out, err := exec.Command(py, "testdata/reference_reader.py", path).Output()
	require.NoError(t, err, "%s", out)
	var got struct {
		Tensors map[string]struct {
			DType  string    `json:"dtype"`
			Shape  []int     `json:"shape"`
			Values []float64 `json:"values"`
		} `json:"tensors"`
		Metadata map[string]string `json:"metadata"`
	}
	require.NoError(t, json.NewDecoder(bytes.NewReader(out)).Decode(&got))
	require.Equal(t, map[string]string{"note": "ünïcode \"quoted\""}, got.Metadata)
	require.Len(t, got.Tensors, len(ts))
	spell := map[dtype.DType]string{dtype.F64: "F64", dtype.F32: "F32", dtype.F16: "F16", dtype.BF16: "BF16", dtype.I32: "I32", dtype.I64: "I64", dtype.Bool: "BOOL"}
	for _, nt := range ts {
		g := got.Tensors[nt.Name]
		require.Equal(t, spell[nt.Tensor.DType()], g.DType, nt.Name)
		require.Equal(t, nt.Tensor.Shape(), nilIfEmpty(g.Shape), nt.Name)
		want := tensor.ToSlice[float64](nt.Tensor)
		if len(want) == 0 {
			want = nil
		}
		if len(g.Values) == 0 {
			g.Values = nil
		}
		require.Equal(t, want, g.Values, nt.Name)
	}
	s.Close()
	tensortest.RequireEmpty(t, d)
}
