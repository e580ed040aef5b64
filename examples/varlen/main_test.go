package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/data"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/tensor/tensortest"
)

// small is an epoch of 16 batches of 64 sequences on the meta device, a fraction of a
// second. fragmenting is 64 batches of 32 at a quarter of the width, on a device of
// 60 MiB, where the failed steps' cached layout matters.
var (
	small       = []string{"-sequences", "1024"}
	fragmenting = []string{"-dim", "64", "-hidden", "256", "-batch", "32"}
)

func parse(t *testing.T, args ...string) config {
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	return c
}

// paddedTokens counts the tokens of s's batches padded to their longest.
func paddedTokens(t *testing.T, corp corpus, s data.Sampler) int64 {
	batches, err := s.Batches(0)
	require.NoError(t, err)
	var n int64
	for _, b := range batches {
		_, _, length := corp.padded(b)
		n += int64(len(b) * length)
	}
	return n
}

func TestBucketsPadLess(t *testing.T) {
	c := parse(t, small...)
	dev, a, hasData, err := demo.Open("sim")
	require.NoError(t, err)
	corp := newCorpus(c.seed, c.sequences, c.maxLen, c.vocab, c.classes)
	random := data.Shuffle{N: c.sequences, Batch: c.batch, Seed: c.seed}
	buckets := data.Buckets{Lengths: corp.lengths, Batch: c.batch, Seed: c.seed}
	var rs []orderResult
	for _, s := range []data.Sampler{random, buckets} {
		var r orderResult
		require.NoError(t, demo.Try(dev, func() error { r, err = trainOrder(c, dev, a, corp, s, hasData); return err }))
		rs = append(rs, r)
		tensortest.RequireEmpty(t, dev)
	}
	var real int64
	for _, l := range corp.lengths {
		real += int64(l)
	}
	for i, s := range []data.Sampler{random, buckets} {
		assert.Equal(t, real, rs[i].real)
		assert.Equal(t, paddedTokens(t, corp, s), rs[i].padded)
		assert.Positive(t, rs[i].driver, "the simulated driver charged the segments")
	}
	assert.Less(t, rs[1].padded-real, (rs[0].padded-real)/4, "buckets pad less than a quarter as much")
	assert.Equal(t, rs[0].peakAllocated, rs[1].peakAllocated, "both orders meet the longest batch")
	// To the byte: the longest batch's step peaks at 645.74 MiB in both orders; random
	// order, whose every batch is padded to some long sequence, reserves 1372 MiB at its
	// peak and asks the device 13 times, buckets 724 MiB and 10 times.
	assert.Equal(t, int64(677109248), rs[0].peakAllocated)
	assert.Equal(t, [2]int64{1372 << 20, 724 << 20}, [2]int64{rs[0].peakReserved, rs[1].peakReserved})
	assert.Equal(t, [2]int64{13, 10}, [2]int64{rs[0].deviceAllocs, rs[1].deviceAllocs})
}

// recovered holds recoverAll's results by arguments: tests share them (each epoch
// under four policies costs a second under the race detector).
var recovered = map[string]struct {
	b    budget
	outs []outcome
}{}

// recoverAll runs the epoch of part 2 under every policy, once per arguments.
func recoverAll(t *testing.T, args ...string) (budget, []outcome) {
	key := strings.Join(args, " ")
	if r, ok := recovered[key]; ok {
		return r.b, r.outs
	}
	c := parse(t, args...)
	corp := newCorpus(c.seed, c.sequences, c.maxLen, c.vocab, c.classes)
	b, err := newBudget(c, corp)
	require.NoError(t, err)
	require.Greater(t, b.needFull, b.capacity)
	require.Less(t, b.needHalf, b.capacity)
	// The capacity is halfway between the two needs, in whole 2 MiB.
	assert.Equal(t, (b.needHalf+(b.needFull-b.needHalf)/2)/(2<<20)*(2<<20), b.capacity)
	var outs []outcome
	for p := range numPolicies {
		o, err := recoverEpoch(c, corp, b, p)
		require.NoError(t, err, policyNames[p])
		assert.Equal(t, c.sequences, o.samples, "%s trains every sequence", policyNames[p])
		assert.Equal(t, c.sequences/c.batch, o.batches)
		assert.LessOrEqual(t, o.peakReserved, b.capacity)
		assert.GreaterOrEqual(t, o.retries, int64(o.ooms), "every out-of-memory error came after the allocator's own retry")
		outs = append(outs, o)
	}
	recovered[key] = struct {
		b    budget
		outs []outcome
	}{b, outs}
	return b, outs
}

func TestARetryNeverTrainsABatchTooBig(t *testing.T) {
	for i, args := range [][]string{small, fragmenting} {
		b, outs := recoverAll(t, args...)
		// The needs, measured on the meta device, and the OOM errors of each policy: a
		// retry adds its own; expandable segments have fewer at the default sizes, more
		// on the 60 MiB device.
		assert.Equal(t, [][2]int64{{677109248, 341171712}, {84902400, 42811904}}[i], [2]int64{b.needFull, b.needHalf}, "%v", args)
		var ooms []int
		for _, o := range outs {
			ooms = append(ooms, o.ooms)
		}
		assert.Equal(t, [][]int{{3, 6, 3, 1}, {4, 8, 6, 7}}[i], ooms, "%v: halve at once, retry, EmptyCache then retry, expandable", args)
		for _, o := range outs {
			big, _ := o.split(b.capacity)
			require.NotEmpty(t, big, "%v %s: a batch too big for the device", args, policyNames[o.policy])
			for _, f := range big {
				assert.Greater(t, f.retriesAfter, f.retriesBefore, "the allocator released its cache and retried before failing")
				assert.Equal(t, f.retried, f.retryErr != nil, "a retry of a batch too big fails")
				assert.Positive(t, f.pieces, "and halving trains it")
			}
		}
		seeds := outs[emptyThenRetry]
		for _, f := range seeds.failures {
			assert.Less(t, f.reservedAfterEmpty, f.reservedAfterFail, "EmptyCache releases what the failed step cached")
		}
	}
}

// On the 60 MiB device two batches that fit fail for fragmentation: retried as they
// are, the cached layout fails them again; after EmptyCache they train.
func TestEmptyCacheRescuesFragmentedBatches(t *testing.T) {
	b, outs := recoverAll(t, fragmenting...)
	_, plain := outs[retrySame].split(b.capacity)
	_, seeds := outs[emptyThenRetry].split(b.capacity)
	require.Len(t, plain, 2)
	require.Len(t, seeds, 2)
	assert.Zero(t, countRetried(plain))
	assert.Equal(t, 2, countRetried(seeds))
	assert.Greater(t, outs[emptyThenRetry].deviceFrees, outs[retrySame].deviceFrees, "EmptyCache costs device frees")
}

func TestRunPrintsBothParts(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(small, &out))
	for _, want := range []string{
		"1024 sequences of 8 to 1024 tokens",
		"part 1: one epoch in each order", "random order", "buckets, shuffled", "peak reserved",
		"part 2: one epoch in random order on a simulated GPU of",
		"the first failure: tensor: ", "alloc: out of memory on sim",
		"out of memory after the allocator released its cache and retried (num_alloc_retries",
		"again: out of memory again, trained in 2 pieces",
		"halve at once, expandable segments",
		"retries trained 0 of",
		"Every policy trained all 1024 sequences",
	} {
		assert.Contains(t, out.String(), want)
	}
}

func TestOnTheCPUItComputesTheLosses(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-device", "cpu", "-sequences", "256", "-max-len", "64", "-dim", "8", "-hidden", "16", "-batch", "16"}, &out))
	assert.Contains(t, out.String(), "mean loss")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-batch", "1"}, {"-max-len", "7"}, {"-classes", "1"}, {"-vocab", "1"}, {"-lr", "0"}, {"-capacity", "-1"}, {"extra"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
