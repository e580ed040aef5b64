package dense_test

import (
	"fmt"

	gt "gorgonia.org/tensor"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/dense"
)

// Move data between gorgonia.org/tensor's Dense and sublet: From copies a Dense onto a
// device (a tensor of its scope), To copies a tensor back to a new Dense.
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	s := tensor.NewScope()
	defer s.Close()

	d := gt.New(gt.WithShape(2, 2), gt.WithBacking([]float32{1, 2, 3, 4}))
	t := dense.From(s, dev, d)
	fmt.Println(t.Shape(), t.DType())

	back := dense.To(t.MatMul(t).Cast(dtype.F16)) // F16 comes back as Float32 values
	fmt.Println(back.Shape(), back.Dtype(), back.Data())
	// Output:
	// [2 2] float32
	// (2, 2) float32 [7 10 15 22]
}
