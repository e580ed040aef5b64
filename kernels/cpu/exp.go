package cpu

import "math"

// expTo writes e^x[i] into dst[i] for every i (dst may be x). In float32 it runs the
// vector exp (exp32); in float64, math.Exp.
func expTo[T float](dst, x []T) {
	if d, ok := as32(dst); ok {
		x32, _ := as32(x)
		exp32(d, x32)
		return
	}
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = T(math.Exp(float64(v)))
	}
}

// exp32 writes e^x[i] into dst[i] for every i (dst may be x), within 1.5 ulp of the
// exact value (an ulp but for rare cases), with the widest implementation the CPU has. Every element gets the
// same computation whatever its position, so equal inputs give equal bits.
func exp32(dst, x []float32) {
	dst = dst[:len(x)]
	w := expWidth
	if w == 0 {
		for i, v := range x {
			dst[i] = expScalar(v)
		}
		return
	}
	n := len(x) &^ (w - 1)
	if n > 0 {
		expRun(&dst[0], &x[0], n)
	}
	if n < len(x) { // the tail goes through a padded block so it gets the same code
		var buf [16]float32
		copy(buf[:], x[n:])
		expRun(&buf[0], &buf[0], w)
		copy(dst[n:], buf[:len(x)-n])
	}
}

// expScalar is the vector kernels' algorithm (exp_amd64.s) in scalar Go for CPUs
// without them: without fused multiply-adds it may differ from them in the last bit.
func expScalar(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	if x != x {
		return x
	}
	x = min(max(x, -104), 88.8)
	n := float32(math.RoundToEven(float64(x * log2e)))
	r := x - n*ln2hi - n*ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*(r*r) + r + 1
	ni := int32(n)
	n1 := ni >> 1
	return p * math.Float32frombits(uint32(n1+127)<<23) * math.Float32frombits(uint32(ni-n1+127)<<23)
}
