package data_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/data"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/tensor"
)

// squares is a data set of ten samples: features (i, i²), label i%2.
type squares struct{}

func (squares) Len() int      { return 10 }
func (squares) Features() int { return 2 }
func (squares) Sample(i int, x []float32) (int64, error) {
	x[0], x[1] = float32(i), float32(i*i)
	return int64(i % 2), nil
}

// An epoch of shuffled batches of four, prefetched on the loader's goroutine. Each
// batch's tensors belong to the caller: bound into the step's scope, and released
// with the batch.
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	a, _ := alloc.For(dev)
	ld, _ := data.NewLoader(squares{}, data.Shuffle{N: 10, Batch: 4, Seed: 1}, data.Config{Device: dev, Prefetch: 2})
	it := ld.Epoch(0)
	defer it.Close()
	for {
		b, err := it.Next()
		if err != nil || b == nil {
			fmt.Println("end of epoch, error:", err)
			break
		}
		s := tensor.NewScope()
		x, y := s.Bind(b.X), s.Bind(b.Y)
		sum := x.Sum(0) // the step's work
		fmt.Println("samples", b.Index, "x", x.Shape(), "labels", tensor.ToSlice[int64](y), "column sums", tensor.ToSlice[float32](sum))
		s.Close()
		b.Release()
	}
	it.Close()
	fmt.Println("left on the device:", a.Stats().RequestedBytes[alloc.StatAll].Current)
	// Output:
	// samples [6 3 1 9] x [4 2] labels [0 1 1 1] column sums [19 127]
	// samples [7 4 8 2] x [4 2] labels [1 0 0 0] column sums [21 133]
	// samples [0 5] x [2 2] labels [0 1] column sums [5 25]
	// end of epoch, error: <nil>
	// left on the device: 0
}
