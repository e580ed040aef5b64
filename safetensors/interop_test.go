package safetensors_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// The environment of TestInteropWithPyTorch.
const (
	interopDir    = "SUBLET_SAFETENSORS_INTEROP" // the folder the two sides exchange files in
	interopPhase  = "SUBLET_SAFETENSORS_PHASE"   // write (sublet's files) or read (PyTorch's)
	interopDevice = "SUBLET_SAFETENSORS_DEVICE"  // also move the tensors through this device (cuda:0)
)

// expected is the JSON beside each side's files: what the other side must find.
type expected struct {
	Tensors map[string]struct {
		DType  string    `json:"dtype"`
		Shape  []int     `json:"shape"`
		Values []float64 `json:"values"`
	} `json:"tensors"`
	Model     map[string][]float64 `json:"model"`      // the saved parameters, flattened
	Batch     map[string][]float64 `json:"batch"`      // x (2×4, flattened) and labels
	AfterStep map[string][]float64 `json:"after_step"` // the parameters after one more step on Batch
}

// TestInteropWithPyTorch checks files against Python's safetensors and PyTorch on the
// GPU machine, where they are installed: scripts/gpu/suite.sh (step safetensors) runs
// it with SUBLET_SAFETENSORS_PHASE=write, then scripts/gpu/safetensors_interop.py
// (which loads sublet's files with safetensors.torch.load_file, into a torch model
// and a torch AdamW, and writes its own), then with SUBLET_SAFETENSORS_PHASE=read.
// Without SUBLET_SAFETENSORS_INTEROP it is skipped.
func TestInteropWithPyTorch(t *testing.T) {
	dir := os.Getenv(interopDir)
	if dir == "" {
		t.Skip(interopDir + " is not set: this runs in scripts/gpu/suite.sh, with Python's safetensors and PyTorch")
	}
	cpuDev := tensortest.CPU(t)
	devs := []device.Device{cpuDev}
	if name := os.Getenv(interopDevice); name != "" {
		d, err := named.Open(name)
		require.NoError(t, err)
		devs = append(devs, d)
	}
	switch phase := os.Getenv(interopPhase); phase {
	case "write":
		writeForPyTorch(t, dir, devs)
	case "read":
		readFromPyTorch(t, dir, devs)
	default:
		t.Fatalf("%s=%q: want write or read", interopPhase, phase)
	}
}

// spell is each type's name in the exchange's JSON (the safetensors spelling).
var spell = map[dtype.DType]string{dtype.F64: "F64", dtype.F32: "F32", dtype.F16: "F16", dtype.BF16: "BF16", dtype.I32: "I32", dtype.I64: "I64", dtype.Bool: "BOOL"}

func flat(t *tensor.Tensor) []float64 {
	if t.DType().IsFloat() {
		return tensor.ToSlice[float64](t)
	}
	v := tensor.ToSlice[int64](t)
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func namedValues(m nn.Module) map[string][]float64 {
	out := map[string][]float64{}
	for _, p := range m.NamedParameters() {
		out[p.Name] = flat(p.Tensor)
	}
	return out
}

// writeForPyTorch writes sublet_tensors.safetensors (and, through another device,
// sublet_tensors_DEVICE.safetensors), an MLP and its AdamW after two steps, and
// sublet_expected.json.
func writeForPyTorch(t *testing.T, dir string, devs []device.Device) {
	cpuDev := devs[0]
	s := tensor.NewScope()
	defer s.Close()
	ts := sample(s, cpuDev)
	var exp expected
	exp.Tensors = map[string]struct {
		DType  string    `json:"dtype"`
		Shape  []int     `json:"shape"`
		Values []float64 `json:"values"`
	}{}
	for _, nt := range ts {
		e := exp.Tensors[nt.Name]
		e.DType, e.Shape, e.Values = spell[nt.Tensor.DType()], append([]int{}, nt.Tensor.Shape()...), flat(nt.Tensor) // a scalar's shape is [], not null
		exp.Tensors[nt.Name] = e
	}
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "sublet_tensors.safetensors"), ts, nil))
	for _, d := range devs[1:] {
		moved := make([]safetensors.Named, len(ts))
		for i, nt := range ts {
			moved[i] = safetensors.Named{Name: nt.Name, Tensor: nt.Tensor.Contiguous().To(d)}
		}
		require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "sublet_tensors_"+d.Name()+".safetensors"), moved, nil))
	}
	m := mlp(cpuDev, 1)
	defer m.Release()
	o, err := optim.NewAdamW(nn.Parameters(m), optim.DefaultAdamW())
	require.NoError(t, err)
	defer o.Release()
	for k := range 2 {
		trainStep(cpuDev, m, o, k)
	}
	require.NoError(t, safetensors.SaveModuleFile(filepath.Join(dir, "sublet_model.safetensors"), m, nil))
	require.NoError(t, safetensors.SaveOptimizerFile(filepath.Join(dir, "sublet_adamw.safetensors"), o, nil))
	exp.Model = namedValues(m)
	x, labels := batchAt(2)
	exp.Batch = map[string][]float64{"x": widen32(x), "labels": {float64(labels[0]), float64(labels[1])}}
	trainStep(cpuDev, m, o, 2)
	exp.AfterStep = namedValues(m)
	b, err := json.Marshal(exp)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sublet_expected.json"), b, 0o644))
}

func widen32(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// readFromPyTorch reads what safetensors_interop.py wrote: tensors of every type (onto
// each device), a torch MLP's state_dict into an nn.MLP and a torch AdamW's state into
// an AdamW, which then step as torch's did.
func readFromPyTorch(t *testing.T, dir string, devs []device.Device) {
	var exp expected
	b, err := os.ReadFile(filepath.Join(dir, "torch_expected.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &exp))
	f, err := safetensors.Open(filepath.Join(dir, "torch_tensors.safetensors"))
	require.NoError(t, err)
	defer f.Close()
	s := tensor.NewScope()
	defer s.Close()
	for name, e := range exp.Tensors {
		for _, d := range devs {
			x, err := f.Load(s, d, name)
			require.NoError(t, err, name)
			require.True(t, slices.Equal(e.Shape, x.Shape()), "%s: shape %v, want %v", name, x.Shape(), e.Shape) // [] and a scalar's nil alike
			require.Equal(t, e.DType, spell[x.DType()], name)
			got := flat(x.To(devs[0]))
			if len(e.Values) == 0 {
				require.Empty(t, got, name)
				continue
			}
			require.Equal(t, e.Values, got, "%s on %s", name, d.Name())
		}
	}
	cpuDev := devs[0]
	m := mlp(cpuDev, 7)
	defer m.Release()
	mf, err := safetensors.Open(filepath.Join(dir, "torch_model.safetensors"))
	require.NoError(t, err)
	defer mf.Close()
	require.NoError(t, safetensors.LoadModule(mf.Reader, m))
	require.Equal(t, exp.Model, namedValues(m))
	o, err := optim.NewAdamW(nn.Parameters(m), optim.DefaultAdamW())
	require.NoError(t, err)
	defer o.Release()
	of, err := safetensors.Open(filepath.Join(dir, "torch_adamw.safetensors"))
	require.NoError(t, err)
	defer of.Close()
	require.NoError(t, safetensors.LoadOptimizer(of.Reader, o))
	x := make([]float32, len(exp.Batch["x"]))
	for i, v := range exp.Batch["x"] {
		x[i] = float32(v)
	}
	trainOn(cpuDev, m, o, x, []int64{int64(exp.Batch["labels"][0]), int64(exp.Batch["labels"][1])})
	for name, want := range exp.AfterStep {
		require.InDeltaSlice(t, want, namedValues(m)[name], 1e-5, "%s after a step from torch's state", name)
	}
}
