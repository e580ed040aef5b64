package tensor

import "unsafe"

// The dense CPU kernels (GEMM, softmax, losses, layer norm, embedding) take typed Go
// slices. These views alias a contiguous tensor's host bytes from its first element;
// call them only when the op computes (the storage has host bytes).

// float32s views a contiguous F32 tensor's elements (nil for a nil t: an optional
// operand, or an output not wanted).
func float32s(t *Tensor) []float32 {
	if t == nil || t.Numel() == 0 {
		return nil
	}
	n := t.Numel()
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.st.host[t.offset*4])), n)
}

// int64s views a contiguous I64 tensor's elements.
func int64s(t *Tensor) []int64 {
	n := t.Numel()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&t.st.host[t.offset*8])), n)
}
