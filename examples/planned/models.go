package main

import (
	"math"
	"math/rand/v2"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// model is what train runs: a module and the loss of one step's batch, drawn from the
// step's number so that every run sees the same data.
type model interface {
	nn.Module
	loss(s *tensor.Scope, dev device.Device, step int) *tensor.Tensor
}

// models are the examples' two, by name.
var models = []string{"mlp", "transformer"}

// newModel makes the model named name on dev; scale multiplies its widths, its batch
// and its sequence length.
func newModel(name string, dev device.Device, scale int) model {
	init := nn.Init{Device: dev, Gen: tensor.NewGenerator(7)}
	if name == "mlp" {
		m := &mlp{in: 32 * scale, batch: 32 * scale}
		m.Sequential = nn.NewMLP(init, nn.MLPConfig{Sizes: []int{m.in, 64 * scale, 64 * scale, 8}})
		return m
	}
	return newTransformer(init, scale)
}

// mlp classifies random points by the signs of their first three coordinates.
type mlp struct {
	*nn.Sequential
	in, batch int
}

func (m *mlp) loss(s *tensor.Scope, dev device.Device, step int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(uint64(step), 1))
	xs := make([]float32, m.batch*m.in)
	labels := make([]int64, m.batch)
	if dev.Residency() == device.Meta {
		labels = labels[:0] // nothing is computed: the values need not be drawn
	}
	for i := range labels {
		for j := range m.in {
			xs[i*m.in+j] = float32(r.NormFloat64())
		}
		for j := range 3 {
			if xs[i*m.in+j] > 0 {
				labels[i] |= 1 << j
			}
		}
	}
	x := tensor.FromSlice(s, dev, dtype.F32, xs, m.batch, m.in)
	y := tensor.FromSlice(s, dev, dtype.I64, labels[:m.batch])
	return nn.CrossEntropyLoss{}.Loss(m.Forward(x), y)
}

// transformer is a two-block transformer-like model over token sequences: an
// embedding, per block single-head self-attention and a GELU feed-forward, each with a
// residual and a layer norm, and a head predicting the next token.
type transformer struct {
	emb                  *nn.Embedding
	blocks               []*block
	head                 *nn.Linear
	vocab, width, seqLen int
}

type block struct {
	q, k, v, o, ff1, ff2 *nn.Linear
	ln1, ln2             *nn.LayerNorm
}

func newTransformer(init nn.Init, scale int) *transformer {
	m := &transformer{vocab: 64 * scale, width: 32 * scale, seqLen: 16 * scale}
	vocab, width := m.vocab, m.width
	m.emb = nn.NewEmbedding(init, vocab, width)
	for range 2 {
		m.blocks = append(m.blocks, &block{
			q: nn.NewLinear(init, width, width, true), k: nn.NewLinear(init, width, width, true),
			v: nn.NewLinear(init, width, width, true), o: nn.NewLinear(init, width, width, true),
			ff1: nn.NewLinear(init, width, 4*width, true), ff2: nn.NewLinear(init, 4*width, width, true),
			ln1: nn.NewLayerNorm(init, width), ln2: nn.NewLayerNorm(init, width),
		})
	}
	m.head = nn.NewLinear(init, width, vocab, true)
	return m
}

// Forward maps token ids [seqLen] to logits [seqLen, vocab].
func (m *transformer) Forward(ids *tensor.Tensor) *tensor.Tensor {
	x := m.emb.Forward(ids)
	for _, b := range m.blocks {
		q, k, v := b.q.Forward(x), b.k.Forward(x), b.v.Forward(x)
		att := q.MatMul(k.T()).MulScalar(1 / math.Sqrt(float64(m.width))).Softmax(1)
		x = b.ln1.Forward(x.Add(b.o.Forward(att.MatMul(v))))
		x = b.ln2.Forward(x.Add(b.ff2.Forward(b.ff1.Forward(x).Gelu())))
	}
	return m.head.Forward(x)
}

// loss is the next-token loss of a sequence that counts up by a step-dependent stride.
func (m *transformer) loss(s *tensor.Scope, dev device.Device, step int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(uint64(step), 2))
	start, stride := r.IntN(m.vocab), 1+r.IntN(3)
	ids := make([]int64, m.seqLen+1)
	for i := range ids {
		ids[i] = int64((start + i*stride) % m.vocab)
	}
	x := tensor.FromSlice(s, dev, dtype.I64, ids[:m.seqLen])
	y := tensor.FromSlice(s, dev, dtype.I64, ids[1:])
	return nn.CrossEntropyLoss{}.Loss(m.Forward(x), y)
}

func (m *transformer) modules() []nn.Module {
	ms := []nn.Module{m.emb}
	for _, b := range m.blocks {
		ms = append(ms, b.q, b.k, b.v, b.o, b.ff1, b.ff2, b.ln1, b.ln2)
	}
	return append(ms, m.head)
}

func (m *transformer) NamedParameters() []nn.Parameter {
	var ps []nn.Parameter
	for _, c := range m.modules() {
		ps = append(ps, c.NamedParameters()...)
	}
	return ps
}

func (m *transformer) SetTraining(bool) {}

func (m *transformer) Release() {
	for _, c := range m.modules() {
		c.Release()
	}
}
