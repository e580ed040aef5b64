package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// readResults reads the JSON lines sublet-bench -jsonl wrote to path.
func readResults(t *testing.T, path string) []Result {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var rs []Result
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r Result
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		rs = append(rs, r)
	}
	return rs
}

// requireEmpty asserts that dev's allocator holds nothing, allocated or cached.
func requireEmpty(t *testing.T, dev device.Device) {
	a, err := alloc.For(dev)
	require.NoError(t, err)
	st := a.Stats()
	assert.Zero(t, st.AllocatedBytes[alloc.StatAll].Current, "allocated")
	assert.Zero(t, st.ReservedBytes[alloc.StatAll].Current, "reserved")
}

func TestOps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	code, out, errs := runBench("-device", "cpu", "-run", "ops", "-opsize", "65536", "-time", "1ms", "-jsonl", path)
	require.Equal(t, 0, code, errs)
	units := map[string]string{}
	for _, r := range readResults(t, path) {
		assert.Equal(t, "ops", r.Experiment)
		assert.Greater(t, r.Value, 0.0, r.Case)
		assert.GreaterOrEqual(t, r.N, int64(3), "at least 3 runs after the warm-up: %s", r.Case)
		assert.Contains(t, r.Note, "gemm builtin")
		assert.NotContains(t, r.Note, "repetitions", "on host memory a run is one op")
		units[r.Case] = r.Unit
	}
	assert.Equal(t, "GFLOP/s", units["matmul-tn-1024"])
	assert.Equal(t, "GB/s", units["sum-cols-64M"])
	assert.Equal(t, "µs/op", units["add-1k"])
	assert.Len(t, units, 13, out)
	cpu, err := named.Open("cpu")
	require.NoError(t, err)
	requireEmpty(t, cpu)

	code, _, _ = runBench("-run", "ops", "-opsize", "1000")
	assert.Equal(t, 2, code, "-opsize must be a multiple of 65536")
}

// TestOpsPicked: -ops times only the cases it names, in its order; a name the device
// has no case for fails the run, naming the cases there are, and leaves nothing
// allocated.
func TestOpsPicked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	code, _, errs := runBench("-device", "cpu", "-run", "ops", "-opsize", "65536", "-time", "1ms", "-ops", "add-1k,matmul-nt-1024", "-jsonl", path)
	require.Equal(t, 0, code, errs)
	var names []string
	for _, r := range readResults(t, path) {
		names = append(names, r.Case)
	}
	assert.Equal(t, []string{"add-1k", "matmul-nt-1024"}, names)

	code, _, errs = runBench("-device", "cpu", "-run", "ops", "-opsize", "65536", "-time", "1ms", "-ops", "add-1k,matmul-xx-1024")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "-ops: no case matmul-xx-1024 on this device (cases: matmul-nn-1024,")
	cpu, err := named.Open("cpu")
	require.NoError(t, err)
	requireEmpty(t, cpu)
}

// TestOpsOnADeviceWithoutData: on sim (a device whose memory the host does not address,
// as a GPU's) ops runs the GPU cases, timed in repetitions closed by a synchronisation,
// and leaves the allocator empty.
func TestOpsOnADeviceWithoutData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.jsonl")
	sim, err := named.Open("sim")
	require.NoError(t, err)
	a, err := alloc.For(sim)
	require.NoError(t, err)
	a.ResetPeakStats()
	code, out, errs := runBench("-device", "sim", "-run", "ops", "-opsize", "65536", "-time", "1ms", "-jsonl", path)
	require.Equal(t, 0, code, errs)
	rs := readResults(t, path)
	var names []string
	for _, r := range rs {
		names = append(names, r.Case)
		assert.Equal(t, "sim", r.Device)
		assert.Greater(t, r.Value, 0.0, r.Case)
		assert.GreaterOrEqual(t, r.N, int64(3), r.Case)
		assert.Contains(t, r.Note, "repetitions and a synchronisation", r.Case)
		assert.Contains(t, r.Note, "no data, no kernels: the host's cost", r.Case)
	}
	_, inputs := buildCases(t, "sim", gpuOpCases, 1<<16)
	assert.Equal(t, gpuCaseNames(t), names, out)
	assert.Contains(t, names, "sum-cols-bf16-64M")
	assert.Contains(t, names, "cast-f32-f16-64M")
	assert.Contains(t, names, "matmul-tn-f16-4096")
	requireEmpty(t, sim)
	// Each repetition's results are released before the next: at most the inputs and
	// one op's outputs and temporaries (the largest, an F32 tensor of 65536 elements:
	// 256 KiB) are live at once.
	peak := a.Stats().AllocatedBytes[alloc.StatAll].Peak
	assert.Greater(t, peak, inputs)
	assert.LessOrEqual(t, peak, inputs+4<<18, "peak allocated %d, inputs %d", peak, inputs)
}

// gpuCaseNames lists gpuOpCases' names, built on sim at a small size.
func gpuCaseNames(t *testing.T) []string {
	var names []string
	cases, _ := buildCases(t, "sim", gpuOpCases, 1<<16)
	for _, c := range cases {
		names = append(names, c.name)
	}
	return names
}

// buildCases sets up the cases of build on the named device with big elements and
// returns them with the bytes their inputs take; it closes the inputs and checks that
// nothing is left allocated.
func buildCases(t *testing.T, devName string, build func(*tensor.Scope, device.Device, int) []opCase, big int) ([]opCase, int64) {
	dev, err := named.Open(devName)
	require.NoError(t, err)
	a, err := alloc.For(dev)
	require.NoError(t, err)
	before := a.Stats().AllocatedBytes[alloc.StatAll].Current
	data := tensor.NewScope(tensor.NoGrad(), tensor.WithGenerator(tensor.NewGenerator(1)))
	cases, err := tensor.TryValue(func() []opCase { return build(data, dev, big) })
	inputs := a.Stats().AllocatedBytes[alloc.StatAll].Current - before
	data.Close()
	require.NoError(t, err)
	require.NoError(t, drain(a))
	return cases, inputs
}

// TestGPUOpCasesComputeOnCPU runs every GPU case once with data, on the CPU kernels:
// each op takes its inputs in F32, F16 and BF16 (the GPU itself is scripts/gpu's).
func TestGPUOpCasesComputeOnCPU(t *testing.T) {
	dev, err := named.Open("cpu")
	require.NoError(t, err)
	var out bytes.Buffer
	b := &bench{per: time.Millisecond, opSize: 1 << 16, out: &out}
	require.NoError(t, timeOps(b, dev, gpuOpCases))
	assert.Len(t, b.results, len(gpuCaseNames(t)), out.String())
	for _, r := range b.results {
		assert.Greater(t, r.Value, 0.0, r.Case)
	}
	a, err := alloc.For(dev)
	require.NoError(t, err)
	require.NoError(t, drain(a))
}

// TestOpsCasesMatchTorchOps compares both case lists with torch_ops.py's (--list needs
// python3, not PyTorch): the same names in the same order, units and work.
func TestOpsCasesMatchTorchOps(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	for _, l := range []struct {
		device string
		build  func(*tensor.Scope, device.Device, int) []opCase
	}{{"cpu", opCases}, {"cuda", gpuOpCases}} {
		cmd := exec.Command(py, "../../scripts/bench/torch_ops.py", "--list", "--device", l.device)
		text, err := cmd.Output()
		require.NoError(t, err, "%s", text)
		var listed []struct {
			Case, Unit string
			Work       float64
		}
		for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
			var c struct {
				Case, Unit string
				Work       float64
			}
			require.NoError(t, json.Unmarshal([]byte(line), &c), line)
			listed = append(listed, c)
		}
		// At torch_ops.py's size (on sim, which only accounts the memory).
		cases, _ := buildCases(t, "sim", l.build, 1<<26)
		require.Len(t, listed, len(cases), l.device)
		for i, c := range cases {
			assert.Equal(t, c.name, listed[i].Case, l.device)
			assert.Equal(t, c.unit, listed[i].Unit, c.name)
			assert.InEpsilon(t, c.work, listed[i].Work, 1e-12, c.name)
		}
	}
}

// TestOpsTable joins two small result files with ops_table.py.
func TestOpsTable(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	write := func(name string, rs ...Result) string {
		path := filepath.Join(dir, name)
		require.NoError(t, writeResultLines(path, rs))
		return path
	}
	s := write("sublet.jsonl",
		Result{Case: "copy-f32-64M", Unit: "GB/s", Value: 2000},
		Result{Case: "sum-f16-64M", Unit: "GB/s", Value: 1500},
		Result{Case: "add-1k", Unit: "µs/op", Value: 4})
	p := write("torch.jsonl",
		Result{Case: "copy-f32-64M", Unit: "GB/s", Value: 2500},
		Result{Case: "sum-f16-64M", Unit: "GB/s", Value: 2000},
		Result{Case: "add-1k", Unit: "µs/op", Value: 8},
		Result{Case: "matmul-nn-f16-4096", Unit: "GFLOP/s", Value: 700000})
	out, err := exec.Command(py, "../../scripts/bench/ops_table.py", "--peak", "3000", s, p).CombinedOutput()
	require.NoError(t, err, "%s", out)
	table := string(out)
	assert.Contains(t, table, "Copy reference: 2500 GB/s (PyTorch, copy-f32-64M)")
	assert.Contains(t, table, "Card's peak: 3000 GB/s (given with --peak)")
	assert.Contains(t, table, "| copy-f32-64M | GB/s | 2000 | 2500 | 0.80x | 80% | 100% | 67% | 83% |")
	assert.Contains(t, table, "| sum-f16-64M | GB/s | 1500 | 2000 | 0.75x | 60% | 80% | 50% | 67% |")
	assert.Contains(t, table, "| add-1k | µs/op | 4 | 8 | 2.00x |", "µs/op: PyTorch / sublet")
	assert.Contains(t, table, "| matmul-nn-f16-4096 | GFLOP/s | — | 7e+05 |  |", "a case one side did not run")
}

// TestAFailedOpCaseLeavesTheOthers: a case whose op fails is reported as an error and
// left out; the cases after it run, on host memory and on a device, and nothing stays
// allocated.
func TestAFailedOpCaseLeavesTheOthers(t *testing.T) {
	for _, name := range []string{"cpu", "sim"} {
		dev, err := named.Open(name)
		require.NoError(t, err)
		build := func(data *tensor.Scope, dev device.Device, big int) []opCase {
			x := data.Randn(dev, dtype.F32, big)
			ok := func(name string) opCase {
				return opCase{name: name, unit: "GB/s", work: 1, run: func(s *tensor.Scope) { s.Bind(x).Relu() }}
			}
			bad := opCase{name: "bad", unit: "GB/s", work: 1, run: func(s *tensor.Scope) { s.Bind(x).Reshape(3, -1) }}
			return []opCase{ok("first"), bad, ok("last")}
		}
		var out bytes.Buffer
		b := &bench{per: time.Millisecond, opSize: 1 << 16, out: &out}
		err = timeOps(b, dev, build)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "bad: tensor: Reshape", name)
		var cases []string
		for _, r := range b.results {
			cases = append(cases, r.Case)
		}
		assert.Equal(t, []string{"first", "last"}, cases, name)
		a, err := alloc.For(dev)
		require.NoError(t, err)
		require.NoError(t, drain(a), name)
	}
}
