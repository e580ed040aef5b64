#!/bin/bash
# Branch cpu16b (issue 19) against main on the 16-core host, one call (under 4 minutes).
# Run from the repository root (scripts/bench/torch_train.py is used) after unpacking
# .cpubench/cpu16b.tar.xz into .cpubench/c16b: bench-{main,branch} (sublet-bench) and
# gemm-{main,branch}.test (kernels/cpu's test binary). The branch's binaries run each
# candidate by SUBLET_CPU16B (kernels/cpu/variant.go, measurement only):
#   P    pack                                   several panels packed a row block at a time
#   D1   pack,dyn=1                             P, the grid's tasks claimed by the pool (no gang)
#   D2   pack,dyn=2                             P, twice as many tasks as workers, claimed
#   D2A  pack,dyn=2,await=1000
#   D3   pack,dyn=3                             P, three tasks per worker
#   G    pack,dyn=2,await=1000,grain=16,ggrain=512   D2A, elementwise grain 16K, gemmGrain 512K
#   S    pack,dyn=2,await=1000,spin=50          D2A, workers spin 50 µs (tiny-sgd only)
#   K    pack,dyn=2,kc=256                      D2 with kc 256 instead of 384 (other bits, same at every thread count)
# Output on stdout and in $OUT/RESULT.
set -u
B=$PWD/.cpubench/c16b/bin; O=${OUT:-$PWD/.cpubench/out}; mkdir -p "$O"
BT=${BT:-0.2s}; T=${T:-1s}; TT=${TT:-1}
exec > >(tee "$O/RESULT") 2>&1
nproc; grep -m1 'model name' /proc/cpuinfo; date -u
lscpu 2>/dev/null | grep -iE 'thread|core|socket|numa|cache|mhz' ; cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null
declare -A V=([main]= [P]=pack [D1]=pack,dyn=1 [D2]=pack,dyn=2 [D2A]=pack,dyn=2,await=1000 [D3]=pack,dyn=3 [G]=pack,dyn=2,await=1000,grain=16,ggrain=512 [S]=pack,dyn=2,await=1000,spin=50 [K]=pack,dyn=2,kc=256)
bin() { [ "$1" = main ] && echo main || echo branch; }
gb() { # variant threads pattern [count]: kernels/cpu benchmarks, GFLOP/s and cpu-ns/op
	(cd kernels/cpu && SUBLET_CPU16B=${V[$1]} GOMAXPROCS=$2 timeout 40 "$B/gemm-$(bin $1).test" -test.run '^$' -test.bench "$3" -test.cpu $2 -test.benchtime $BT -test.count ${4:-1} | grep '^Bench' |
		awk -v v=$1 '{s=$1; sub("BenchmarkSgemm", "", s); sub("/builtin-avx512", "", s); l=v " " s; for (i=2; i<NF; i++) if ($(i+1) ~ /GFLOP|cpu-ns/) l=l " " $i " " $(i+1); print l}')
}
tr() { # variant threads cases: steps/s and CPU ms per step
	SUBLET_CPU16B=${V[$1]} GOMAXPROCS=$2 timeout 30 "$B/bench-$(bin $1)" -device cpu -run train -cases $3 -time $T 2>&1 | grep '^train' |
		awk -v v=$1 -v t=$2 '{c=""; for (i=1; i<NF; i++) if ($i == "cpu" && $(i+2) == "ms") c=$(i+1); print v, "T=" t, $3, $4, "steps/s, cpu", c, "ms/step"}'
}
P16='SgemmTransposes/builtin.*/.*/1024$|SgemmTraining'
echo "== products, 16 threads (GFLOP/s)"
for v in main P D1 D2 D2A D3 G K; do gb $v 16 "$P16"; done
gb main 16 'SgemmTransposes/builtin.*/.*/1024$' 2   # drift, and nn as the process's first benchmark or not
echo "== products, 8 threads (are the 16 vCPUs 8 cores with two threads each?)"
for v in main D2; do gb $v 8 'SgemmTransposes/builtin.*/.*/1024$'; done
echo "== products, 2 threads"
for v in main P D2 D2A D3 K; do gb $v 2 "$P16"; done
echo "== torch products"
timeout 40 python3 -c '
import time, torch
n = 1024
for t in (16, 2):
    torch.set_num_threads(t); a, b = torch.rand(n, n), torch.rand(n, n)
    for name, f in (("nn", lambda: a @ b), ("nt", lambda: a @ b.t()), ("tn", lambda: a.t() @ b), ("tt", lambda: a.t() @ b.t())):
        for _ in range(10): f()
        s, r = time.perf_counter(), 0
        while time.perf_counter() - s < 0.4: f(); r += 1
        print("torch", t, name, round(2 * n**3 * r / (time.perf_counter() - s) / 1e9, 1), "GFLOP/s")'
echo "== training (steps/s)"
for t in 16 2; do
	timeout 40 python3 scripts/bench/torch_train.py --threads $t --cases tiny-sgd,deep-sgd --time $TT 2>&1 | grep -o '"case": "[a-z-]*", "value": [0-9.]*' | sed "s/^/torch T=$t /"
done
for v in main P D1 D2 D2A D3 G K; do tr $v 16 tiny-sgd,deep-sgd; done
tr S 16 tiny-sgd; tr main 16 tiny-sgd; tr D2A 16 tiny-sgd
for v in main D2; do GOGC=400 tr $v 16 tiny-sgd | sed 's/^/GOGC=400 /'; done   # the collector's share at 16 threads
for v in main P D2 D3 K; do tr $v 2 tiny-sgd,deep-sgd; done
date -u
