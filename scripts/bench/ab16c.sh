#!/bin/bash
# Branch cpu16b's second round on the 16-core host (issue 19), under 3 minutes. Run from
# the repository root (scripts/bench/torch_train.py is used) after unpacking
# .cpubench/cpu16b.tar.xz into .cpubench/c16b: bench-{main,branch}, gemm-{main,branch}.test.
# The branch's binaries run each candidate by SUBLET_CPU16B (kernels/cpu/variant.go):
#   W    pack,await=1000        packing by row blocks; a fork's caller spins 1 ms (not 50 µs) before it sleeps
#   WA   await=1000             W without the packing change
#   Wg   W,grain=16             elementwise grain 16K (64K), the wake threshold kept at 1M elements
#   WG   Wg,ggrain=512          and gemmGrain 512K (1M)
#   G    WG,dyn=2               and a product's tasks claimed by the pool, two a worker (round 1's G)
# Products at 16 threads in two interleaved rounds, the transposes twice in each process
# (the first benchmark of a process ran at half speed in round 1). Output on stdout and
# in $OUT/RESULT.
set -u
B=$PWD/.cpubench/c16b/bin; O=${OUT:-$PWD/.cpubench/out}; mkdir -p "$O"
BT=${BT:-0.15s}; T=${T:-1s}; TT=${TT:-1}
exec > >(tee "$O/RESULT") 2>&1
date -u
declare -A V=([main]= [W]=pack,await=1000 [WA]=await=1000 [Wg]=pack,await=1000,grain=16 [WG]=pack,await=1000,grain=16,ggrain=512 [G]=pack,dyn=2,await=1000,grain=16,ggrain=512)
bin() { [ "$1" = main ] && echo main || echo branch; }
gb() { # variant threads pattern [count]: kernels/cpu benchmarks, GFLOP/s and cpu-ns/op
	(cd kernels/cpu && SUBLET_CPU16B=${V[$1]} GOMAXPROCS=$2 timeout 30 "$B/gemm-$(bin $1).test" -test.run '^$' -test.bench "$3" -test.cpu $2 -test.benchtime $BT -test.count ${4:-1} | grep '^Bench' |
		awk -v v=$1 '{s=$1; sub("BenchmarkSgemm", "", s); sub("/builtin-avx512", "", s); l=v " " s; for (i=2; i<NF; i++) if ($(i+1) ~ /GFLOP|cpu-ns/) l=l " " $i " " $(i+1); print l}')
}
tr() { # variant threads cases: steps/s and CPU ms per step
	SUBLET_CPU16B=${V[$1]} GOMAXPROCS=$2 timeout 30 "$B/bench-$(bin $1)" -device cpu -run train -cases $3 -time $T 2>&1 | grep '^train' |
		awk -v v=$1 -v t=$2 '{c=""; for (i=1; i<NF; i++) if ($i == "cpu" && $(i+2) == "ms") c=$(i+1); print v, "T=" t, $3, $4, "steps/s, cpu", c, "ms/step"}'
}
X='SgemmTransposes/builtin.*/.*/1024$'
echo "== products, 16 threads (GFLOP/s), two rounds"
for r in 1 2; do for v in main W WA Wg WG G; do gb $v 16 "$X" 2; gb $v 16 'SgemmTraining'; done; done
echo "== products, 2 threads"
for v in main W WA WG G; do gb $v 2 "$X|SgemmTraining"; done
echo "== torch products"
timeout 30 python3 -c '
import time, torch
n = 1024
for t in (16, 2):
    torch.set_num_threads(t); a, b = torch.rand(n, n), torch.rand(n, n)
    for name, f in (("nn", lambda: a @ b), ("nt", lambda: a @ b.t()), ("tn", lambda: a.t() @ b), ("tt", lambda: a.t() @ b.t())):
        for _ in range(10): f()
        s, r = time.perf_counter(), 0
        while time.perf_counter() - s < 0.3: f(); r += 1
        print("torch", t, name, round(2 * n**3 * r / (time.perf_counter() - s) / 1e9, 1), "GFLOP/s")'
echo "== training (steps/s)"
for t in 16 2; do
	timeout 30 python3 scripts/bench/torch_train.py --threads $t --cases tiny-sgd,deep-sgd --time $TT 2>&1 | grep -o '"case": "[a-z-]*", "value": [0-9.]*' | sed "s/^/torch T=$t /"
done
for r in 1 2; do for v in main W WA Wg WG G; do tr $v 16 tiny-sgd,deep-sgd; done; done
for v in main W Wg WG G; do tr $v 2 tiny-sgd,deep-sgd; done
date -u
