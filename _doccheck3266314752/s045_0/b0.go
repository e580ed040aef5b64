package p

import (
	dense "github.com/subletml/sublet/tensor/dense"
)

func _() {
{
//line tensor/dense/dense.go:4
t := dense.From(s, dev, d) // a *tensor.Tensor owned by scope s, on dev
d2 := dense.To(t)          // a new *tensor.Dense
}
}
