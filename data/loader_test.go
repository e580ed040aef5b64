package data

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// counting is a dataset whose sample i has the features i·f, i·f+1, … and the label
// i mod 7; sample failAt (when ≥ 0) fails.
type counting struct {
	n, f   int
	failAt int
}

func (d counting) Len() int      { return d.n }
func (d counting) Features() int { return d.f }
func (d counting) Sample(i int, x []float32) (int64, error) {
	if i == d.failAt {
		return 0, fmt.Errorf("sample %d is corrupt", i)
	}
	for j := range x {
		x[j] = float32(i*d.f + j)
	}
	return int64(i % 7), nil
}

// pinnedSim is a simulated GPU with data that offers pinned memory: its "asynchronous"
// copies are the sim's own (they take effect at once), which is enough to run the
// loader's asynchronous path.
type pinnedSim struct {
	*sim.Device
	mu   sync.Mutex
	host map[*byte]int // guarded by mu: live HostAlloc buffers
}

var _ device.PinnedHost = (*pinnedSim)(nil)

func newPinnedSim(t *testing.T) *pinnedSim {
	return &pinnedSim{Device: tensortest.Sim(t, 0, true), host: map[*byte]int{}}
}

func (d *pinnedSim) HostAlloc(size int64) ([]byte, error) {
	b := make([]byte, size)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.host[&b[0]] = len(b)
	return b, nil
}

func (d *pinnedSim) HostFree(b []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.host[&b[0]]; !ok || n != len(b) {
		return errors.New("pinnedSim: HostFree of memory not from HostAlloc")
	}
	delete(d.host, &b[0])
	return nil
}

func (d *pinnedSim) CopyToDeviceAsync(dst device.Ptr, src []byte, s device.Stream) error {
	return d.CopyToDevice(dst, src, s)
}

func (d *pinnedSim) CopyToHostAsync(dst []byte, src device.Ptr, s device.Stream) error {
	return d.CopyToHost(dst, src, s)
}

func newPinned(t *testing.T, dev device.Device) *pinned.Allocator {
	a, err := pinned.NewConfig(dev, alloc.PinnedConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

// drain reads a whole epoch, checking each batch's values against the dataset, and
// returns the samples in the order they came.
func drain(t *testing.T, it *Iter, ds counting) []int {
	t.Helper()
	var got []int
	for {
		b, err := it.Next()
		require.NoError(t, err)
		if b == nil {
			break
		}
		n := len(b.Index)
		require.Equal(t, []int{n, ds.f}, b.X.Shape())
		require.Equal(t, dtype.I64, b.Y.DType())
		xs, ys := tensor.ToSlice[float32](b.X), tensor.ToSlice[int64](b.Y)
		for r, i := range b.Index {
			want := make([]float32, ds.f)
			label, _ := ds.Sample(i, want)
			require.Equal(t, want, xs[r*ds.f:(r+1)*ds.f], "row %d is sample %d", r, i)
			require.Equal(t, label, ys[r])
		}
		got = append(got, b.Index...)
		b.Release()
	}
	require.NoError(t, it.Close())
	return got
}

func TestEverySampleOnceInOrder(t *testing.T) {
	ds := counting{n: 50, f: 3, failAt: -1}
	s := Shuffle{N: ds.n, Batch: 8, Seed: 2}
	want := flatten(batchesOf(t, s, 1))
	for _, dev := range []device.Device{tensortest.CPU(t), tensortest.Sim(t, 0, true), newPinnedSim(t)} {
		for _, pin := range []bool{false, true} {
			for _, prefetch := range []int{0, 1, 3} {
				name := fmt.Sprintf("%s pinned=%v prefetch=%d", dev.Name(), pin, prefetch)
				c := Config{Device: dev, Prefetch: prefetch}
				if pin {
					c.Pinned = newPinned(t, dev)
				}
				ld, err := NewLoader(ds, s, c)
				require.NoError(t, err)
				_, isPinnedSim := dev.(*pinnedSim)
				assert.Equal(t, pin && isPinnedSim, ld.Async(), name)
				it := ld.Epoch(1)
				assert.Equal(t, want, drain(t, it, ds), name)
				st := it.Stats()
				assert.Equal(t, 7, st.Batches, name)
				assert.Equal(t, ds.n, st.Samples, name)
				assert.Equal(t, int64(ds.n*(8+3*4)), st.HostBytes, name)
				if pin {
					assert.Zero(t, st.Slices, "%s: the batches are views of pinned buffers", name)
				} else {
					assert.Equal(t, 2*7, st.Slices, "%s: a new slice of labels and one of features per batch", name)
				}
				tensortest.RequireEmpty(t, dev)
				if pin {
					ps := c.Pinned.Stats()
					assert.Zero(t, ps.ActiveRequests.Current, name)
					// 6 batches of 8 (448 bytes → 512) and one of 2 (112 → 128).
					assert.LessOrEqual(t, ps.NumHostAlloc, int64(prefetch+3), "%s: buffers are reused", name)
				}
			}
		}
	}
}

// Without prefetch, or with the sync copies, one buffer at a time is in use: the first
// batches' buffer serves all of them, the smaller last batch gets one of its own.
func TestPinnedBuffersAreReused(t *testing.T) {
	ds := counting{n: 50, f: 3, failAt: -1}
	dev := tensortest.CPU(t)
	host := newPinned(t, dev)
	ld, err := NewLoader(ds, Sequential{N: ds.n, Batch: 8}, Config{Device: dev, Pinned: host})
	require.NoError(t, err)
	drain(t, ld.Epoch(0), ds)
	assert.Equal(t, int64(2), host.Stats().NumHostAlloc)
	drain(t, ld.Epoch(1), ds)
	assert.Equal(t, int64(2), host.Stats().NumHostAlloc, "the second epoch reuses them")
	assert.False(t, host.Pinned(), "cpu memory is pageable")
	tensortest.RequireEmpty(t, dev)
}

func TestCloseReleasesWhatWasNotReceived(t *testing.T) {
	ds := counting{n: 40, f: 256, failAt: -1}
	for _, dev := range []device.Device{tensortest.CPU(t), newPinnedSim(t)} {
		ld, err := NewLoader(ds, Sequential{N: ds.n, Batch: 4}, Config{Device: dev, Prefetch: 3, Pinned: newPinned(t, dev)})
		require.NoError(t, err)
		it := ld.Epoch(0)
		b, err := it.Next()
		require.NoError(t, err)
		require.NoError(t, it.Close())
		tensortest.RequireLive(t, dev, "after Close, the batch received", tensortest.Sizes(b.X, b.Y)...)
		_, err = it.Next()
		assert.ErrorIs(t, err, errClosed)
		require.NoError(t, it.Close(), "closing again does nothing")
		b.Release()
		tensortest.RequireEmpty(t, dev)
	}
}

func TestAnErrorEndsTheEpoch(t *testing.T) {
	ds := counting{n: 30, f: 2, failAt: 13}
	for _, prefetch := range []int{0, 2} {
		dev := tensortest.CPU(t)
		host := newPinned(t, dev)
		ld, err := NewLoader(ds, Sequential{N: ds.n, Batch: 5}, Config{Device: dev, Prefetch: prefetch, Pinned: host})
		require.NoError(t, err)
		it := ld.Epoch(0)
		for range 2 {
			b, err := it.Next()
			require.NoError(t, err)
			b.Release()
		}
		_, err = it.Next()
		require.ErrorContains(t, err, "data: sample 13: sample 13 is corrupt")
		_, again := it.Next()
		assert.Equal(t, err, again, "every later Next returns it")
		require.NoError(t, it.Close())
		tensortest.RequireEmpty(t, dev)
		assert.Zero(t, host.Stats().ActiveRequests.Current, "the failed batch's buffer went back")
	}
}

func TestOutOfDeviceMemoryEndsTheEpoch(t *testing.T) {
	dev := tensortest.Sim(t, 4<<20, true)
	ds := counting{n: 8, f: 1 << 20, failAt: -1} // a sample is 4 MiB: a batch of 2 cannot fit
	ld, err := NewLoader(ds, Sequential{N: ds.n, Batch: 2}, Config{Device: dev, Prefetch: 1})
	require.NoError(t, err)
	it := ld.Epoch(0)
	_, err = it.Next()
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	assert.ErrorContains(t, err, "data: moving a batch of 2 samples to sim")
	require.NoError(t, it.Close())
	tensortest.RequireEmpty(t, dev)
}

// The consumer trains while the loader's goroutine makes the next batches: the race
// detector watches the hand-over.
func TestConsumerComputesWhileTheLoaderPrefetches(t *testing.T) {
	ds := counting{n: 64, f: 16, failAt: -1}
	for _, dev := range []device.Device{tensortest.CPU(t), newPinnedSim(t)} {
		ld, err := NewLoader(ds, Shuffle{N: ds.n, Batch: 4, Seed: 1}, Config{Device: dev, Prefetch: 2, Pinned: newPinned(t, dev)})
		require.NoError(t, err)
		w := tensor.NewScope().Zeros(dev, dtype.F32, 16, 4)
		it := ld.Epoch(0)
		for {
			b, err := it.Next()
			require.NoError(t, err)
			if b == nil {
				break
			}
			s := tensor.NewScope()
			s.Bind(b.X).MatMul(s.Bind(w)).Sum().Item()
			s.Close()
			b.Release()
		}
		require.NoError(t, it.Close())
		w.Scope().Close()
		tensortest.RequireEmpty(t, dev)
	}
}

func TestBadSettings(t *testing.T) {
	dev := tensortest.CPU(t)
	ds := counting{n: 4, f: 1, failAt: -1}
	s := Sequential{N: 4, Batch: 2}
	for _, c := range []struct {
		ds   Dataset
		s    Sampler
		c    Config
		want string
	}{
		{nil, s, Config{Device: dev}, "need a dataset"},
		{ds, nil, Config{Device: dev}, "need a dataset"},
		{ds, s, Config{}, "Config.Device"},
		{counting{n: 4}, s, Config{Device: dev}, "0 features per sample"},
		{ds, s, Config{Device: dev, Prefetch: -1}, "Prefetch -1"},
		{ds, s, Config{Device: dev, Pinned: newPinned(t, tensortest.Meta(t))}, "the pinned allocator serves sim, the batches go to cpu"},
	} {
		_, err := NewLoader(c.ds, c.s, c.c)
		assert.ErrorContains(t, err, c.want)
	}
	ld, err := NewLoader(ds, Sequential{N: 4}, Config{Device: dev})
	require.NoError(t, err)
	it := ld.Epoch(3)
	_, err = it.Next()
	assert.ErrorContains(t, err, "data: epoch 3: data.Sequential: 4 samples in batches of 0")
	require.NoError(t, it.Close())
}

// fixed is a sampler of given batches.
type fixed [][]int

func (f fixed) Batches(int) ([][]int, error) { return f, nil }

// A sampler that lists a sample the dataset does not have (a Sequential or Shuffle with
// a larger N, Buckets with another dataset's Lengths), or an empty batch, fails the
// epoch with an error naming it before the dataset is asked: the first Next returns it.
func TestASamplersBadBatchEndsTheEpoch(t *testing.T) {
	ds := counting{n: 10, f: 2, failAt: -1}
	for _, c := range []struct {
		s    Sampler
		want string
	}{
		{Sequential{N: 12, Batch: 4}, "data: epoch 0: batch 2 lists sample 10, but the dataset has 10 samples (samples 0 to 9): check the sampler's N or Lengths"},
		{fixed{{0, 1}, {3, -1}}, "data: epoch 0: batch 1 lists sample -1, but the dataset has 10 samples"},
		{fixed{{0, 1}, {}}, "data: epoch 0: batch 1 is empty: a sampler's batch lists at least one sample"},
	} {
		for _, prefetch := range []int{0, 2} {
			dev := tensortest.CPU(t)
			host := newPinned(t, dev)
			ld, err := NewLoader(ds, c.s, Config{Device: dev, Prefetch: prefetch, Pinned: host})
			require.NoError(t, err)
			it := ld.Epoch(0)
			b, err := it.Next()
			assert.Nil(t, b)
			assert.ErrorContains(t, err, c.want)
			require.NoError(t, it.Close())
			tensortest.RequireEmpty(t, dev)
			assert.Zero(t, host.Stats().ActiveRequests.Current)
		}
	}
}
