package dist

import (
	"fmt"
	"testing"
	"time"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// BenchmarkCPUAllReduce times the CPU backend's all-reduce (avg) of float32 tensors of
// several sizes among 2 and 4 in-process ranks over the loopback: what a
// DataParallel bucket of that size costs per step on the CPU path.
func BenchmarkCPUAllReduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{1 << 10, 1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", n, size), func(b *testing.B) {
				groups := initGroups(b, n, time.Minute)
				devs := make([]device.Device, n)
				xs := make([]*tensor.Tensor, n)
				s := tensor.NewScope()
				defer s.Close()
				for r := range n {
					devs[r] = tensortest.CPU(b)
					xs[r] = s.Ones(devs[r], dtype.F32, size/4)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				errs := parallel(n, func(r int) error {
					c := NewCPU(groups[r])
					for range b.N {
						if err := wait(c.AllReduce(xs[r], Avg)); err != nil {
							return err
						}
					}
					return nil
				})
				b.StopTimer()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
