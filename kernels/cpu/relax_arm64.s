#include "textflag.h"

// func relax()
TEXT ·relax(SB), NOSPLIT, $0-0
	YIELD
	RET
