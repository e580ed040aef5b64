package cpu

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkGemmMicro times the fastest micro-kernel alone on one packed panel of A and
// one of B, called again and again (the ceiling the driver can reach on one core):
// kc 64 keeps both panels in L1, the kernel's own kc is what the driver runs. store is
// the kernel that sets C (the first kc slice of a product with beta 0).
func BenchmarkGemmMicro(b *testing.B) {
	g := bestGemmKernel()
	for _, kc := range []int{64, 128, g.kc} {
		for _, store := range []bool{false, true} {
			micro, name := g.micro, "add"
			if store {
				micro, name = g.store, "store"
			}
			b.Run(fmt.Sprintf("%s/%s/kc=%d", g.name, name, kc), func(b *testing.B) {
				a, bp, c := make([]float32, kc*g.mr), make([]float32, kc*g.nr), make([]float32, g.mr*g.nr)
				for i := range a {
					a[i] = float32(i%7) / 8
				}
				for i := range bp {
					bp[i] = float32(i%5) / 8
				}
				for b.Loop() {
					micro(kc, &a[0], &bp[0], &c[0], g.nr, 1)
				}
				b.ReportMetric(2*float64(g.mr*g.nr*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemmPack times the packing of a 1024×1024 float32 operand the way the
// driver packs it at one worker: kc slices of mr-row panels of A (row-major: a
// transpose; stored transposed: row copies) and of nr-column panels of B (row-major:
// row copies; stored transposed: a transpose). It reports GB/s of the operand.
func BenchmarkGemmPack(b *testing.B) {
	g := bestGemmKernel()
	const n = 1024
	src := make([]float32, n*n)
	for i := range src {
		src[i] = float32(i % 11)
	}
	dst := make([]float32, g.kc*(n+g.nr))
	for _, c := range []struct {
		name     string
		a, trans bool
	}{{"A", true, false}, {"At", true, true}, {"B", false, false}, {"Bt", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			var v matView
			if c.a {
				v, _ = sgemmViews(c.trans, false, src, n, src, n)
			} else {
				_, v = sgemmViews(false, c.trans, src, n, src, n)
			}
			w := g.nr
			if c.a {
				w = g.mr
			}
			for b.Loop() {
				for pc := 0; pc < n; pc += g.kc {
					kc := min(g.kc, n-pc)
					for x := 0; x < n; x += w {
						if c.a {
							g.packA(dst[x*kc:], v, pc, kc, x, min(w, n-x))
						} else {
							g.packB(dst[x*kc:], v, pc, kc, x, min(w, n-x))
						}
					}
				}
			}
			b.ReportMetric(4*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkGemmTiles times the micro-kernel as the driver runs it on one core: mc rows
// of packed A against a 1024-wide block of packed B at the kernel's kc, panel of B
// after panel, into a C 1024 floats wide (rows a power-of-two stride apart), against
// BenchmarkGemmMicro's ceiling.
func BenchmarkGemmTiles(b *testing.B) {
	g := bestGemmKernel()
	const n = 1024
	mp, np := g.mc/g.mr, n/g.nr
	ap, bp, c := make([]float32, mp*g.mr*g.kc), make([]float32, np*g.nr*g.kc), make([]float32, mp*g.mr*n)
	for i := range ap {
		ap[i] = float32(i%7) / 8
	}
	for i := range bp {
		bp[i] = float32(i%5) / 8
	}
	for b.Loop() {
		g.tiles(g.kc, ap, mp, mp*g.mr, bp, 0, np, n, c, 0, n, 1, false)
	}
	b.ReportMetric(2*float64(mp*g.mr*n*g.kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGemmCores runs BenchmarkGemmMicro's kernel (its own kc, both panels in L1)
// and BenchmarkGemmTiles' blocks (A in L2) on every P at once, each goroutine on its own
// operands: the per-core rate with every core running AVX-512 (-test.cpu 16 on the
// 16-core host) against one core's, which tells a clock that drops with the cores in
// use from a product's packing and waiting. It reports GFLOP/s a core and in all.
func BenchmarkGemmCores(b *testing.B) {
	g := bestGemmKernel()
	const n = 1024
	mp, np := g.mc/g.mr, n/g.nr
	for _, c := range []struct {
		name       string
		mPanels    int
		nPanels    int
		flopsPerOp int
	}{{"micro", 1, 1, 2 * g.mr * g.nr * g.kc}, {"tiles", mp, np, 2 * mp * g.mr * n * g.kc}} {
		b.Run(c.name, func(b *testing.B) {
			var goroutines atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				goroutines.Add(1)
				ap, bp := make([]float32, c.mPanels*g.mr*g.kc), make([]float32, c.nPanels*g.nr*g.kc)
				cm := make([]float32, c.mPanels*g.mr*c.nPanels*g.nr)
				for i := range ap {
					ap[i] = float32(i%7) / 8
				}
				for i := range bp {
					bp[i] = float32(i%5) / 8
				}
				for pb.Next() {
					g.tiles(g.kc, ap, c.mPanels, c.mPanels*g.mr, bp, 0, c.nPanels, c.nPanels*g.nr, cm, 0, c.nPanels*g.nr, 1, false)
				}
			})
			all := float64(c.flopsPerOp) * float64(b.N) / b.Elapsed().Seconds() / 1e9
			b.ReportMetric(all, "GFLOP/s")
			b.ReportMetric(all/float64(goroutines.Load()), "GFLOP/s/core")
		})
	}
}
