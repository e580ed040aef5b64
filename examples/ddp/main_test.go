package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dist"
)

// rankEnv makes a re-executed test binary run the example as a rank: the multi-process
// tests start this binary through dist.Launch, as `sublet run` would start the program.
const rankEnv = "SUBLET_DDP_EXAMPLE_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(rankEnv) != "" {
		if err := run(os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "ddp:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// small is a run of a fraction of a second: 480 training points, MLP 2-32-32-3, 32
// points per step in all, 15 steps per epoch, 8 epochs; the first bucket is small, so
// there are two and the first starts while backward runs.
var small = []string{"-samples", "600", "-epochs", "8", "-hidden", "32,32", "-first-bucket-mb", "0.001"}

// withBatch is small with the batch of each of n ranks, where rank 0 saves, and extra
// flags.
func withBatch(n int, save string, extra ...string) []string {
	return append(append(append([]string{}, small...), "-batch", strconv.Itoa(32/n), "-save", save), extra...)
}

// report is what a rank printed.
type report struct {
	checksum   string
	losses     []float64 // the epochs' losses averaged over the ranks
	accuracies []string
	text       string
}

var (
	epochLine = regexp.MustCompile(`epoch +\d+/\d+  loss [0-9.]+ \(all ranks ([0-9.]+)\)  test loss [0-9.]+  test accuracy ([0-9.]+)`)
	sumLine   = regexp.MustCompile(`parameters: fnv64 ([0-9a-f]{16}) \(the same on every rank\)`)
)

// parse reads a rank's report of a run of epochs.
func parse(t *testing.T, text string, epochs int) report {
	t.Helper()
	r := report{text: text}
	for _, m := range epochLine.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		r.losses = append(r.losses, v)
		r.accuracies = append(r.accuracies, m[2])
	}
	m := sumLine.FindStringSubmatch(text)
	require.NotNil(t, m, "no checksum in:\n%s", text)
	r.checksum = m[1]
	assert.Len(t, r.losses, epochs, text)
	assert.Contains(t, text, "after releasing everything and emptying the cache: 0 bytes allocated, 0 reserved")
	return r
}

// byRank splits launcher output into each rank's lines, without the prefix.
func byRank(out string, n int) []string {
	ranks := make([]string, n)
	for _, l := range strings.SplitAfter(out, "\n") {
		for r := range n {
			if p := fmt.Sprintf("[rank %d] ", r); strings.HasPrefix(l, p) {
				ranks[r] += strings.TrimPrefix(l, p)
			}
		}
	}
	return ranks
}

func readParams(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func TestOneProcessLearnsAndReleasesEverything(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "params")
	require.NoError(t, run(withBatch(1, path), &out), out.String())
	text := out.String()
	r := parse(t, text, 8)
	assert.Contains(t, text, "rank 0 of 1 (cpu backend on cpu)")
	assert.Contains(t, text, "bucket 0: 4.51 KiB, 4.bias 4.weight 2.bias 2.weight\nbucket 1: 384 B, 0.bias 0.weight\n")
	assert.Contains(t, text, "gradient reductions 120, buckets started while backward was still running 120")
	assert.Contains(t, text, "after training: 15012 bytes requested = parameters 5004 + buckets 5004 + sgd state 5004")
	assert.Contains(t, text, "after releasing the DataParallel wrapper: 10008 bytes requested")
	assert.Less(t, r.losses[7], r.losses[0])
	m := regexp.MustCompile(`final test accuracy ([0-9.]+)`).FindStringSubmatch(text)
	require.NotNil(t, m)
	acc, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Greater(t, acc, 0.8, "well above chance (1/3)")
	assert.Equal(t, 1251, len(readParams(t, path)), "2·32+32 + 32·32+32 + 32·3+3 parameters")
}

// Two and four processes, each on its share of every batch, end with identical
// parameters on every rank, equal within float tolerance to one process on the whole
// batch. Two epochs: 30 steps.
func TestRanksTrainAsOneProcessOnTheWholeBatch(t *testing.T) {
	const epochs = 2
	dir := t.TempDir()
	var one bytes.Buffer
	require.NoError(t, run(withBatch(1, filepath.Join(dir, "1"), "-epochs", "2"), &one), one.String())
	ref := parse(t, one.String(), epochs)
	refParams := readParams(t, filepath.Join(dir, "1"))
	for _, n := range []int{2, 4} {
		var out bytes.Buffer
		err := dist.Launch(context.Background(), dist.LaunchConfig{
			NProc: n, Program: os.Args[0], Args: withBatch(n, filepath.Join(dir, strconv.Itoa(n)), "-epochs", "2"),
			Env: append(os.Environ(), rankEnv+"=1"), Stdout: &out, Stderr: &out, Prefix: true})
		require.NoError(t, err, out.String())
		ranks := byRank(out.String(), n)
		first := parse(t, ranks[0], epochs)
		for r, text := range ranks {
			got := parse(t, text, epochs)
			assert.Contains(t, text, fmt.Sprintf("rank %d of %d (cpu backend on cpu)", r, n))
			assert.Equal(t, first.checksum, got.checksum, "%d ranks: rank %d's parameters differ from rank 0's", n, r)
			assert.Equal(t, ref.accuracies, got.accuracies, "%d ranks: test accuracy per epoch", n)
			assert.InDeltaSlice(t, ref.losses, got.losses, 2e-4, "%d ranks: the epochs' losses", n)
		}
		assert.InDeltaSlice(t, refParams, readParams(t, filepath.Join(dir, strconv.Itoa(n))), 1e-5, "%d ranks against one process (measured: 6e-7 at most)", n)
	}
}

func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-hidden", "8,x"}, `-hidden "8,x": want positive integers`},
		{[]string{"-batch", "0"}, "need -samples ≥ 10"},
		{[]string{"-bucket-mb", "0"}, "-bucket-mb and -first-bucket-mb > 0"},
		{[]string{"-optimizer", "lbfgs"}, `-optimizer "lbfgs": want sgd or adam`},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-device", "nope"}, `nope`},
	} {
		err := run(c.args, &bytes.Buffer{})
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.want)
	}
}
