package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// mlpRun is one rank's training run in the data-parallel tests: an MLP 4-16-16-3 with
// SGD on a seeded data set of 96 samples.
type mlpRun struct {
	batch      int // per rank
	epochs     int
	accumulate int // micro-batches per optimizer step: all but the last under NoSync
	seed       uint64
	// first and rest are the bucket caps (0: the defaults).
	first, rest int64
	sizes       []int
}

const mlpSamples = 96

// mlpData is the data set: features from a normal distribution, labels from a fixed
// linear rule.
func mlpData(seed uint64) ([]float32, []int64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, mlpSamples*4)
	y := make([]int64, mlpSamples)
	for i := range y {
		best := math.Inf(-1)
		for c := range 3 {
			v := 0.0
			for j := range 4 {
				if c == 0 {
					x[4*i+j] = float32(rng.NormFloat64())
				}
				v += float64(x[4*i+j]) * float64((c+1)*(j+2)%5-2)
			}
			if v > best {
				best, y[i] = v, int64(c)
			}
		}
	}
	return x, y
}

// mlpResult is what a run ends with.
type mlpResult struct {
	params [][]float32
	stats  DataParallelStats
	losses []float64
}

// train runs r on dev for rank rank of b's group (b nil: one process, no
// DataParallel). It checks the allocator's bytes at the named moments and that dev is
// empty at the end; it returns errors instead of failing, so that it runs on any
// goroutine.
func (r mlpRun) train(dev device.Device, a *alloc.Allocator, b Backend) (res mlpResult, err error) {
	rank, world := 0, 1
	if b != nil {
		rank, world = b.Group().Rank(), b.Group().WorldSize()
	}
	sizes := r.sizes
	if sizes == nil {
		sizes = []int{4, 16, 16, 3}
	}
	// each rank draws other initial values: only the broadcast makes them agree
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(r.seed + uint64(rank))}, nn.MLPConfig{Sizes: sizes})
	defer model.Release()
	requested := func() int64 { return a.Stats().RequestedBytes[alloc.StatAll].Current }
	paramBytes := nn.ParameterBytes(model)
	var dp *DataParallel
	if b != nil {
		if dp, err = NewDataParallel(model, b, DataParallelConfig{FirstBucketBytes: r.first, BucketBytes: r.rest}); err != nil {
			return res, err
		}
		defer dp.Release()
		res.stats = dp.Stats()
		if got := requested(); got != 2*paramBytes || res.stats.BucketBytes != paramBytes {
			return res, fmt.Errorf("after NewDataParallel the allocator holds %d bytes, not parameters %d + buckets %d", got, paramBytes, res.stats.BucketBytes)
		}
	}
	// SGD, not Adam: Adam's step hardly depends on the gradients' scale, so it would not
	// see gradients summed instead of averaged
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.2, Momentum: 0.9})
	if err != nil {
		return res, err
	}
	defer opt.Release()
	forward := model.Forward
	if dp != nil {
		forward = dp.Forward
	}
	x, y := mlpData(r.seed)
	sampler, err := NewSampler(mlpSamples, rank, world, SamplerConfig{Shuffle: true, Seed: r.seed})
	if err != nil {
		return res, err
	}
	for epoch := range r.epochs {
		idx := sampler.Indices(epoch)
		for start := 0; start+r.batch*r.accumulate <= len(idx); start += r.batch * r.accumulate {
			loss := 0.0
			for m := range r.accumulate {
				micro := func() {
					s := tensor.NewScope()
					defer s.Close()
					xb, yb := make([]float32, 0, 4*r.batch), make([]int64, 0, r.batch)
					for _, i := range idx[start+m*r.batch : start+(m+1)*r.batch] {
						xb, yb = append(xb, x[4*i:4*i+4]...), append(yb, y[i])
					}
					l := nn.CrossEntropyLoss{}.Loss(forward(tensor.FromSlice(s, dev, dtype.F32, xb, r.batch, 4)), tensor.FromSlice(s, dev, dtype.I64, yb))
					l.Backward()
					loss += l.Item()
				}
				if err := tensor.Try(func() {
					if dp != nil && m < r.accumulate-1 {
						dp.NoSync(micro)
					} else {
						micro()
					}
				}); err != nil {
					return res, err
				}
			}
			res.losses = append(res.losses, loss)
			opt.Step()
			opt.ZeroGrad(true)
			want := paramBytes + opt.StateBytes()
			if dp != nil {
				want += dp.Stats().BucketBytes
			}
			if got := requested(); got != want {
				return res, fmt.Errorf("after a step the allocator holds %d bytes, not parameters + buckets + optimizer state = %d", got, want)
			}
		}
	}
	for _, p := range nn.Parameters(model) {
		res.params = append(res.params, tensor.ToSlice[float32](p))
	}
	if dp != nil {
		res.stats = dp.Stats()
		dp.Release()
		if got, want := requested(), paramBytes+opt.StateBytes(); got != want {
			return res, fmt.Errorf("after Release the allocator holds %d bytes, not parameters + optimizer state = %d: the buckets were not released", got, want)
		}
	}
	return res, nil
}

// trainRanks runs r on n in-process ranks (goroutines, each with its own cpu device)
// and returns their results; every device ends empty.
func trainRanks(t *testing.T, n int, r mlpRun) []mlpResult {
	t.Helper()
	groups := initGroups(t, n, 10*time.Second)
	devs := make([]device.Device, n)
	allocs := make([]*alloc.Allocator, n)
	for i := range devs {
		devs[i] = tensortest.CPU(t)
		allocs[i] = tensortest.Allocator(t, devs[i])
	}
	res := make([]mlpResult, n)
	for rank, err := range parallel(n, func(rank int) error {
		var err error
		res[rank], err = r.train(devs[rank], allocs[rank], NewCPU(groups[rank]))
		return err
	}) {
		require.NoError(t, err, "rank %d", rank)
	}
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
	return res
}

// reference is r's single-process run on the whole batch (world × r.batch), without
// DataParallel.
func reference(t *testing.T, world int, r mlpRun) mlpResult {
	t.Helper()
	dev := tensortest.CPU(t)
	r.batch *= world
	res, err := r.train(dev, tensortest.Allocator(t, dev), nil)
	require.NoError(t, err)
	tensortest.RequireEmpty(t, dev)
	return res
}

// requireSameTraining asserts that every rank ended with the same bits, and within
// float tolerance of the single-process reference.
func requireSameTraining(t *testing.T, ranks []mlpResult, ref mlpResult) {
	t.Helper()
	for r := 1; r < len(ranks); r++ {
		for i := range ranks[0].params {
			require.Equal(t, bits(ranks[0].params[i]), bits(ranks[r].params[i]), "parameter %d: rank %d differs from rank 0", i, r)
		}
	}
	require.Len(t, ranks[0].params, len(ref.params))
	for i, p := range ref.params {
		require.InDeltaSlice(t, p, ranks[0].params[i], 2e-5, "parameter %d against one process on the whole batch", i)
	}
	require.NotEmpty(t, ref.losses, "the run took steps")
}

func TestDataParallelEqualsOneProcessOnTheWholeBatch(t *testing.T) {
	for _, n := range []int{2, 4} {
		r := mlpRun{batch: 4, epochs: 2, accumulate: 1, seed: 11, first: 256, rest: 1024}
		ranks := trainRanks(t, n, r)
		requireSameTraining(t, ranks, reference(t, n, r))
		st := ranks[0].stats
		steps := 2 * mlpSamples / (4 * n)
		// 4-16-16-3 in reverse: 4.bias 12 B, 4.weight 192 B, 2.bias 64 B (268 ≥ 256:
		// closed), 2.weight 1024 B (≥ 1024: closed), 0.bias 64 B and 0.weight 256 B
		require.Len(t, st.Buckets, 3)
		assert.Equal(t, []string{"4.bias", "4.weight", "2.bias"}, st.Buckets[0].Params)
		assert.Equal(t, []string{"2.weight"}, st.Buckets[1].Params)
		assert.Equal(t, []string{"0.bias", "0.weight"}, st.Buckets[2].Params)
		assert.Equal(t, []int64{268, 1024, 320}, []int64{st.Buckets[0].Bytes, st.Buckets[1].Bytes, st.Buckets[2].Bytes})
		assert.Equal(t, steps, st.Reductions, "one reduction per step")
		assert.Equal(t, 2*steps, st.Overlapped, "every bucket but the last started while backward was still running")
	}
}

func TestDataParallelNoSyncAccumulates(t *testing.T) {
	r := mlpRun{batch: 3, epochs: 1, accumulate: 2, seed: 5}
	ranks := trainRanks(t, 2, r)
	requireSameTraining(t, ranks, reference(t, 2, r))
	st := ranks[0].stats
	assert.Len(t, st.Buckets, 1, "the defaults: every parameter in the 1 MiB first bucket")
	assert.Equal(t, mlpSamples/(2*3*2), st.Reductions, "one reduction per optimizer step, none in NoSync")
}

// halfUsed is a module whose second layer takes no part in the loss.
type halfUsed struct{ used, unused *nn.Linear }

func (m *halfUsed) Forward(x *tensor.Tensor) *tensor.Tensor { return m.used.Forward(x) }
func (m *halfUsed) SetTraining(bool)                        {}
func (m *halfUsed) Release()                                { m.used.Release(); m.unused.Release() }
func (m *halfUsed) NamedParameters() []nn.Parameter {
	var out []nn.Parameter
	for i, l := range []*nn.Linear{m.used, m.unused} {
		for _, p := range l.NamedParameters() {
			out = append(out, nn.Parameter{Name: fmt.Sprintf("%d.%s", i, p.Name), Tensor: p.Tensor})
		}
	}
	return out
}

// step runs one forward and backward of m (through dp) on a batch of ones.
func step(dev device.Device, dp *DataParallel, in int) error {
	return tensor.Try(func() {
		s := tensor.NewScope()
		defer s.Close()
		dp.Forward(s.Ones(dev, dtype.F32, 2, in)).Sum().Backward()
	})
}

func TestDataParallelNamesParametersThatGotNoGradient(t *testing.T) {
	groups := initGroups(t, 2, 10*time.Second)
	devs := []device.Device{tensortest.CPU(t), tensortest.CPU(t)}
	for r, err := range parallel(2, func(r int) error {
		init := nn.Init{Device: devs[r], Gen: tensor.NewGenerator(1)}
		m := &halfUsed{nn.NewLinear(init, 3, 2, true), nn.NewLinear(init, 3, 2, true)}
		defer m.Release()
		dp, err := NewDataParallel(m, NewCPU(groups[r]), DataParallelConfig{})
		if err != nil {
			return err
		}
		defer dp.Release()
		if err := step(devs[r], dp, 3); err != nil {
			return err
		}
		err = step(devs[r], dp, 3)
		if !assert.ErrorIs(t, err, ErrUnfinished) {
			return fmt.Errorf("the second step: %v", err)
		}
		assert.Contains(t, err.Error(), "the previous backward produced no gradient for 1.weight, 1.bias, so no gradient was averaged")
		return nil
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
}

// requireRefused wraps the model build makes on each of two ranks and asserts that
// NewDataParallel fails on both with ErrMismatch, naming rank 1 and saying want; every
// device ends empty.
func requireRefused(t *testing.T, build func(r int, dev device.Device) nn.Module, want string) {
	t.Helper()
	groups := initGroups(t, 2, 10*time.Second)
	devs := []device.Device{tensortest.CPU(t), tensortest.CPU(t)}
	errs := parallel(2, func(r int) error {
		m := build(r, devs[r])
		defer m.Release()
		_, err := NewDataParallel(m, NewCPU(groups[r]), DataParallelConfig{})
		return err
	})
	for r, err := range errs {
		e := requireDistError(t, err, r, 1, ErrMismatch)
		assert.Contains(t, e.Error(), want)
	}
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
}

func TestDataParallelRefusesDifferentModels(t *testing.T) {
	requireRefused(t, func(r int, dev device.Device) nn.Module {
		return nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{4, 16 / (r + 1), 3}})
	}, "parameter 0 is 0.weight float32[8 4] on rank 1 and 0.weight float32[16 4] on rank 0: every rank must build the same model")
}

// faultRun builds a DataParallel MLP on every rank of a group of n with timeout, runs
// one good step everywhere, then f on each rank.
func faultRun(t *testing.T, n int, timeout time.Duration, f func(r int, g *Group, dev device.Device, dp *DataParallel) error) {
	t.Helper()
	groups := initGroups(t, n, timeout)
	devs := make([]device.Device, n)
	for r := range devs {
		devs[r] = tensortest.CPU(t)
	}
	for r, err := range parallel(n, func(r int) error {
		m := nn.NewMLP(nn.Init{Device: devs[r], Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{3, 8, 2}})
		defer m.Release()
		dp, err := NewDataParallel(m, NewCPU(groups[r]), DataParallelConfig{FirstBucketBytes: 64, BucketBytes: 64})
		if err != nil {
			return err
		}
		defer dp.Release()
		if err := step(devs[r], dp, 3); err != nil {
			return err
		}
		return f(r, groups[r], devs[r], dp)
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
}

func TestDataParallelBackwardFailsWhenARankAborts(t *testing.T) {
	faultRun(t, 3, 10*time.Second, func(r int, g *Group, dev device.Device, dp *DataParallel) error {
		if r == 1 {
			g.Abort("rank 1 gives up")
			return nil
		}
		err := step(dev, dp, 3)
		if !assert.ErrorIs(t, err, ErrAborted, "rank %d", r) || !assert.ErrorIs(t, err, tensor.ErrGrad) {
			return fmt.Errorf("rank %d: %v", r, err)
		}
		assert.Contains(t, err.Error(), "rank 1 reports: aborted: rank 1 gives up")
		err2 := step(dev, dp, 3)
		assert.ErrorIs(t, err2, ErrAborted, "later steps fail at Forward with the same error")
		assert.Contains(t, err2.Error(), "DataParallel.Forward")
		return nil
	})
}

func TestDataParallelBackwardTimesOutOnAHungRank(t *testing.T) {
	faultRun(t, 2, 300*time.Millisecond, func(r int, g *Group, dev device.Device, dp *DataParallel) error {
		if r == 1 {
			return nil // hangs: never takes another step (its group stays open until the test ends)
		}
		err := step(dev, dp, 3)
		if !assert.ErrorIs(t, err, ErrTimeout) {
			return err
		}
		assert.Contains(t, err.Error(), "rank 1 did not take part within 300ms")
		return nil
	})
}

func TestDataParallelConfigAndRelease(t *testing.T) {
	g, err := Init(Config{WorldSize: 1})
	require.NoError(t, err)
	defer g.Close()
	dev := tensortest.CPU(t)
	m := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{3, 8, 2}})
	defer m.Release()
	_, err = NewDataParallel(m, NewCPU(g), DataParallelConfig{BucketBytes: -1})
	assert.ErrorIs(t, err, ErrConfig)
	dp, err := NewDataParallel(m, NewCPU(g), DataParallelConfig{})
	require.NoError(t, err)
	assert.Equal(t, m, dp.Module())
	tensortest.RequireLive(t, dev, "parameters and one bucket", append(tensortest.Sizes(nn.Parameters(m)...), nn.ParameterBytes(m))...)
	require.NoError(t, step(dev, dp, 3))
	dp.Release()
	dp.Release()
	err = step(dev, dp, 3)
	assert.ErrorIs(t, err, ErrClosed)
	assert.Contains(t, err.Error(), "used after Release")
	for _, p := range nn.Parameters(m) {
		p.ZeroGrad(true)
	}
	tensortest.RequireLive(t, dev, "parameters only", tensortest.Sizes(nn.Parameters(m)...)...)
}

// frozenMLP is an MLP 3-8-2 drawn from seed whose first layer does not require grad
// (a frozen layer, as when fine-tuning): layer is the one frozen.
func frozenMLP(dev device.Device, seed uint64, layer string) nn.Module {
	m := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(seed)}, nn.MLPConfig{Sizes: []int{3, 8, 2}})
	for _, p := range m.NamedParameters() {
		if strings.HasPrefix(p.Name, layer+".") {
			p.Tensor.SetRequiresGrad(false)
		}
	}
	return m
}

// PyTorch's DDP broadcasts every parameter from rank 0, those that do not require grad
// too (_sync_module_states): a frozen layer drawn differently on each rank must end
// up as rank 0's everywhere, or the replicas compute different functions.
func TestDataParallelBroadcastsFrozenParameters(t *testing.T) {
	groups := initGroups(t, 2, 10*time.Second)
	devs := []device.Device{tensortest.CPU(t), tensortest.CPU(t)}
	got := make([][][]float32, 2)
	for r, err := range parallel(2, func(r int) error {
		m := frozenMLP(devs[r], uint64(1+r), "0")
		defer m.Release()
		dp, err := NewDataParallel(m, NewCPU(groups[r]), DataParallelConfig{})
		if err != nil {
			return err
		}
		defer dp.Release()
		assert.Equal(t, []string{"2.bias", "2.weight"}, dp.Stats().Buckets[0].Params, "rank %d: only what requires grad is bucketed", r)
		if err := step(devs[r], dp, 3); err != nil {
			return err
		}
		for _, p := range nn.Parameters(m) {
			got[r] = append(got[r], tensortest.Values(p))
		}
		return nil
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	require.Len(t, got[0], 4)
	for i := range got[0] {
		assert.Equal(t, bits(got[0][i]), bits(got[1][i]), "parameter %d: rank 1 differs from rank 0", i)
	}
	for _, d := range devs {
		tensortest.RequireEmpty(t, d)
	}
}

// Ranks that freeze different parameters would put different gradients in the same
// bucket slots: NewDataParallel refuses it as a mismatch.
func TestDataParallelRefusesRanksThatFreezeDifferently(t *testing.T) {
	requireRefused(t, func(r int, dev device.Device) nn.Module { return frozenMLP(dev, 1, []string{"0", "2"}[r]) },
		"parameter 0 is 0.weight float32[8 3] on rank 1 and 0.weight float32[8 3] (frozen) on rank 0: every rank must build the same model")
}
