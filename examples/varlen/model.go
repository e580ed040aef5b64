package main

import (
	"math"
	"math/rand/v2"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// corpus is the data set: sequences of token ids of varied lengths, and a class each.
type corpus struct {
	tokens  [][]int64
	labels  []int64
	lengths []int
}

// newCorpus draws n sequences whose lengths are log-normal (median e^4.5 ≈ 90 tokens,
// a long tail) clamped to [8, maxLen], of tokens below vocab, each labelled by the
// share of its tokens in the lower half of the vocabulary, cut into classes equal
// ranges around a half (a task the mean of the embeddings can learn).
func newCorpus(seed uint64, n, maxLen, vocab, classes int) corpus {
	r := rand.New(rand.NewPCG(seed, 0x5e9))
	c := corpus{tokens: make([][]int64, n), labels: make([]int64, n), lengths: make([]int, n)}
	for i := range n {
		l := int(math.Round(math.Exp(4.5 + 0.7*r.NormFloat64())))
		l = min(max(l, 8), maxLen)
		seq := make([]int64, l)
		for j := range seq {
			seq[j] = int64(r.IntN(vocab))
		}
		c.tokens[i], c.lengths[i] = seq, l
		low := 0
		for _, t := range seq {
			if int(t) < vocab/2 {
				low++
			}
		}
		// The share is about ½ ± 1/(2√l): spread those classes over ½ ± 1/√l.
		share := (float64(low)/float64(l) - 0.5) * math.Sqrt(float64(l)) / 2
		c.labels[i] = int64(min(max(int((share+0.5)*float64(classes)), 0), classes-1))
	}
	return c
}

// padded returns the sequences idx padded with token 0 to the longest of them: the
// token ids row by row, the labels, and the padded length.
func (c corpus) padded(idx []int) ([]int64, []int64, int) {
	longest := 0
	for _, i := range idx {
		longest = max(longest, c.lengths[i])
	}
	ids, labels := make([]int64, len(idx)*longest), make([]int64, len(idx))
	for r, i := range idx {
		copy(ids[r*longest:], c.tokens[i])
		labels[r] = c.labels[i]
	}
	return ids, labels, longest
}

// model embeds the tokens, runs a Linear+ReLU on each, averages over the sequence and
// classifies the average. Each token's activations are its embedding (dim floats,
// saved by the Linear) and its ReLU output (hidden floats): memory grows with the
// padded length of the batch.
type model struct {
	tokens *nn.Sequential
	head   *nn.Linear
	opt    *optim.SGD
}

func newModel(dev device.Device, seed uint64, vocab, dim, hidden, classes int, lr float64) (*model, error) {
	init := nn.Init{Device: dev, Gen: tensor.NewGenerator(seed)}
	m := &model{
		tokens: nn.NewSequential(nn.NewEmbedding(init, vocab, dim), nn.NewLinear(init, dim, hidden, true), nn.ReLU{}),
		head:   nn.NewLinear(init, hidden, classes, true),
	}
	opt, err := optim.NewSGD(m.params(), optim.SGDConfig{LR: lr, Momentum: 0.9})
	if err != nil {
		m.release()
		return nil, err
	}
	m.opt = opt
	return m, nil
}

func (m *model) params() []*tensor.Tensor {
	return append(nn.Parameters(m.tokens), nn.Parameters(m.head)...)
}

// bytes is the parameters' and the optimizer state's size.
func (m *model) bytes() int64 {
	return nn.ParameterBytes(m.tokens) + nn.ParameterBytes(m.head) + m.opt.StateBytes()
}

func (m *model) release() {
	if m.opt != nil {
		m.opt.Release()
	}
	m.tokens.Release()
	m.head.Release()
}

// backward runs forward and backward on a padded batch, the loss scaled by weight
// (the batch's share of a larger one whose gradients accumulate), in a scope that is
// closed on return, also when it runs out of memory. It returns the loss (0 without
// data).
func (m *model) backward(dev device.Device, ids, labels []int64, length int, weight float64, hasData bool) float64 {
	s := tensor.NewScope()
	defer s.Close()
	x := tensor.FromSlice(s, dev, dtype.I64, ids, len(labels), length)
	logits := m.head.Forward(m.tokens.Forward(x).Mean(1))
	loss := nn.CrossEntropyLoss{}.Loss(logits, tensor.FromSlice(s, dev, dtype.I64, labels))
	loss.MulScalar(weight).Backward()
	if hasData {
		return loss.Item()
	}
	return 0
}

// step is one optimizer step after the gradients of one or more backward calls.
func (m *model) step() {
	m.opt.Step()
	m.opt.ZeroGrad(true)
}

// peakOf is the most bytes allocated during one training step on batch sequences of
// length tokens, measured on a fresh meta device (after a first step has made the
// optimizer state).
func peakOf(c config, batch, length int) (int64, error) {
	dev, a, err := metaDevice(0, alloc.Config{})
	if err != nil {
		return 0, err
	}
	m, err := newModel(dev, c.seed, c.vocab, c.dim, c.hidden, c.classes, c.lr)
	if err != nil {
		return 0, err
	}
	defer m.release()
	ids, labels := make([]int64, batch*length), make([]int64, batch)
	var peak int64
	err = tensor.Try(func() {
		for i := range 2 {
			if i == 1 {
				a.ResetPeakStats()
			}
			m.backward(dev, ids, labels, length, 1, false)
			m.step()
		}
		peak = demo.Read(a).PeakAllocated
	})
	return peak, err
}
