package checkpoint_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor/tensortest"
)

// BenchmarkCheckpointOverhead times a forward and backward of 16 × Linear(512, 512),
// batch 512, on cpu, plain (nn.Sequential) and through Sequential with k segments
// (k = 4 ≈ √16). Each iteration runs one plain step and one checkpointed step, in
// alternating order, so that load from other processes falls on both alike; the
// metrics are the mean time of each and the overhead, checkpointed over plain minus
// one. A Linear costs one GEMM forward and two backward; the recompute of a
// checkpointed segment of s layers costs s−1 GEMMs (early stop aborts the last
// Linear before it computes), so k = 4 adds 9 GEMMs to 48: 18.75 %, k = 2 adds 7
// (14.6 %), k = 8 adds 7 (14.6 %), plus the bias adds and the bookkeeping.
//
//	go test ./checkpoint -run '^$' -bench CheckpointOverhead -benchtime 20x
func BenchmarkCheckpointOverhead(b *testing.B) {
	const n, width, batch = 16, 512, 512
	dev := tensortest.CPU(b)
	m := linears(dev, n, width, 1)
	defer m.Release()
	step := func(k int) time.Duration {
		start := time.Now()
		s := newScope(1)
		forward(m, checkpoint.Config{}, k, input(s, dev, batch, width)).Sum().Backward()
		s.Close()
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
		return time.Since(start)
	}
	for _, k := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			var plain, ckpt time.Duration
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					plain += step(0)
					ckpt += step(k)
				} else {
					ckpt += step(k)
					plain += step(0)
				}
			}
			iters := float64(b.N)
			b.ReportMetric(plain.Seconds()*1e3/iters, "plain-ms")
			b.ReportMetric(ckpt.Seconds()*1e3/iters, "ckpt-ms")
			b.ReportMetric(100*(float64(ckpt)/float64(plain)-1), "overhead-%")
		})
	}
}
