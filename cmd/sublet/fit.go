package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// fitSpec is the model and the device a fit searches over.
type fitSpec struct {
	sizes []int
	// capacity and occupied shape the simulated device (sim.Options).
	capacity, occupied int64
	// segments checkpoints the MLP's layers in that many segments; 0 is off.
	segments int
	// autocast is F16 or BF16 for mixed precision; dtype.Invalid is off.
	autocast  dtype.DType
	optimizer string
	cfg       alloc.Config
	// steps are the training steps a trial runs: the optimizer makes its state in the
	// first, so the second holds more.
	steps int
}

// trial is what one batch size did.
type trial struct {
	batch int
	fits  bool
	// peakAllocated and peakReserved are the allocator's peaks, up to the failure when
	// the batch did not fit.
	peakAllocated, peakReserved int64
	// oom is the failure when the batch did not fit.
	oom *alloc.OOMError
}

// try runs s.steps training steps at batch on a fresh simulated device without backing
// store: ops allocate what they would on a GPU and compute nothing. A batch that runs
// out of device memory is a trial that does not fit; any other error is returned.
func (s fitSpec) try(batch int) (trial, error) {
	t := trial{batch: batch}
	dev, err := sim.New(sim.Options{Capacity: s.capacity, Occupied: s.occupied})
	if err != nil {
		return t, err
	}
	a, err := alloc.ForConfig(dev, s.cfg)
	if err != nil {
		return t, err
	}
	var setupErr error
	err = tensor.Try(func() { setupErr = s.train(dev, batch) })
	st := a.Stats()
	t.peakAllocated, t.peakReserved = st.AllocatedBytes[alloc.StatAll].Peak, st.ReservedBytes[alloc.StatAll].Peak
	if !errors.As(err, &t.oom) {
		if err = errors.Join(err, setupErr); err != nil {
			return t, fmt.Errorf("batch %d: %w", batch, err)
		}
		t.fits = true
	}
	if err := a.EmptyCache(); err != nil {
		return t, err
	}
	if n := a.Stats().AllocatedBytes[alloc.StatAll].Current; n != 0 {
		return t, fmt.Errorf("batch %d: %d bytes still allocated after the trial", batch, n)
	}
	return t, nil
}

// train builds the model and its optimizer on dev and runs the training steps; tensor
// math panics (out of memory) reach try through tensor.Try, the releases run on the way.
func (s fitSpec) train(dev *sim.Device, batch int) error {
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: s.sizes})
	defer model.Release()
	opt, err := s.newOptimizer(nn.Parameters(model))
	if err != nil {
		return err
	}
	if opt != nil {
		defer opt.Release()
	}
	layers := make([]checkpoint.Layer, len(model.Children))
	for i, c := range model.Children {
		layers[i] = c
	}
	for range s.steps {
		if err := s.step(dev, model, layers, batch); err != nil {
			return err
		}
		if opt != nil {
			opt.Step()
		}
		for _, p := range nn.Parameters(model) {
			p.ZeroGrad(true)
		}
	}
	return nil
}

// step is one forward and backward; the batch lives in the step's scope.
func (s fitSpec) step(dev *sim.Device, model *nn.Sequential, layers []checkpoint.Layer, batch int) error {
	sc := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(2)))
	defer sc.Close()
	x := sc.Randn(dev, dtype.F32, batch, s.sizes[0])
	labels := sc.Zeros(dev, dtype.I64, batch) // the meta device holds no values to draw
	fwd := sc
	if s.autocast != dtype.Invalid {
		var err error
		if fwd, err = amp.Autocast(sc, s.autocast); err != nil {
			return err
		}
	}
	var logits *tensor.Tensor
	if s.segments > 0 {
		logits = checkpoint.Sequential(layers, s.segments, fwd.Bind(x))
	} else {
		logits = model.Forward(fwd.Bind(x))
	}
	loss := tensor.CrossEntropy(logits, fwd.Bind(labels))
	if fwd != sc {
		fwd.Keep(loss)
		fwd.Close()
	}
	loss.Backward()
	return nil
}

func (s fitSpec) newOptimizer(params []*tensor.Tensor) (optim.Optimizer, error) {
	switch s.optimizer {
	case "adam":
		return optim.NewAdam(params, optim.DefaultAdam())
	case "adamw":
		return optim.NewAdamW(params, optim.DefaultAdamW())
	case "sgd":
		return optim.NewSGD(params, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	case "none":
		return nil, nil
	}
	return nil, fmt.Errorf("optimizer %q: want adam, adamw, sgd (with momentum) or none", s.optimizer)
}

// search finds the largest batch in [1, limit] that fits, doubling from 1 until a batch
// does not fit (or limit is reached), then bisecting. It returns every trial in the order
// tried and the largest batch that fits, 0 when even 1 does not.
func (s fitSpec) search(limit int) ([]trial, int, error) {
	var trials []trial
	try := func(b int) (bool, error) {
		t, err := s.try(b)
		if err != nil {
			return false, err
		}
		trials = append(trials, t)
		return t.fits, nil
	}
	lo, hi := 0, 0 // lo fits (0: none known), hi does not (0: none known)
	for b := 1; hi == 0; b = min(2*b, limit) {
		ok, err := try(b)
		switch {
		case err != nil:
			return trials, 0, err
		case !ok:
			hi = b
		case b == limit:
			return trials, b, nil
		default:
			lo = b
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := try(mid)
		if err != nil {
			return trials, 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return trials, lo, nil
}

func runFit(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("fit", "sublet fit -sizes IN,HIDDEN,...,OUT [-capacity BYTES] [-occupied BYTES] [-checkpoint K] [-amp f16|bf16] [-optimizer adam|adamw|sgd|none] [-conf STRING] [-max-batch N] [-v]", stderr)
	sizes := fs.String("sizes", "", "the MLP's layer sizes: inputs, hidden widths, outputs (Linear layers with ReLU between)")
	capacity := fs.String("capacity", fmt.Sprint(sim.DefaultCapacity), "the device's total memory: bytes, or a number with KiB, MiB, GiB, TiB, KB, MB, GB or TB (the default is an H200's)")
	occupied := fs.String("occupied", "", "memory others hold from the start (the CUDA context, other processes); none by default")
	segments := fs.Int("checkpoint", 0, "checkpoint the layers in this many segments (checkpoint.Sequential); 0 is off")
	autocast := fs.String("amp", "", "mixed precision: f16 or bf16 autocast over the forward and the loss; empty is off")
	optimizer := fs.String("optimizer", "adam", "adam, adamw, sgd (with momentum) or none")
	conf := fs.String("conf", "", confUsage)
	limit := fs.Int("max-batch", 1<<30, "the largest batch to try")
	verbose := fs.Bool("v", false, "list every batch the search tried, not only the boundary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, inForce, from, err := confInForce(fs, *conf)
	if err != nil && from == "-conf" {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		fs.Usage()
		return errUsage
	}
	if err != nil {
		return err
	}
	spec, err := fitFlags(*sizes, *capacity, *occupied, *segments, *autocast, *optimizer, inForce)
	if err != nil {
		fmt.Fprintf(stderr, "fit: %v\n", err)
		fs.Usage()
		return errUsage
	}
	if *limit < 1 {
		fmt.Fprintf(stderr, "fit: -max-batch %d: want at least 1\n", *limit)
		return errUsage
	}
	fmt.Fprintf(stdout, "sublet fit: MLP %s, %s, %s on a simulated device of %s (%d bytes)", units.JoinInts(spec.sizes, "-"),
		describeTraining(spec), spec.optimizer, units.Bytes(spec.capacity), spec.capacity)
	if spec.occupied > 0 {
		fmt.Fprintf(stdout, ", %s occupied", units.Bytes(spec.occupied))
	}
	if inForce != "" {
		fmt.Fprintf(stdout, ", allocator %q (%s)", inForce, from)
	}
	fmt.Fprintf(stdout, "\neach trial: %d training steps (forward, backward, optimizer) on the device without data; an OOM row's peaks are those up to its failure\n\n", spec.steps)
	fmt.Fprintf(stdout, "%12s  %-6s %15s %15s  %s\n", "batch", "result", "peak allocated", "peak reserved", "")
	trials, best, err := spec.search(*limit)
	byBatch := map[int]trial{}
	for _, t := range trials {
		byBatch[t.batch] = t
		if !*verbose && err == nil && t.batch != max(best, 1) && t.batch != best+1 {
			continue // the search's steps: -v lists them
		}
		result, note := "fits", ""
		if !t.fits {
			result = "OOM"
			note = fmt.Sprintf("a %s segment did not fit: %s free on the device, %s cached in the allocator",
				units.Bytes(t.oom.SegmentSize), units.Bytes(t.oom.DeviceFree), units.Bytes(t.oom.Reserved-t.oom.Allocated))
		}
		fmt.Fprintf(stdout, "%12d  %-6s %15s %15s  %s\n", t.batch, result, units.Bytes(t.peakAllocated), units.Bytes(t.peakReserved), note)
	}
	if err != nil {
		return err
	}
	defer func() {
		if !*verbose && len(trials) > 2 {
			fmt.Fprintf(stdout, "(%d batch sizes tried; -v lists them)\n", len(trials))
		}
	}()
	switch {
	case best == 0:
		return fmt.Errorf("not even a batch of 1 fits in %s: the parameters and the optimizer state need more (try -checkpoint, -amp, a smaller model or a larger -capacity)", units.Bytes(spec.capacity))
	case best == *limit:
		fmt.Fprintf(stdout, "\nevery batch up to -max-batch %d fits; at %d: peak %s allocated, %s reserved\n", best, best,
			units.Bytes(byBatch[best].peakAllocated), units.Bytes(byBatch[best].peakReserved))
	default:
		fmt.Fprintf(stdout, "\nlargest batch that fits: %d (peak %s allocated, %s reserved of %s)\nat %d: %s\n", best,
			units.Bytes(byBatch[best].peakAllocated), units.Bytes(byBatch[best].peakReserved), units.Bytes(spec.capacity), best+1, byBatch[best+1].oom.Hint)
	}
	return nil
}

// fitFlags checks the flags of fit and makes its spec.
func fitFlags(sizes, capacity, occupied string, segments int, autocast, optimizer, conf string) (fitSpec, error) {
	s := fitSpec{segments: segments, optimizer: optimizer, steps: 2}
	var err error
	if s.sizes, err = units.ParseLayerSizes("-sizes", sizes); err != nil {
		return s, err
	}
	if s.capacity, err = units.ParseBytes("-capacity", capacity); err != nil {
		return s, err
	}
	if occupied != "" {
		if s.occupied, err = units.ParseBytes("-occupied", occupied); err != nil {
			return s, err
		}
		if s.occupied >= s.capacity {
			return s, fmt.Errorf("-occupied %s: want less than the capacity %s", units.Bytes(s.occupied), units.Bytes(s.capacity))
		}
	}
	if layers := 2*len(s.sizes) - 3; segments != 0 && (segments < 2 || segments > layers) {
		return s, fmt.Errorf("-checkpoint %d: want 0 (off) or 2 up to %d, the MLP's layers (its Linear and ReLU modules); 1 segment checkpoints nothing", segments, layers)
	}
	switch strings.ToLower(autocast) {
	case "":
	case "f16", "fp16", "float16":
		s.autocast = dtype.F16
	case "bf16", "bfloat16":
		s.autocast = dtype.BF16
	default:
		return s, fmt.Errorf("-amp %q: want f16, bf16 or nothing", autocast)
	}
	switch optimizer {
	case "adam", "adamw", "sgd", "none":
	default:
		return s, fmt.Errorf("-optimizer %q: want adam, adamw, sgd or none", optimizer)
	}
	if s.cfg, err = alloc.ParseConfig(conf); err != nil {
		return s, err
	}
	return s, nil
}

// describeTraining names the memory savers a spec turns on.
func describeTraining(s fitSpec) string {
	parts := []string{"F32 parameters"}
	if s.autocast != dtype.Invalid {
		parts = append(parts, fmt.Sprintf("%v autocast", s.autocast))
	}
	if s.segments > 0 {
		parts = append(parts, fmt.Sprintf("checkpointing in %d segments", s.segments))
	}
	return strings.Join(parts, ", ")
}
