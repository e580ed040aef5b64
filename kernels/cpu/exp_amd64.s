#include "textflag.h"

// e^x as 2^n · p(r): n = round(x·log2e), r = x - n·ln2 (ln2 in two parts, so r is
// exact), p a degree-7 polynomial (Cephes expf) good to an ulp on |r| ≤ ln2/2. 2^n is
// applied as two exponent-field multiplies, 2^(n>>1) then 2^(n-(n>>1)), so results
// that overflow become +Inf and ones in the subnormal range round once. x is clamped to
// [-104, 88.8] first, beyond which e^x rounds to 0 or overflows anyway; NaN passes
// through the clamps (they return their first Go operand when either is NaN).
DATA expc<>+0(SB)/4, $0x3fb8aa3b  // log2e
DATA expc<>+4(SB)/4, $0x3f318000  // ln2, high part
DATA expc<>+8(SB)/4, $0xb95e8083  // ln2, low part
DATA expc<>+12(SB)/4, $0x39506967 // c5
DATA expc<>+16(SB)/4, $0x3ab743ce // c4
DATA expc<>+20(SB)/4, $0x3c088908 // c3
DATA expc<>+24(SB)/4, $0x3d2aa9c1 // c2
DATA expc<>+28(SB)/4, $0x3e2aaaaa // c1
DATA expc<>+32(SB)/4, $0x3f000000 // c0 = 0.5
DATA expc<>+36(SB)/4, $0x3f800000 // 1
DATA expc<>+40(SB)/4, $0x42b1999a // 88.8
DATA expc<>+44(SB)/4, $0xc2d00000 // -104
DATA expc<>+48(SB)/4, $0x0000007f // exponent bias
GLOBL expc<>(SB), RODATA|NOPTR, $52

// func expAVX512(dst, src *float32, n int)
// n is a multiple of 16; dst may be src.
TEXT ·expAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   done
	VBROADCASTSS expc<>+0(SB), Z16
	VBROADCASTSS expc<>+4(SB), Z17
	VBROADCASTSS expc<>+8(SB), Z18
	VBROADCASTSS expc<>+12(SB), Z19
	VBROADCASTSS expc<>+16(SB), Z20
	VBROADCASTSS expc<>+20(SB), Z21
	VBROADCASTSS expc<>+24(SB), Z22
	VBROADCASTSS expc<>+28(SB), Z23
	VBROADCASTSS expc<>+32(SB), Z24
	VBROADCASTSS expc<>+36(SB), Z25
	VBROADCASTSS expc<>+40(SB), Z26
	VBROADCASTSS expc<>+44(SB), Z27
	VPBROADCASTD expc<>+48(SB), Z28

loop:
	VMOVUPS      (SI), Z0
	VMINPS       Z0, Z26, Z0
	VMAXPS       Z0, Z27, Z0
	VMULPS       Z16, Z0, Z1
	VRNDSCALEPS  $0, Z1, Z1
	VFNMADD231PS Z17, Z1, Z0
	VFNMADD231PS Z18, Z1, Z0
	VMOVAPS      Z19, Z2
	VFMADD213PS  Z20, Z0, Z2
	VFMADD213PS  Z21, Z0, Z2
	VFMADD213PS  Z22, Z0, Z2
	VFMADD213PS  Z23, Z0, Z2
	VFMADD213PS  Z24, Z0, Z2
	VMULPS       Z0, Z0, Z3
	VFMADD213PS  Z0, Z3, Z2
	VADDPS       Z25, Z2, Z2
	VCVTPS2DQ    Z1, Z1
	VPSRAD       $1, Z1, Z4
	VPSUBD       Z4, Z1, Z1
	VPADDD       Z28, Z4, Z4
	VPSLLD       $23, Z4, Z4
	VPADDD       Z28, Z1, Z1
	VPSLLD       $23, Z1, Z1
	VMULPS       Z4, Z2, Z2
	VMULPS       Z1, Z2, Z2
	VMOVUPS      Z2, (DI)
	ADDQ         $64, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          loop

done:
	VZEROUPPER
	RET

// func expAVX2(dst, src *float32, n int)
// n is a multiple of 8; dst may be src. The same steps as expAVX512, so the same bits.
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   done
	VBROADCASTSS expc<>+0(SB), Y5
	VBROADCASTSS expc<>+4(SB), Y6
	VBROADCASTSS expc<>+8(SB), Y7
	VBROADCASTSS expc<>+12(SB), Y8
	VBROADCASTSS expc<>+16(SB), Y9
	VBROADCASTSS expc<>+20(SB), Y10
	VBROADCASTSS expc<>+24(SB), Y11
	VBROADCASTSS expc<>+28(SB), Y12
	VBROADCASTSS expc<>+32(SB), Y13
	VBROADCASTSS expc<>+36(SB), Y14
	VPBROADCASTD expc<>+48(SB), Y15

loop:
	VMOVUPS      (SI), Y0
	VBROADCASTSS expc<>+40(SB), Y3
	VMINPS       Y0, Y3, Y0
	VBROADCASTSS expc<>+44(SB), Y3
	VMAXPS       Y0, Y3, Y0
	VMULPS       Y5, Y0, Y1
	VROUNDPS     $0, Y1, Y1
	VFNMADD231PS Y6, Y1, Y0
	VFNMADD231PS Y7, Y1, Y0
	VMOVAPS      Y8, Y2
	VFMADD213PS  Y9, Y0, Y2
	VFMADD213PS  Y10, Y0, Y2
	VFMADD213PS  Y11, Y0, Y2
	VFMADD213PS  Y12, Y0, Y2
	VFMADD213PS  Y13, Y0, Y2
	VMULPS       Y0, Y0, Y3
	VFMADD213PS  Y0, Y3, Y2
	VADDPS       Y14, Y2, Y2
	VCVTPS2DQ    Y1, Y1
	VPSRAD       $1, Y1, Y4
	VPSUBD       Y4, Y1, Y1
	VPADDD       Y15, Y4, Y4
	VPSLLD       $23, Y4, Y4
	VPADDD       Y15, Y1, Y1
	VPSLLD       $23, Y1, Y1
	VMULPS       Y4, Y2, Y2
	VMULPS       Y1, Y2, Y2
	VMOVUPS      Y2, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DI
	DECQ         CX
	JNZ          loop

done:
	VZEROUPPER
	RET
