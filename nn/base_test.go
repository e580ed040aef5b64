package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// block is a residual block: x + fc(drop(x)).
type block struct {
	nn.Base
	FC   *nn.Linear
	Drop *nn.Dropout
}

func (b *block) Forward(x *tensor.Tensor) *tensor.Tensor {
	return x.Add(b.FC.Forward(b.Drop.Forward(x)))
}

// net has every kind of field Base looks at. In Python the same module is
//
//	class Net(nn.Module):
//	    def __init__(self):
//	        super().__init__()
//	        self.scale = nn.Parameter(torch.ones(4))
//	        self.fc1 = nn.Linear(3, 4)
//	        self.hidden_layer = nn.Sequential(nn.ReLU(), nn.Linear(4, 4))
//	        self.blocks = nn.ModuleList([Block(4), Block(4)])
//	        self.ln_final = nn.LayerNorm(4)
//	        self.lm_head = nn.Linear(4, 2, bias=False)
//
// whose state_dict keys are the names TestBaseNamesAsPyTorch expects.
type net struct {
	nn.Base
	Width       int // not a parameter
	FC1         *nn.Linear
	Scale       *tensor.Tensor
	HiddenLayer *nn.Sequential
	Blocks      []*block
	LNFinal     *nn.LayerNorm
	Head        *nn.Linear `nn:"lm_head"`
	Spare       *nn.Linear `nn:"-"`
	Missing     *nn.Linear // nil: nothing
}

func (n *net) Forward(x *tensor.Tensor) *tensor.Tensor {
	h := n.HiddenLayer.Forward(n.FC1.Forward(x)).Mul(n.Scale)
	for _, b := range n.Blocks {
		h = b.Forward(h)
	}
	return n.Head.Forward(n.LNFinal.Forward(h))
}

func newNet(in nn.Init) *net {
	return nn.Build(&net{
		Width:       4,
		FC1:         nn.NewLinear(in, 3, 4, true),
		Scale:       in.Param(func(t *tensor.Tensor) { t.Fill(1) }, 4),
		HiddenLayer: nn.NewSequential(nn.ReLU{}, nn.NewLinear(in, 4, 4, true)),
		Blocks: []*block{
			{FC: nn.NewLinear(in, 4, 4, true), Drop: nn.NewDropout(0.5)},
			{FC: nn.NewLinear(in, 4, 4, true), Drop: nn.NewDropout(0.5)},
		},
		LNFinal: nn.NewLayerNorm(in, 4),
		Head:    nn.NewLinear(in, 4, 2, false),
	})
}

// The parameters are found in the fields, named as PyTorch names the same module's
// state_dict, its own first and then its children's in field order; the children
// that embed Base are built with it.
func TestBaseNamesAsPyTorch(t *testing.T) {
	d := newCPU(t)
	m := newNet(nn.Init{Device: d, Gen: tensor.NewGenerator(1)})
	var names []string
	for _, p := range m.NamedParameters() {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"scale", "fc1.weight", "fc1.bias", "hidden_layer.1.weight", "hidden_layer.1.bias",
		"blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.fc.weight", "blocks.1.fc.bias",
		"ln_final.weight", "ln_final.bias", "lm_head.weight"}, names)
	require.Equal(t, m.Blocks[1].FC.Weight, nn.Parameters(m)[7])

	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(2)))
	y := m.Forward(tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3))
	y.Sum().Backward()
	for _, p := range m.NamedParameters() {
		require.NotNil(t, p.Tensor.Grad(), "%s has a gradient", p.Name)
	}
	s.Close()
	requireLive(t, d, "parameters and gradients", cat(paramSizes(m), paramSizes(m))...)
	m.Release()
	m.Release()
	requireEmpty(t, d)
}

// SetTraining reaches every child; Training reports it.
func TestBaseTrainingMode(t *testing.T) {
	d := newCPU(t)
	m := newNet(nn.Init{Device: d, Gen: tensor.NewGenerator(1)})
	require.True(t, m.Training())
	require.True(t, m.Blocks[0].Training())
	m.SetTraining(false)
	require.False(t, m.Training())
	require.False(t, m.Blocks[1].Training())
	s := tensor.NewScope(tensor.NoGrad())
	x := tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4}, 1, 4)
	require.Equal(t, vals(x), vals(m.Blocks[0].Drop.Forward(x)), "Dropout is off in evaluation mode")
	s.Close()
	m.Release()
	requireEmpty(t, d)
}

// tied shares one weight between its embedding and its output layer (weight tying):
// the weight is listed once, under its first name, as named_parameters does.
type tied struct {
	nn.Base
	Embed *nn.Embedding
	Out   *nn.Linear
}

func (m *tied) Forward(x *tensor.Tensor) *tensor.Tensor { return m.Out.Forward(m.Embed.Forward(x)) }

func TestBaseTiedWeightsOnce(t *testing.T) {
	d := newCPU(t)
	in := nn.Init{Device: d, Gen: tensor.NewGenerator(1)}
	e := nn.NewEmbedding(in, 5, 3)
	m := nn.Build(&tied{Embed: e, Out: &nn.Linear{Weight: e.Weight}})
	ps := m.NamedParameters()
	require.Len(t, ps, 1)
	require.Equal(t, "embed.weight", ps[0].Name)
	m.Release()
	requireEmpty(t, d)
}

type noBase struct{ FC *nn.Linear }

func (*noBase) Forward(x *tensor.Tensor) *tensor.Tensor { return x }
func (*noBase) NamedParameters() []nn.Parameter         { return nil }
func (*noBase) SetTraining(bool)                        {}
func (*noBase) Release()                                {}

type hiddenField struct {
	nn.Base
	fc *nn.Linear
}

func (*hiddenField) Forward(x *tensor.Tensor) *tensor.Tensor { return x }

type plainHolder struct{ FC *nn.Linear }

type heldInPlainStruct struct {
	nn.Base
	Parts plainHolder
}

func (*heldInPlainStruct) Forward(x *tensor.Tensor) *tensor.Tensor { return x }

type twoNames struct {
	nn.Base
	A *nn.Linear `nn:"fc"`
	B *nn.Linear `nn:"fc"`
}

func (*twoNames) Forward(x *tensor.Tensor) *tensor.Tensor { return x }

// Build refuses what would silently leave parameters out or give two of them a name.
func TestBuildRefuses(t *testing.T) {
	for _, c := range []struct {
		build func()
		msg   string
	}{
		{func() { nn.Build(&noBase{}) }, "*nn_test.noBase does not embed nn.Base; add a field nn.Base to the struct"},
		{func() { nn.Build(&hiddenField{}) }, `field fc holds modules or tensors but is unexported, so it would be left out; export it (it is then named "fc") or tag it nn:"-"`},
		{func() { nn.Build(&heldInPlainStruct{}) }, "a field of type nn_test.plainHolder holds modules but is no Module"},
		{func() { nn.Build(&twoNames{}) }, `fields A and B are both named "fc"`},
		{func() { (&block{}).NamedParameters() }, "the module was not made with nn.Build; make it with nn.Build(&MyModule{...})"},
	} {
		err := tensor.Try(c.build)
		require.Error(t, err)
		require.Contains(t, err.Error(), c.msg)
	}
}

// Field names become PyTorch's attribute names.
func TestSnakeCaseNames(t *testing.T) {
	d := tensortest.Meta(t)
	in := nn.Init{Device: d, Gen: tensor.NewGenerator(1)}
	n := nn.Build(&namesModule{FC1: nn.NewLinear(in, 1, 1, false), HiddenLayer: nn.NewLinear(in, 1, 1, false),
		LNFinal: nn.NewLinear(in, 1, 1, false), QKV: nn.NewLinear(in, 1, 1, false), Layer2Norm: nn.NewLinear(in, 1, 1, false),
		Wte: nn.NewLinear(in, 1, 1, false)})
	var got []string
	for _, p := range n.NamedParameters() {
		got = append(got, p.Name)
	}
	require.Equal(t, []string{"fc1.weight", "hidden_layer.weight", "ln_final.weight", "qkv.weight", "layer2_norm.weight", "wte.weight"}, got)
	n.Release()
	requireEmpty(t, d)
}

type namesModule struct {
	nn.Base
	FC1, HiddenLayer, LNFinal, QKV, Layer2Norm, Wte *nn.Linear
}

func (*namesModule) Forward(x *tensor.Tensor) *tensor.Tensor { return x }
