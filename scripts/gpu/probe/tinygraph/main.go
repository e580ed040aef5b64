// tinygraph takes apart the time of sublet-bench's tiny-sgd step captured as a CUDA
// graph (docs/benchmarks.md, "Fifth session"): an eager step with the loss read back,
// a replay with the loss read back, a replay with a synchronisation instead, 50 replays
// per synchronisation (the device's time a replay), the host's cost of a replay, the
// loss read after a synchronisation, and the forward alone as a graph.
//
//	tinygraph          the tiny MLP (784-256-256-10, batch 64, SGD with momentum)
//	tinygraph wide     1024-1024-1024-10 instead
//	tinygraph eager    20 eager steps after the warm-up, nothing timed (for ncu)
//
// It runs on cuda:0; build it here (CGO_ENABLED=0 go build) and run it on the GPU
// machine with scripts/gpu/find_cublas.sh sourced.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func timeIt(name string, n int, f func()) {
	f()
	start := time.Now()
	for range n {
		f()
	}
	fmt.Printf("%-40s %8.2f µs\n", name, float64(time.Since(start).Nanoseconds())/1e3/float64(n))
}

func main() {
	dev, err := named.Open("cuda:0")
	must(err)
	widths := []int{784, 256, 256, 10}
	batch := 64
	if len(os.Args) > 1 && os.Args[1] == "wide" {
		widths = []int{1024, 1024, 1024, 10}
	}
	gen := tensor.NewGenerator(1)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: widths})
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	must(err)
	rng := rand.New(rand.NewPCG(2, 3))
	x := make([]float32, batch*widths[0])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = rng.Int64N(int64(widths[len(widths)-1]))
	}
	data := tensor.NewScope()
	var xr, lr *tensor.Tensor
	must(tensor.Try(func() {
		xr, lr = tensor.FromSlice(data, dev, dtype.F32, x, batch, widths[0]), tensor.FromSlice(data, dev, dtype.I64, labels)
	}))
	step := func() *tensor.Tensor {
		s := data.Child()
		defer s.Close()
		l := nn.CrossEntropyLoss{}.Loss(model.Forward(s.Bind(xr)), s.Bind(lr))
		l.Backward()
		opt.Step()
		opt.ZeroGrad(true)
		return s.Keep(l)
	}
	for range 3 {
		must(tensor.Try(func() { step().Item() }))
	}
	if len(os.Args) > 1 && os.Args[1] == "eager" {
		for range 20 {
			must(tensor.Try(func() { step().Item() }))
		}
		return
	}
	timeIt("eager step + Item", 2000, func() { step().Item() })
	var loss *tensor.Tensor
	g, err := tensor.CaptureGraph(dev, func() { loss = step() })
	must(err)
	fwdOnly := func() *tensor.Tensor {
		s := data.Child(tensor.NoGrad())
		defer s.Close()
		return s.Keep(nn.CrossEntropyLoss{}.Loss(model.Forward(s.Bind(xr)), s.Bind(lr)))
	}
	var l2 *tensor.Tensor
	gf, err := tensor.CaptureGraph(dev, func() { l2 = fwdOnly() })
	must(err)
	var sink float64
	timeIt("full: replay + Item", 5000, func() { must(g.Replay()); sink += loss.Item() })
	timeIt("full: replay + Synchronize", 5000, func() { must(g.Replay()); must(tensor.Synchronize(dev)) })
	timeIt("full: 50 replays then sync (all 50)", 100, func() {
		for range 50 {
			must(g.Replay())
		}
		must(tensor.Synchronize(dev))
	})
	timeIt("full: replay only (host cost, per call)", 200, func() { must(g.Replay()) })
	must(tensor.Synchronize(dev))
	timeIt("Item after sync", 5000, func() { sink += loss.Item() })
	timeIt("Synchronize alone", 5000, func() { must(tensor.Synchronize(dev)) })
	timeIt("fwd-nograd: 50 replays then sync (all 50)", 100, func() {
		for range 50 {
			must(gf.Replay())
		}
		must(tensor.Synchronize(dev))
	})
	timeIt("fwd-nograd: replay + Item", 5000, func() { must(gf.Replay()); sink += l2.Item() })
	fmt.Println("sink", sink != 0)
	must(g.Release())
	must(gf.Release())
	data.Close()
	opt.Release()
	model.Release()
}
