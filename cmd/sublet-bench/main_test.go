package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/internal/jsonkeys"
	"github.com/subletml/sublet/tensor"
)

func runBench(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestEveryExperimentOnSim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	code, out, errs := runBench("-device", "sim", "-time", "2ms", "-json", path)
	require.Equal(t, 0, code, errs)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	bad, err := jsonkeys.Bad(data)
	require.NoError(t, err)
	assert.Empty(t, bad, "-json keys are snake_case")
	var rs []Result
	require.NoError(t, json.Unmarshal(data, &rs))
	count := map[string]int{}
	for _, r := range rs {
		count[r.Experiment]++
		assert.Equal(t, "sim", r.Device)
		assert.Positive(t, r.Value, "%+v", r)
		assert.Positive(t, r.N, "%+v", r)
		assert.Contains(t, out, r.Case)
	}
	assert.Equal(t, map[string]int{"pair": 4, "churn": 1, "emptycache": 4, "concurrent": 8}, count,
		"raw is skipped on the simulated device, whose raw cost is virtual")
	for _, r := range rs {
		if r.Experiment == "concurrent" {
			assert.True(t, strings.HasPrefix(r.Note, "errors 0"), r.Note)
		}
	}
}

func TestRawOnCPU(t *testing.T) {
	code, out, errs := runBench("-device", "cpu", "-run", "raw", "-time", "1ms")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "1GiB device Malloc+Free")
	assert.Contains(t, out, "1GiB cached Alloc+Free")
	assert.Contains(t, out, "raw/cached = ")
}

func TestBadUsage(t *testing.T) {
	code, _, errs := runBench("-run", "nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `unknown experiment "nope"`)
	code, _, _ = runBench("extra")
	assert.Equal(t, 2, code)
	code, _, errs = runBench("-device", "tpu", "-run", "pair", "-time", "1ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `unknown device "tpu"`)
}

// The training step frees everything it allocates except the model, whatever the
// EmptyCache schedule.
func TestTrainingStepFreesItsBlocks(t *testing.T) {
	d, err := sim.New(sim.Options{Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	md, err := newModel(a, trainModel)
	require.NoError(t, err)
	var requested int64
	for _, n := range md.sizes {
		requested += 3 * n
	}
	assert.Equal(t, requested, a.Stats().RequestedBytes[alloc.StatAll].Current, "parameters and two Adam moments")
	model := a.Stats().AllocatedBytes[alloc.StatAll].Current
	s := &stepper{a: a, m: trainModel, model: md}
	before := a.Stats().Allocation[alloc.StatAll].Allocated
	require.NoError(t, s.step())
	st := a.Stats()
	assert.Equal(t, int64(45), st.Allocation[alloc.StatAll].Allocated-before, "blocks a step allocates")
	assert.Equal(t, model, st.AllocatedBytes[alloc.StatAll].Current, "a step leaves only the model")
	require.NoError(t, md.free())
	require.NoError(t, drain(a))
	assert.Zero(t, d.Stats().InUse)
}

func TestBadTimeAndJSONPath(t *testing.T) {
	for _, args := range [][]string{{"-time", "0s"}, {"-time", "-1s"}, {"-compute", "-1ms"}} {
		code, _, errs := runBench(args...)
		assert.Equal(t, 2, code, args)
		assert.Contains(t, errs, "usage: sublet-bench", args)
	}
	code, out, errs := runBench("-run", "pair", "-time", "1ns", "-json", filepath.Join(t.TempDir(), "no", "such", "dir", "r.json"))
	assert.Equal(t, 1, code, "the figures were measured, but not written")
	assert.Contains(t, out, "256MiB")
	assert.Contains(t, errs, "no such file or directory")
	code, _, _ = runBench("-h")
	assert.Equal(t, 0, code)
}

func TestSizeName(t *testing.T) {
	for n, want := range map[int64]string{
		512: "512B", 1536: "1536B", 3 << 10: "3KiB", 1 << 20: "1MiB", 20 << 20: "20MiB",
		(1 << 20) + 512: "1049088B", 1 << 30: "1GiB", 3 << 29: "1536MiB",
	} {
		assert.Equal(t, want, sizeName(n), "%d", n)
	}
}

// On sim the simulated driver's time is part of a step's: emptying the cache every step
// costs each step the driver calls it causes, here 9 cuMemAlloc+cuMemFree pairs at 1 s
// against 1 s of compute, so it runs at a tenth of never's rate (the bug was a step
// timed by the host clock alone, where emptying every step looked faster). The virtual
// costs dwarf the host's time, even under the race detector.
func TestEmptyCacheCountsTheSimulatedDriver(t *testing.T) {
	pair := time.Second
	d, err := sim.New(sim.Options{Cost: &sim.CostModel{PairBase: pair, Knee: 1 << 40}})
	require.NoError(t, err)
	var out bytes.Buffer
	b := &bench{per: time.Nanosecond, compute: time.Second, out: &out}
	never, err := emptyCacheCase(b, d, 0)
	require.NoError(t, err)
	every, err := emptyCacheCase(b, d, 1)
	require.NoError(t, err)

	assert.Equal(t, int64(emptyCacheEpoch), never.steps, "one epoch measured")
	assert.Zero(t, never.driver, "no driver call after the first step")
	assert.Zero(t, never.deviceAllocs)
	assert.Equal(t, emptyCacheEpoch*b.compute, never.compute)
	// The first step measured finds the cache the warm-up step filled; each step frees
	// its 9 segments when it ends.
	assert.Equal(t, int64(9*(emptyCacheEpoch-1)), every.deviceAllocs, "9 segments each step but the first")
	assert.Equal(t, time.Duration(9*(emptyCacheEpoch-1)+9*emptyCacheEpoch)*pair/2, every.driver, "half a pair per Malloc and per Free")
	ratio := every.rate() / never.rate()
	assert.InDelta(t, 0.1, ratio, 0.005, "(1 s of compute) / (1 s + 9 s of driver calls)")
	assert.Zero(t, d.Stats().InUse)
}

func TestDefaultComputeIsTheStepsFlopsAtTheMeasuredRate(t *testing.T) {
	assert.InDelta(t, 115.85, trainModel.gflops(), 0.01, "6 × 75.4 M parameters × 256 samples")
	assert.Equal(t, 2258*time.Microsecond, defaultCompute().Truncate(time.Microsecond))
}

func TestTrainPeaksOnSimEqualThoseWithData(t *testing.T) {
	notes := map[string][]string{}
	for _, dev := range []string{"sim", "sim-backed"} {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		code, out, errs := runBench("-device", dev, "-run", "train", "-cases", "tiny-sgd,tiny-adam", "-time", "1ms", "-jsonl", path)
		require.Equal(t, 0, code, errs)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		bad, err := jsonkeys.Bad(data)
		require.NoError(t, err)
		assert.Empty(t, bad, "-jsonl keys are snake_case")
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Len(t, lines, 2, out)
		for _, line := range lines {
			var r Result
			require.NoError(t, json.Unmarshal([]byte(line), &r), line)
			assert.Equal(t, "train", r.Experiment)
			assert.GreaterOrEqual(t, r.N, int64(3))
			peaks, cpu, ok := strings.Cut(r.Note, "; cpu ")
			assert.True(t, ok && strings.Contains(cpu, " ms per step"), "the note gives the CPU time per step: %s", r.Note)
			assert.Regexp(t, `; go heap \d+ allocations \d+ B per step, \d+ GC cycles`, r.Note, "the note gives the Go heap's garbage per step")
			assert.True(t, strings.HasSuffix(r.Note, "; batch resident"), "the note says where the batch was: %s", r.Note)
			if dev == "sim-backed" { // host memory: the CPU kernels compute, and the note names their GEMM
				g, err := tensor.HostGemm()
				require.NoError(t, err)
				assert.Contains(t, r.Note, "; gemm "+g+";", r.Note)
			} else {
				assert.NotContains(t, r.Note, "gemm")
			}
			notes[r.Case] = append(notes[r.Case], peaks)
		}
	}
	for c, n := range notes {
		assert.Equal(t, n[0], n[1], "%s: the meta device allocates what a device with data does", c)
	}
	assert.Contains(t, notes["tiny-sgd"][0], "269322 parameters")

	code, _, errs := runBench("-run", "train", "-cases", "nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `unknown case "nope"`)
}

func TestTrainStepsTimesExactlyThatMany(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	code, _, errs := runBench("-device", "sim", "-run", "train", "-cases", "tiny-sgd", "-steps", "7", "-time", "1h", "-jsonl", path)
	require.Equal(t, 0, code, errs)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var r Result
	require.NoError(t, json.Unmarshal(data, &r))
	assert.Equal(t, int64(7), r.N, "-steps wins over -time")

	code, _, _ = runBench("-run", "train", "-steps", "-1")
	assert.Equal(t, 2, code)
}

// -memprofile writes the run's allocations as a profile pprof reads, with the train
// step's sites in it.
func TestMemProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.pprof")
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	code, _, errs := runBench("-device", "sim", "-run", "train", "-cases", "tiny-sgd", "-steps", "3", "-memprofile", path)
	require.Equal(t, 0, code, errs)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	found := false
	for _, s := range p.Sample {
		for _, l := range s.Location {
			for _, line := range l.Line {
				found = found || strings.HasSuffix(line.Function.Name, "tensor.Linear")
			}
		}
	}
	assert.True(t, found, "tensor.Linear's allocations are in the profile")
}

// TestTrainUploadAndProfile: -upload each-step copies the batch in every step (the
// same peaks plus the batch's own blocks), -profile writes each case's per-op table
// with the step's phases and a Perfetto trace (into a folder it makes), and a bad
// -upload is a usage error.
func TestTrainUploadAndProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "profiles")
	code, out, errs := runBench("-device", "sim-backed", "-run", "train", "-cases", "tiny-adam", "-steps", "3", "-upload", "each-step", "-profile", dir)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "; batch each-step; 0 kernels per step")
	table, err := os.ReadFile(filepath.Join(dir, "tiny-adam.txt"))
	require.NoError(t, err)
	for _, phase := range []string{"forward", "backward", "optimizer step", "MatMul", "# of Calls"} {
		assert.Contains(t, string(table), phase)
	}
	trace, err := os.ReadFile(filepath.Join(dir, "tiny-adam.json"))
	require.NoError(t, err)
	assert.True(t, json.Valid(trace))
	code, _, errs = runBench("-run", "train", "-upload", "sometimes")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `-upload "sometimes": want resident or each-step`)
}

// TestTrainGraphNeedsAGPU: -graph on a device that cannot record graphs fails the
// case, naming why; on a GPU (scripts/gpu/suite.sh's gpubench step) it times replays.
func TestTrainGraphNeedsAGPU(t *testing.T) {
	code, _, errs := runBench("-device", "sim-backed", "-run", "train", "-cases", "tiny-sgd", "-steps", "2", "-graph")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "tiny-sgd: -graph: tensor: CaptureGraph: sim cannot record graphs (CUDA devices can)")
	assert.NotContains(t, errs, "still", "the failed case left memory allocated or reserved")
}
