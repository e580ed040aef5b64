package cpu

// Measurement switch of branch p16b (not for main): SUBLET_GEMMV="kc=K,mc=M,nc=N,share=F,per=P"
// replaces the built-in GEMM's blocking, gemmShareB and gemmPerWorker for one process,
// so that one build measures several settings on the 16-core host.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

func init() {
	v := os.Getenv("SUBLET_GEMMV")
	if v == "" {
		return
	}
	set := map[string]int{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(val)
		if !ok || err != nil {
			panic(fmt.Sprintf("SUBLET_GEMMV: %q", kv))
		}
		set[k] = n
	}
	if s, ok := set["share"]; ok {
		gemmShareB = s
	}
	if p, ok := set["per"]; ok {
		gemmPerWorker = p
	}
	bestGemmKernel = sync.OnceValue(func() *gemmKernel {
		k := gemmKernels()[0]
		kc, mc, nc := k.kc, k.mc, k.nc
		if x, ok := set["kc"]; ok {
			kc = x
		}
		if x, ok := set["mc"]; ok {
			mc = x
		}
		if x, ok := set["nc"]; ok {
			nc = x
		}
		fmt.Fprintf(os.Stderr, "SUBLET_GEMMV %s: %s kc %d mc %d nc %d share %d per %d\n", v, k.name, kc, mc, nc, gemmShareB, gemmPerWorker)
		return newGemmKernel(k.name, k.mr, k.nr, kc, mc, nc, k.micro, k.store)
	})
}
