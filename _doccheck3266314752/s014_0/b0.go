package p

import (
	alloc "github.com/subletml/sublet/alloc"
	cuda "github.com/subletml/sublet/device/cuda"
)

func _() {
{
//line device/cuda/doc.go:9
d, err := cuda.Open(0)          // errors.Is(err, cuda.ErrNoDriver / ErrNoDevice) without one
defer d.Close()                 // refuses while anything is still allocated
a, err := alloc.For(d)          // the caching allocator in front of it
}
}
