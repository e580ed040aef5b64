package amp

import "github.com/subletml/sublet/tensor"

// classOf is op's class in tensor's op table (PyTorch's CUDA autocast lists, applied
// on every device); names that are no op (backward rules) are left alone.
func classOf(op string) tensor.AutocastClass {
	info, _ := tensor.LookupOp(op)
	return info.Autocast
}
