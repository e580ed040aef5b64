package safetensors_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func mlp(d device.Device, seed uint64) *nn.Sequential {
	return nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(seed)}, nn.MLPConfig{Sizes: []int{4, 8, 3}})
}

func params(m nn.Module) [][]float32 {
	var out [][]float32
	for _, p := range nn.Parameters(m) {
		out = append(out, tensortest.Values(p))
	}
	return out
}

// batchAt is the k-th training batch of the tests: 2 rows of 4 features, 3 classes.
func batchAt(k int) (x []float32, labels []int64) {
	return []float32{1, -2, 0.5, float32(k), 0, 1, 2, -1}, []int64{2, int64(k % 3)}
}

// trainStep runs one step of o on m with the k-th batch and the mean cross entropy.
func trainStep(d device.Device, m nn.Module, o optim.Optimizer, k int) {
	x, labels := batchAt(k)
	trainOn(d, m, o, x, labels)
}

// trainOn runs one step of o on m with the batch x [2, 4] and labels [2].
func trainOn(d device.Device, m nn.Module, o optim.Optimizer, x []float32, labels []int64) {
	s := tensor.NewScope()
	defer s.Close()
	o.ZeroGrad(true)
	nn.CrossEntropyLoss{}.Loss(m.Forward(tensor.FromSlice(s, d, dtype.F32, x, 2, 4)),
		tensor.FromSlice(s, d, dtype.I64, labels)).Backward()
	o.Step()
}

// A module saved and loaded into another of the same architecture has its values,
// and the same goes for an Adam optimizer's state: the loaded pair trains on exactly
// as the original does.
func TestModuleAndOptimizerRoundTrip(t *testing.T) {
	d := tensortest.CPU(t)
	dir := t.TempDir()
	m := mlp(d, 1)
	o, err := optim.NewAdamW(nn.Parameters(m), optim.DefaultAdamW())
	require.NoError(t, err)
	for k := range 3 {
		trainStep(d, m, o, k)
	}
	require.NoError(t, safetensors.SaveModuleFile(filepath.Join(dir, "model.safetensors"), m, map[string]string{"step": "3"}))
	require.NoError(t, safetensors.SaveOptimizerFile(filepath.Join(dir, "adam.safetensors"), o, nil))

	m2 := mlp(d, 2)
	require.NotEqual(t, params(m), params(m2))
	o2, err := optim.NewAdamW(nn.Parameters(m2), optim.DefaultAdamW())
	require.NoError(t, err)
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"step": "3", "format": "pt"}, f.Metadata())
	require.NoError(t, safetensors.LoadModule(f.Reader, m2))
	require.NoError(t, f.Close())
	require.Equal(t, params(m), params(m2))
	f, err = safetensors.Open(filepath.Join(dir, "adam.safetensors"))
	require.NoError(t, err)
	names := []string{}
	for _, info := range f.Tensors() {
		names = append(names, info.Name)
	}
	require.ElementsMatch(t, []string{"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step", "state.1.exp_avg", "state.1.exp_avg_sq",
		"state.1.step", "state.2.exp_avg", "state.2.exp_avg_sq", "state.2.step", "state.3.exp_avg", "state.3.exp_avg_sq", "state.3.step"}, names)
	require.Equal(t, "AdamW", f.Metadata()["optimizer"])
	require.JSONEq(t, `[{"lr":0.001,"betas":[0.9,0.999],"eps":1e-8,"weight_decay":0.01,"amsgrad":false,"capturable":false,"decoupled_weight_decay":true,"params":[0,1,2,3]}]`,
		f.Metadata()["param_groups"])
	require.NoError(t, safetensors.LoadOptimizer(f.Reader, o2))
	require.NoError(t, f.Close())
	for k := 3; k < 6; k++ {
		trainStep(d, m, o, k)
		trainStep(d, m2, o2, k)
	}
	require.Equal(t, params(m), params(m2), "the loaded model and optimizer train on as the original")
	var live []int64
	for range 8 { // per model: parameters, gradients, exp_avg, exp_avg_sq
		live = append(live, paramSizes(m)...)
	}
	tensortest.RequireLive(t, d, "two models and their optimizers", live...)
	for _, x := range []optim.Optimizer{o, o2} {
		x.Release()
	}
	m.Release()
	m2.Release()
	tensortest.RequireEmpty(t, d)
}

// LoadModuleFile and LoadOptimizerFile open, load and close: the loaded pair trains on
// as the original; a file that is not there is an error naming it.
func TestLoadFiles(t *testing.T) {
	d := tensortest.CPU(t)
	dir := t.TempDir()
	m, m2 := mlp(d, 1), mlp(d, 2)
	o, err := optim.NewSGD(nn.Parameters(m), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)
	o2, err := optim.NewSGD(nn.Parameters(m2), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)
	trainStep(d, m, o, 0)
	model, state := filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "sgd.safetensors")
	require.NoError(t, safetensors.SaveModuleFile(model, m, nil))
	require.NoError(t, safetensors.SaveOptimizerFile(state, o, nil))
	require.NoError(t, safetensors.LoadModuleFile(model, m2))
	require.NoError(t, safetensors.LoadOptimizerFile(state, o2))
	require.Equal(t, params(m), params(m2))
	trainStep(d, m, o, 1)
	trainStep(d, m2, o2, 1)
	require.Equal(t, params(m), params(m2), "the momentum buffers came along")
	missing := filepath.Join(dir, "nothing.safetensors")
	require.ErrorContains(t, safetensors.LoadModuleFile(missing, m2), missing)
	require.ErrorContains(t, safetensors.LoadOptimizerFile(missing, o2), missing)
	require.ErrorContains(t, safetensors.LoadOptimizerFile(model, o2), "holds no optimizer state")
	o.Release()
	o2.Release()
	m.Release()
	m2.Release()
	tensortest.RequireEmpty(t, d)
}

func paramSizes(m nn.Module) []int64 { return tensortest.Sizes(nn.Parameters(m)...) }

// Loading is strict: a missing or extra name, another shape or another type is an
// error before anything is written.
func TestLoadModuleIsStrict(t *testing.T) {
	d := tensortest.CPU(t)
	dir := t.TempDir()
	m := mlp(d, 1)
	path := filepath.Join(dir, "m.safetensors")
	require.NoError(t, safetensors.SaveModuleFile(path, m, nil))
	f, err := safetensors.Open(path)
	require.NoError(t, err)
	defer f.Close()
	wider := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(3)}, nn.MLPConfig{Sizes: []int{4, 9, 3}})
	before := params(wider)
	require.ErrorContains(t, safetensors.LoadModule(f.Reader, wider), `mismatched ["0.weight" is F32 [8 4] in the file, float32 [9 4] here; "0.bias" is F32 [8] in the file, float32 [9] here; "2.weight"`)
	require.Equal(t, before, params(wider), "nothing was written")
	deeper := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(3)}, nn.MLPConfig{Sizes: []int{4, 8, 8, 3}})
	require.ErrorContains(t, safetensors.LoadModule(f.Reader, deeper), `missing ["4.weight" "4.bias"], unexpected [], mismatched ["2.weight" is F32 [3 8]`)
	shallow := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(3)}, nn.MLPConfig{Sizes: []int{4, 8}})
	require.ErrorContains(t, safetensors.LoadModule(f.Reader, shallow), `unexpected ["2.bias" "2.weight"]`)
	sgd, err := optim.NewSGD(nn.Parameters(m), optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	require.ErrorContains(t, safetensors.LoadOptimizer(f.Reader, sgd), "holds no optimizer state")
	for _, x := range []nn.Module{m, wider, deeper, shallow} {
		x.Release()
	}
	tensortest.RequireEmpty(t, d)
}
