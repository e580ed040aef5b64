//go:build !amd64

package dtype

// Without F16C every element goes through the scalar conversions.
func f32sToF16sFast(dst []uint16, src []float32) int { return 0 }
func f16sToF32sFast(dst []float32, src []uint16) int { return 0 }
