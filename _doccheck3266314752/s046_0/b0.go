package p

import (
	dtype "github.com/subletml/sublet/dtype"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line tensor/doc.go:9
s := tensor.NewScope()                                         // owns what is made in it
defer s.Close()                                                // releases it all
x := tensor.FromSlice(s, dev, dtype.F32, xs, rows, cols)       // values in
y := x.MatMul(w).Relu().Sum()                                  // ops panic with *Error on misuse
y.Backward()                                                   // gradients into the leaves (w.Grad())
v, vs := y.Item(), tensor.ToSlice[float32](x)                  // values out
err := tensor.Try(func() { /* a step that may run out of memory */ })
}
}
