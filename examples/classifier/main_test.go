package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// The program every user writes learns the spirals, holds the same bytes after every
// epoch (the test set, the parameters and AdamW's two moments, nothing of a step), and
// its saved model, loaded into a fresh one, predicts every test point alike; the file
// has PyTorch's names for the same module. The simulated GPU with data gives the same
// numbers, bit for bit.
func TestTrainsSavesAndReloads(t *testing.T) {
	args := []string{"-epochs", "4", "-points", "1500", "-test", "300"}
	var outs []string
	for _, dev := range []string{"cpu", "sim-backed"} {
		c, err := parseFlags(args, io.Discard)
		require.NoError(t, err)
		c.save = filepath.Join(t.TempDir(), "m.safetensors")
		d, a, _, err := demo.Open(dev)
		require.NoError(t, err)
		var out bytes.Buffer
		var r result
		require.NoError(t, demo.Try(d, func() error { r, err = train(c, d, a, &out); return err }))
		tensortest.RequireEmpty(t, d)

		require.Len(t, r.accuracy, 4)
		require.Greater(t, r.accuracy[3], 0.95, out.String())
		// 300 test points (2 floats and a label each), 2·64+64 + 2·(64·64+64) + 64·3+3
		// parameters of 4 bytes, three times: the weights and AdamW's two moments.
		const params = 2*64 + 64 + 2*(64*64+64) + 64*3 + 3
		require.Equal(t, int64(300*2*4+300*8+3*params*4), r.want)
		for e, h := range r.held {
			require.Equal(t, r.want, h, "after epoch %d", e+1)
		}
		require.True(t, r.same, "the reloaded model predicts as the trained one")
		require.Zero(t, r.skipped)
		require.Equal(t, 4*19, r.steps)

		f, err := safetensors.Open(c.save)
		require.NoError(t, err)
		var names []string
		for _, info := range f.Tensors() {
			names = append(names, info.Name)
		}
		require.NoError(t, f.Close())
		require.ElementsMatch(t, []string{"fc1.weight", "fc1.bias", "middle.fc1.weight", "middle.fc1.bias", "middle.fc2.weight",
			"middle.fc2.bias", "out.weight", "out.bias"}, names)
		outs = append(outs, strings.ReplaceAll(out.String(), " on "+d.Name(), ""))
	}
	require.Equal(t, outs[0], outs[1], "cpu and the simulated GPU print the same figures")
}

// The model's names are nn.Base's: its own fields, snake case, the middle block's
// under "middle".
func TestClassifierNames(t *testing.T) {
	d := tensortest.Meta(t)
	m := NewClassifier(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, 8, 3)
	var names []string
	for _, p := range m.NamedParameters() {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"fc1.weight", "fc1.bias", "middle.fc1.weight", "middle.fc1.bias", "middle.fc2.weight",
		"middle.fc2.bias", "out.weight", "out.bias"}, names)
	m.Release()
	tensortest.RequireEmpty(t, d)
}

func TestRunPrints(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-epochs", "2", "-points", "600", "-test", "100"}, &out))
	require.Contains(t, out.String(), "epoch  2  loss ")
	require.Contains(t, out.String(), "the same predictions on all 100 test points: true\n")
	require.Error(t, run([]string{"-device", "sim"}, io.Discard), "the meta device keeps no data to read")
}
