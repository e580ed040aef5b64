package p

import (
	alloc "github.com/subletml/sublet/alloc"
	errors "errors"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line README.md:176
loss, err := tensor.TryValue(func() float64 { return trainStep(batch) })
var oom *alloc.OOMError
if errors.As(err, &oom) { /* retry with a smaller batch */ }

}
}
