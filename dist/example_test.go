package dist_test

import (
	"fmt"
	"net"
	"sync"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dist"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Three ranks join a group and sum a tensor across it. A training job gets its ranks
// from `sublet run` (or torchrun) and reads the rest with dist.ConfigFromEnv; here the
// three run as goroutines of one process, over TCP on the loopback.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // a free port for rank 0
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dev, _ := cpu.New(cpu.Options{})

	const world = 3
	results := make([][]float32, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := dist.Init(dist.Config{Rank: rank, WorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer g.Close()
			b := dist.NewCPU(g)
			defer b.Close()
			s := tensor.NewScope()
			defer s.Close()
			t := tensor.FromSlice(s, dev, dtype.F32, []float32{float32(rank), 10 * float32(rank)})
			w, err := b.AllReduce(t, dist.Sum)
			if err == nil {
				err = w.Wait()
			}
			if err != nil {
				fmt.Println(err)
				return
			}
			results[rank] = tensor.ToSlice[float32](t)
		}()
	}
	wg.Wait()
	for rank, r := range results {
		fmt.Println("rank", rank, "has", r)
	}
	// Output:
	// rank 0 has [3 30]
	// rank 1 has [3 30]
	// rank 2 has [3 30]
}
