#include "textflag.h"

// func callers(pcs []uintptr) int
//
// Without a frame of its own, callers finds in BP the frame pointer of its caller:
// the word there is the caller's caller's frame pointer, the one above it the return
// address into the caller's caller. It stops at a zero frame pointer (the bottom of
// the goroutine's stack) or when pcs is full.
TEXT ·callers(SB), NOSPLIT, $0-32
	MOVQ pcs_base+0(FP), DI
	MOVQ pcs_len+8(FP), CX
	MOVQ BP, AX
	XORQ DX, DX

loop:
	CMPQ  DX, CX
	JGE   done
	TESTQ AX, AX
	JZ    done
	MOVQ  8(AX), R8
	MOVQ  R8, (DI)(DX*8)
	MOVQ  (AX), AX
	INCQ  DX
	JMP   loop

done:
	MOVQ DX, ret+24(FP)
	RET
