package replay

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// h200Total is what an H200 reports as total memory (cudaMemGetInfo).
const h200Total = 150109880320

func TestEveryKindIsDeterministicValidAndSmall(t *testing.T) {
	require.NotEmpty(t, Kinds())
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			assert.NotEmpty(t, Describe(kind))
			a, err := Generate(kind, 7)
			require.NoError(t, err)
			b, err := Generate(kind, 7)
			require.NoError(t, err)
			require.Equal(t, a, b, "same seed, same trace")
			c, err := Generate(kind, 8)
			require.NoError(t, err)
			assert.NotEqual(t, a, c, "another seed, another trace")
			require.NoError(t, Validate(a))
			assert.LessOrEqual(t, len(a), 20000, "traces stay small enough to commit and replay in CI")
			s := Summarize(a)
			assert.Equal(t, s.Allocs, s.Frees, "every trace frees what it allocates")
		})
	}
}

func TestGenerateUnknownKind(t *testing.T) {
	_, err := Generate("nope", 1)
	require.ErrorContains(t, err, `unknown trace kind "nope" (known: train, seqlen`)
	assert.Empty(t, Describe("nope"))
}

// The kinds exist to drive particular allocator paths; these are the properties that
// make them do so.
func TestKindsHaveTheirShape(t *testing.T) {
	gen := func(kind string) ([]Event, Summary) {
		ev, err := Generate(kind, 1)
		require.NoError(t, err)
		return ev, Summarize(ev)
	}
	_, s := gen("small_churn")
	assert.LessOrEqual(t, s.MaxSize, mib, "small_churn stays in the small pool")
	assert.Less(t, s.MinSize, int64(512), "small_churn has requests below the 512 B minimum")

	ev, s := gen("over_capacity")
	assert.Greater(t, s.PeakLive, int64(h200Total), "over_capacity asks for more than an H200 has")
	assert.GreaterOrEqual(t, s.MinSize, gib)
	assert.LessOrEqual(t, s.MaxSize, 4*gib)
	assert.Less(t, len(ev), 1000, "few, large allocations")

	_, s = gen("oom_fraction")
	assert.Greater(t, s.PeakLive, OOMBudget, "oom_fraction exceeds its budget")
	assert.Greater(t, s.EmptyCaches, 0)

	ev, s = gen("blog")
	assert.Greater(t, s.EmptyCaches, 0)
	var first []Event
	for _, e := range ev[:32] {
		if e.Op == OpAlloc {
			first = append(first, e)
		}
	}
	require.GreaterOrEqual(t, len(first), 12)
	for i, e := range first[:12] {
		want := 16 * mib
		if i >= 8 {
			want = 32 * mib
		}
		assert.Equal(t, want, e.Size, "the blog's 8x16 MiB then 4x32 MiB opens the trace")
	}

	_, s = gen("oversize")
	assert.Greater(t, s.MaxSize, 400*mib)
	assert.LessOrEqual(t, s.PeakLive, 3*gib)

	_, s = gen("roundup")
	assert.Greater(t, s.MaxSize, gib)

	_, s = gen("empty_cache")
	assert.Greater(t, s.EmptyCaches, 10)
}

func TestCommittedTracesRegenerateIdentically(t *testing.T) {
	const matrix = "../../testdata/traces/matrix.json"
	m, err := LoadMatrix(matrix)
	require.NoError(t, err)
	for _, tr := range m.Traces {
		t.Run(tr.Name, func(t *testing.T) {
			f, err := os.Open(TracePath(matrix, tr.Name))
			require.NoError(t, err)
			defer f.Close()
			zr, err := gzip.NewReader(f)
			require.NoError(t, err)
			committed, err := io.ReadAll(zr)
			require.NoError(t, err)

			events, err := Generate(tr.Kind, tr.Seed)
			require.NoError(t, err)
			var fresh bytes.Buffer
			require.NoError(t, Write(&fresh, events))
			require.True(t, bytes.Equal(committed, fresh.Bytes()),
				"%s differs from Generate(%q, %d): regenerate with go run ./cmd/sublet trace gen -matrix %s, then rerun the oracle for it",
				TracePath(matrix, tr.Name), tr.Kind, tr.Seed, matrix)
		})
	}
}

func TestRNGHelpersStayInRange(t *testing.T) {
	r := newRNG(3)
	for range 10000 {
		v := r.between(-5, 5)
		require.True(t, v >= -5 && v <= 5, v)
		s := r.logSize(mib, 1536*mib)
		require.True(t, s >= mib && s < 1536*mib, s)
		s = r.logSize(1, 2)
		require.Equal(t, int64(1), s)
	}
	xs := []int{1, 2, 3, 4, 5}
	shuffle(r, xs)
	assert.ElementsMatch(t, []int{1, 2, 3, 4, 5}, xs)
	// SplitMix64's published first output for seed 0.
	assert.Equal(t, uint64(0xe220a8397b1dcdaf), newRNG(0).uint64())
}

func TestSummarize(t *testing.T) {
	s := Summarize([]Event{
		{Op: OpAlloc, ID: 1, Size: 100},
		{Op: OpAlloc, ID: 2, Size: 50},
		{Op: OpFree, ID: 1},
		{Op: OpEmptyCache},
		{Op: OpAlloc, ID: 1, Size: 120},
		{Op: OpFree, ID: 1},
		{Op: OpFree, ID: 2},
	})
	assert.Equal(t, Summary{Events: 7, Allocs: 3, Frees: 3, EmptyCaches: 1, PeakLive: 170, PeakLiveEvent: 4,
		MinSize: 50, MaxSize: 120, TotalAllocated: 270}, s)
}
