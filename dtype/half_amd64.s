#include "textflag.h"

// func f32sToF16sF16C(dst *uint16, src *float32, n int)
// Converts n floats, n a multiple of 8, rounding to nearest even (imm 0).
TEXT ·f32sToF16sF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func f16sToF32sF16C(dst *float32, src *uint16, n int)
// Converts n halves, n a multiple of 8; exact.
TEXT ·f16sToF32sF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET
