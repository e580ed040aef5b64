package cpu

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Measurement switches of branch cpu16b, read from SUBLET_CPU16B (comma-separated
// knobs); removed before merge.
var (
	packMulti = false
	gemmDyn   = 0 // > 0: a product's grid has gemmDyn tasks per worker, claimed as they come (parallelTasks)
)

func init() {
	for _, kv := range strings.Split(os.Getenv("SUBLET_CPU16B"), ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "dyn":
			gemmDyn = max(n, 1)
		case "grain": // elementwise grain in K elements, the wake threshold kept at 1M
			grain = n << 10
			wakeGrains = 16 * 64 / n
		case "ggrain": // gemmGrain in K multiply-adds
			gemmGrain = n << 10
		case "spin": // workerSpin in µs
			workerSpin = time.Duration(n) * time.Microsecond
		case "await": // awaitSpin in µs
			awaitSpin = time.Duration(n) * time.Microsecond
		case "kc": // the fastest kernel's kc (at most its own: the pools' buffers)
			if g := bestGemmKernel(); n > 0 && n < g.kc {
				g.kc = n
			}
		case "pack":
			packMulti = true
			if n > 0 {
				packRows = n
			}
		}
	}
}
