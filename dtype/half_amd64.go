package dtype

import "golang.org/x/sys/cpu"

// hasF16C says whether the F16C conversion instructions (VCVTPS2PH, VCVTPH2PS) can run;
// they round exactly as F32ToF16 does.
var hasF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

//go:noescape
func f32sToF16sF16C(dst *uint16, src *float32, n int)

//go:noescape
func f16sToF32sF16C(dst *float32, src *uint16, n int)

// f32sToF16sFast converts the longest prefix it can with F16C (a multiple of 8
// elements) and returns how many it converted.
func f32sToF16sFast(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	f32sToF16sF16C(&dst[0], &src[0], n)
	return n
}

// f16sToF32sFast is f32sToF16sFast's inverse.
func f16sToF32sFast(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	f16sToF32sF16C(&dst[0], &src[0], n)
	return n
}
