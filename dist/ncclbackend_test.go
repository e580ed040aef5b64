package dist

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/dist/nccl"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestNewBackendPicksByDevice(t *testing.T) {
	g, err := Init(Config{WorldSize: 1})
	require.NoError(t, err)
	defer g.Close()
	b, err := NewBackend(g, tensortest.CPU(t))
	require.NoError(t, err)
	assert.Equal(t, "cpu", b.Name())
	assert.Equal(t, g, b.Group())
	_, err = NewNCCL(g, tensortest.CPU(t))
	requireDistError(t, err, 0, -1, ErrUnsupported)
	assert.Contains(t, err.Error(), "NCCL needs a CUDA GPU, not cpu")
}

// ncclGPU opens GPU ordinal, or skips where NCCL or the GPU is missing.
func ncclGPU(t *testing.T, ordinal int) *cuda.Device {
	t.Helper()
	if _, err := nccl.Version(); err != nil {
		t.Skip(err)
	}
	if n, err := cuda.Count(); err != nil || n <= ordinal {
		t.Skipf("no GPU %d (%d GPUs, %v)", ordinal, n, err)
	}
	d, err := cuda.Open(ordinal)
	require.NoError(t, err)
	t.Cleanup(func() {
		// What the tensors' kernels and the caching allocator keep goes back first.
		require.NoError(t, tensor.ReleaseBackend(d))
		a, err := alloc.For(d)
		require.NoError(t, err)
		require.NoError(t, a.EmptyCache())
		assert.Equal(t, cuda.Usage{}, d.Usage(), "nothing left on %s", d.Name())
		require.NoError(t, d.Close())
	})
	return d
}

// skipWithoutKernels skips the test when err says the GPU has no tensor kernels yet.
func skipWithoutKernels(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, tensor.ErrNoKernels) {
		t.Skip("tensor ops do not run on CUDA yet:", err)
	}
	require.NoError(t, err)
}

// World size 1 through real NCCL, on tensors of the GPU.
func TestNCCLBackendWorldOfOne(t *testing.T) {
	dev := ncclGPU(t, 0)
	g, err := Init(Config{WorldSize: 1})
	require.NoError(t, err)
	defer g.Close()
	b, err := NewNCCL(g, dev)
	require.NoError(t, err)
	s := tensor.NewScope()
	var x, all *tensor.Tensor
	skipWithoutKernels(t, tensor.Try(func() {
		x = tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, 3})
		all = s.Zeros(dev, dtype.F32, 3)
	}))
	require.NoError(t, wait(b.AllReduce(x, Avg)))
	require.NoError(t, wait(b.Broadcast(x, 0)))
	b.GroupStart()
	w, err := b.AllGather(all, x)
	require.NoError(t, err)
	assert.ErrorIs(t, w.Wait(), ErrConfig, "inside the group")
	require.NoError(t, b.GroupEnd())
	require.NoError(t, w.Wait())
	var got []float32
	skipWithoutKernels(t, tensor.Try(func() { got = tensor.ToSlice[float32](all.To(tensortest.CPU(t))) }))
	assert.Equal(t, []float32{1, 2, 3}, got)
	_, err = b.AllReduce(x.Unsqueeze(0).Expand(2, 3), Sum)
	assert.ErrorIs(t, err, ErrUnsupported, "not contiguous")
	s.Close()
	require.NoError(t, b.Close())
	_, err = b.AllReduce(x, Sum)
	assert.Error(t, err)
}

// skipStatus is the exit status of a helper that cannot run here (no tensor kernels on
// CUDA yet): the test that started it skips.
const skipStatus = 77

func init() {
	// nccl-train: one rank of a DataParallel MLP on cuda:LOCAL_RANK through NCCL; it
	// prints the bits of its averaged gradients.
	helpers["nccl-train"] = func() int {
		err := ncclTrainRank()
		switch {
		case errors.Is(err, tensor.ErrNoKernels):
			fmt.Fprintln(os.Stderr, err)
			return skipStatus
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
}

func ncclTrainRank() error {
	g, err := InitFromEnv()
	if err != nil {
		return err
	}
	defer g.Close()
	dev, err := cuda.Open(g.LocalRank())
	if err != nil {
		return err
	}
	host, err := named.Open("cpu")
	if err != nil {
		return err
	}
	b, err := NewNCCL(g, dev)
	if err != nil {
		return err
	}
	defer b.Close()
	var dpErr error
	err = tensor.Try(func() {
		m := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(uint64(g.Rank()))}, nn.MLPConfig{Sizes: []int{4, 8, 2}})
		defer m.Release()
		dp, err := NewDataParallel(m, b, DataParallelConfig{FirstBucketBytes: 64, BucketBytes: 64})
		if err != nil {
			dpErr = err
			return
		}
		defer dp.Release()
		s := tensor.NewScope()
		defer s.Close()
		dp.Forward(s.Full(dev, dtype.F32, float64(g.Rank()+1), 3, 4)).Sum().Backward()
		for _, p := range m.NamedParameters() {
			fmt.Printf("%s %x\n", p.Name, bits(tensor.ToSlice[float32](p.Tensor.Grad().To(host))))
		}
	})
	return errors.Join(err, dpErr)
}

// Two processes on two GPUs: DataParallel through NCCL gives both ranks the same
// averaged gradients.
func TestNCCLDataParallelOnTwoGPUs(t *testing.T) {
	ncclGPU(t, 1)
	c := helperLaunch(2, "nccl-train")
	c.Timeout = time.Minute
	var out, errs bytes.Buffer
	c.Stdout, c.Stderr = &out, &errs
	err := Launch(t.Context(), c)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == skipStatus {
		t.Skip(errs.String())
	}
	require.NoError(t, err, errs.String())
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		rank, rest, _ := strings.Cut(l, " ")
		lines[rank] = append(lines[rank], rest)
	}
	require.Len(t, lines["[rank 0]"], 4)
	assert.Equal(t, lines["[rank 0]"], lines["[rank 1]"], "the same averaged gradients, bit for bit")
}
