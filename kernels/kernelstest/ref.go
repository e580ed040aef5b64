package kernelstest

import (
	"math"

	"github.com/subletml/sublet/kernels"
)

// The float64 references of the losses and of Philox: the definitions (kernels/ops.go,
// PyTorch's), not kernels/cpu's code. The elementwise ops' are package ref's.

// refBCE is PyTorch's binary_cross_entropy of a probability x against a target y,
// each logarithm clamped at -100.
func refBCE(x, y float64) float64 {
	return -(y*math.Max(math.Log(x), -100) + (1-y)*math.Max(math.Log(1-x), -100))
}

// refBCEGrad is g·∂refBCE/∂wrt, PyTorch's: for x the clamp's derivative left out and the
// denominator no smaller than 1e-12; for y -g·logit(x).
func refBCEGrad(wrt kernels.Arg, g, x, y float64) float64 {
	if wrt == kernels.ArgA {
		return g * (x - y) / math.Max(x*(1-x), 1e-12)
	}
	return -g * (math.Log(x) - math.Log(1-x))
}

// refLogSigmoid is ln σ(v) = -ln(1 + e^-v), computed without overflow.
func refLogSigmoid(v float64) float64 {
	if v >= 0 {
		return -math.Log1p(math.Exp(-v))
	}
	return v - math.Log1p(math.Exp(v))
}

// refBCELogits is binary_cross_entropy_with_logits: the loss of σ(x) against y with the
// positive term weighted by pw, -(pw·y·ln σ(x) + (1-y)·ln(1-σ(x))).
func refBCELogits(x, y, pw float64) float64 {
	return -(pw*y*refLogSigmoid(x) + (1-y)*refLogSigmoid(-x))
}

// refBCELogitsGrad is g·∂refBCELogits/∂wrt: for x g·((1-y)σ(x) - pw·y·(1-σ(x))), for y
// g·(ln σ(-x) - pw·ln σ(x)).
func refBCELogitsGrad(wrt kernels.Arg, g, x, y, pw float64) float64 {
	if wrt == kernels.ArgA {
		sig := 1 / (1 + math.Exp(-x))
		return g * ((1-y)*sig - pw*y*(1-sig))
	}
	return g * (refLogSigmoid(-x) - pw*refLogSigmoid(x))
}

// refAddc is torch.addcmul (op Mul) or torch.addcdiv (Div): x + value·a·b or x + value·a/b.
func refAddc(op kernels.BinaryOp, x, a, b, value float64) float64 {
	if op == kernels.Mul {
		return x + value*a*b
	}
	return x + value*a/b
}

// philox is Random123's Philox4x32-10, written again from the paper (Salmon et al.,
// SC11) for the dropout reference.
func philox(ctr [4]uint32, key [2]uint32) [4]uint32 {
	for r := range 10 {
		if r > 0 {
			key[0] += 0x9E3779B9
			key[1] += 0xBB67AE85
		}
		p0 := uint64(0xD2511F53) * uint64(ctr[0])
		p1 := uint64(0xCD9E8D57) * uint64(ctr[2])
		ctr = [4]uint32{uint32(p1>>32) ^ ctr[1] ^ key[0], uint32(p1), uint32(p0>>32) ^ ctr[3] ^ key[1], uint32(p0)}
	}
	return ctr
}

// f64ToInt is the float-to-integer conversion of kernels.Backend's Copy: truncation
// toward zero, NaN to 0, saturation at the type's range.
func f64ToInt(f float64, lo, hi int64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f <= float64(lo):
		return lo
	case f >= float64(hi):
		return hi
	}
	return int64(f)
}
