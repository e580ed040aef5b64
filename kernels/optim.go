package kernels

import "fmt"

// SGD holds the hyper-parameters of stochastic gradient descent as PyTorch's
// torch.optim.SGD defines them. They are float64 like PyTorch's Python floats; a step
// rounds them to the type it computes in (float32 for F32 parameters, float64 for F64).
type SGD struct {
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov                             bool
}

// Adam holds the hyper-parameters of Adam (and AdamW when Decoupled) as PyTorch's
// torch.optim.Adam and AdamW define them. They are float64 like PyTorch's Python
// floats: the bias corrections 1-β^t are computed from them in float64 (float32(0.999)
// would put 1-β2 off by 1.3e-5 relative); the per-element math runs in the parameters'
// type (float32 for F32, float64 for F64).
type Adam struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	// Decoupled applies weight decay to the parameters directly (AdamW) instead of
	// adding it to the gradient (Adam).
	Decoupled bool
}

// CheckLists panics, naming op (with its backend: "kernels/cpu: sgd_multi"), unless
// each of lens is n: the lists of a multi-tensor call (SGDMulti, AdamMulti), which
// names calls them in order, hold one entry per tensor.
func CheckLists(op, names string, n int, lens ...int) {
	for _, l := range lens {
		if l != n {
			have := append([]int(nil), lens...) // a copy: lens stays on the caller's stack
			panic(fmt.Sprintf("%s: lists (%s) of %v entries for %d parameters; pass one entry per tensor in each", op, names, have, n))
		}
	}
}

// CheckSlots returns an error unless every slot (AdamMultiCapturable's: a parameter's
// element of the step counts) is in [0, n) and none repeats: two parameters counting
// in one element would add to it at once. A backend panics with it, naming its op.
func CheckSlots(slot []int, n int) error {
	seen := make(map[int]int, len(slot))
	for i, s := range slot {
		if s < 0 || s >= n {
			return fmt.Errorf("slot %d of parameter %d is outside the %d step counts", s, i, n)
		}
		if j, ok := seen[s]; ok {
			return fmt.Errorf("parameters %d and %d share step count %d; give each parameter its own", j, i, s)
		}
		seen[s] = i
	}
	return nil
}
