package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dist"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// replica is one rank's model, its DataParallel wrapper and its optimizer.
type replica struct {
	dev   device.Device
	model nn.Module
	dp    *dist.DataParallel
	opt   optim.Optimizer
}

// newReplica builds the MLP of sizes on dev (drawn from seed+rank: only the broadcast in
// NewDataParallel makes the ranks start alike), wraps it and makes its optimizer.
func newReplica(c config, dev device.Device, b dist.Backend, sizes []int) (*replica, error) {
	r := &replica{dev: dev}
	r.model = nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed + uint64(b.Group().Rank()))}, nn.MLPConfig{Sizes: sizes})
	var err error
	r.dp, err = dist.NewDataParallel(r.model, b, dist.DataParallelConfig{
		BucketBytes: int64(c.bucketMB * (1 << 20)), FirstBucketBytes: int64(c.firstMB * (1 << 20))})
	if err != nil {
		r.release()
		return nil, err
	}
	params := nn.Parameters(r.model)
	if c.optimizer == "adam" {
		ac := optim.DefaultAdam()
		ac.LR = orDefault(c.lr, 0.01)
		r.opt, err = optim.NewAdam(params, ac)
	} else {
		r.opt, err = optim.NewSGD(params, optim.SGDConfig{LR: orDefault(c.lr, 0.1), Momentum: c.momentum})
	}
	if err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// release releases the optimizer's state, the buckets and the model.
func (r *replica) release() {
	if r.opt != nil {
		r.opt.Release()
	}
	if r.dp != nil {
		r.dp.Release()
	}
	r.model.Release()
}

// step runs one optimizer step on the micro-batches (x, labels) and returns the mean of
// their losses: every micro-batch but the last under NoSync, so the last backward
// averages the accumulated gradients across the ranks.
func (r *replica) step(xs [][]float32, labels [][]int64) float64 {
	loss := 0.0
	for i := range xs {
		micro := func() {
			s := tensor.NewScope()
			defer s.Close()
			n := len(labels[i])
			x := tensor.FromSlice(s, r.dev, dtype.F32, xs[i], n, len(xs[i])/n)
			l := nn.CrossEntropyLoss{}.Loss(r.dp.Forward(x), tensor.FromSlice(s, r.dev, dtype.I64, labels[i]))
			l.Backward()
			loss += l.Item()
		}
		if i < len(xs)-1 {
			r.dp.NoSync(micro)
		} else {
			micro()
		}
	}
	r.opt.Step()
	r.opt.ZeroGrad(true)
	return loss / float64(len(xs))
}

// train trains and reports. Tensor math panics reach run through demo.Try; the
// deferred releases run on the way.
func train(c config, dev device.Device, a *alloc.Allocator, b dist.Backend, out io.Writer) error {
	if c.bench > 0 {
		return bench(c, dev, b, out)
	}
	g := b.Group()
	rank, world := g.Rank(), g.WorldSize()
	data := toy.Spirals(c.seed, c.samples, c.classes)
	trainSet, testSet := data.Split(c.samples * 4 / 5)
	sizes := append(append([]int{data.Dim}, c.hidden...), c.classes)
	r, err := newReplica(c, dev, b, sizes)
	if err != nil {
		return err
	}
	defer r.release()
	params := nn.ParameterBytes(r.model)
	st := r.dp.Stats()
	fmt.Fprintf(out, "sublet examples/ddp: rank %d of %d (%s backend on %s), %d spiral arms, %d train / %d test points, MLP %s (%d parameters, %s), %s, batch %d per rank (%d per step in all), %d epochs\n",
		rank, world, b.Name(), dev.Name(), c.classes, trainSet.Len(), testSet.Len(), units.JoinInts(sizes, "-"), params/4, units.Bytes(params),
		describe(r.opt), c.batch, c.batch*c.accumulate*world, c.epochs)
	for i, bk := range st.Buckets {
		fmt.Fprintf(out, "bucket %d: %s, %s\n", i, units.Bytes(bk.Bytes), strings.Join(bk.Params, " "))
	}

	sampler, err := dist.NewSampler(trainSet.Len(), rank, world, dist.SamplerConfig{Shuffle: true, Seed: c.seed})
	if err != nil {
		return err
	}
	mean := tensor.NewScope(tensor.NoGrad())
	defer mean.Close()
	acc := 0.0
	xs, ls := make([][]float32, c.accumulate), make([][]int64, c.accumulate)
	for epoch := 1; epoch <= c.epochs; epoch++ {
		r.model.SetTraining(true)
		idx := sampler.Indices(epoch)
		sum, steps := 0.0, 0
		per := c.batch * c.accumulate
		for start := 0; start < len(idx); start += per {
			chunk := idx[start:min(start+per, len(idx))]
			n := 0
			for m := range xs {
				part := chunk[min(m*c.batch, len(chunk)):min((m+1)*c.batch, len(chunk))]
				if len(part) > 0 {
					xs[n], ls[n] = trainSet.Batch(part, xs[n], ls[n])
					n++
				}
			}
			sum += r.step(xs[:n], ls[:n])
			steps++
		}
		// the ranks' mean losses, averaged: the loss of the whole epoch
		all := tensor.FromSlice(mean, dev, dtype.F32, []float32{float32(sum / float64(steps))})
		w, err := b.AllReduce(all, dist.Avg)
		if err == nil {
			err = w.Wait()
		}
		if err != nil {
			return err
		}
		var testLoss float64
		testLoss, acc = evaluate(dev, r.model, testSet)
		m := demo.Read(a)
		fmt.Fprintf(out, "epoch %3d/%d  loss %.4f (all ranks %.4f)  test loss %.4f  test accuracy %.4f  allocated %s (peak %s)\n", epoch, c.epochs,
			sum/float64(steps), all.Item(), testLoss, acc, units.Bytes(m.Allocated), units.Bytes(m.PeakAllocated))
		all.Release()
	}
	fmt.Fprintf(out, "final test accuracy %.3f (chance %.3f)\n", acc, 1/float64(c.classes))
	st = r.dp.Stats()
	fmt.Fprintf(out, "gradient reductions %d, buckets started while backward was still running %d\n", st.Reductions, st.Overlapped)
	fmt.Fprintf(out, "parameters: fnv64 %016x (the same on every rank)\n", checksum(r.model))
	if c.save != "" && rank == 0 {
		if err := save(c.save, r.model); err != nil {
			return err
		}
		fmt.Fprintf(out, "parameters written to %s\n", c.save)
	}

	state := r.opt.StateBytes()
	m := demo.Read(a)
	requested := m.Tensors()
	fmt.Fprint(out, m.BackendLine())
	fmt.Fprintf(out, "after training: %d bytes requested = parameters %d + buckets %d + %s state %d\n", requested, params, st.BucketBytes, c.optimizer, state)
	if requested != params+st.BucketBytes+state {
		return fmt.Errorf("the allocator holds %d bytes, not parameters + buckets + optimizer state = %d: something leaked", requested, params+st.BucketBytes+state)
	}
	r.dp.Release()
	fmt.Fprintf(out, "after releasing the DataParallel wrapper: %d bytes requested (its buckets are gone)\n", demo.Read(a).Tensors())
	r.release()
	runtime.GC()
	runtime.GC() // cleanups run after the cycle that found the handles
	if leaks := tensor.Leaks(); len(leaks) > 0 {
		return fmt.Errorf("%d allocation sites leaked tensor handles, the first at\n%s", len(leaks), leaks[0].Site)
	}
	mean.Close()
	if err := demo.Drain(a); err != nil {
		return err
	}
	fmt.Fprintln(out, "after releasing everything and emptying the cache: 0 bytes allocated, 0 reserved")
	return nil
}

// evaluate returns the loss and accuracy on d, under NoGrad in evaluation mode (the
// same on every rank: the parameters are).
func evaluate(dev device.Device, model nn.Module, d toy.Dataset) (loss, accuracy float64) {
	model.SetTraining(false)
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	logits := model.Forward(tensor.FromSlice(s, dev, dtype.F32, d.X, d.Len(), d.Dim))
	l := nn.CrossEntropyLoss{}.Loss(logits, tensor.FromSlice(s, dev, dtype.I64, d.Labels))
	correct := 0
	for i, p := range tensor.ToSlice[int64](logits.Argmax(1)) {
		if p == d.Labels[i] {
			correct++
		}
	}
	return l.Item(), float64(correct) / float64(d.Len())
}

// bench times c.bench steps on one fixed batch of noise per rank after 10 warm-up
// steps (the PyTorch baseline's protocol, scripts/gpu/ddp_scaling.sh).
func bench(c config, dev device.Device, b dist.Backend, out io.Writer) error {
	g := b.Group()
	sizes := append(append([]int{c.features}, c.hidden...), c.classes)
	r, err := newReplica(c, dev, b, sizes)
	if err != nil {
		return err
	}
	defer r.release()
	d := toy.Noise(c.seed+uint64(g.Rank()), c.batch, c.features, c.classes)
	xs, ls := [][]float32{d.X}, [][]int64{d.Labels}
	for range 10 {
		r.step(xs, ls)
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	if err := g.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	for range c.bench {
		r.step(xs, ls)
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	perSec := float64(c.bench) / elapsed.Seconds()
	fmt.Fprintf(out, "bench: rank %d of %d, MLP %s, batch %d per rank, %s backend on %s: %d steps in %v: %.2f steps/s, %.0f samples/s in all\n",
		g.Rank(), g.WorldSize(), units.JoinInts(sizes, "-"), c.batch, b.Name(), dev.Name(), c.bench, elapsed.Round(time.Millisecond), perSec, perSec*float64(c.batch*g.WorldSize()))
	return nil
}

// checksum is the FNV-1a hash of the parameters' float32 bits, in order.
func checksum(m nn.Module) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, p := range nn.Parameters(m) {
		for _, v := range tensor.ToSlice[float32](p) {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// save writes the parameters as little-endian float32, in order.
func save(path string, m nn.Module) error {
	var buf []byte
	for _, p := range nn.Parameters(m) {
		for _, v := range tensor.ToSlice[float32](p) {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
	}
	return os.WriteFile(path, buf, 0o644)
}

// describe names an optimizer and its hyper-parameters.
func describe(o optim.Optimizer) string {
	switch o := o.(type) {
	case *optim.SGD:
		c := o.Config()
		return fmt.Sprintf("sgd lr %g momentum %g", c.LR, c.Momentum)
	case *optim.Adam:
		c := o.Config()
		return fmt.Sprintf("adam lr %g", c.LR)
	}
	return ""
}
