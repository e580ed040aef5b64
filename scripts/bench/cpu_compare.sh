#!/usr/bin/env bash
# cpu_compare.sh: CPU training and single ops, sublet against PyTorch, at 16 and at 2
# threads in one run (issue 19's tables). Two steps:
#
#   scripts/bench/cpu_compare.sh build   # here, with Go: .cpubench/bin.tar.xz
#   scripts/bench/cpu_compare.sh         # there, from the repository root: python3 +
#                                        # torch, no Go; carry [".cpubench/bin.tar.xz"]
#
# build writes CGO_ENABLED=0 GOOS=linux GOARCH=amd64 binaries and packs them into
# .cpubench/bin.tar.xz (git-ignored, about 6 MB): sublet-bench and the test binaries of
# kernels/cpu, tensor and checkpoint (for their benchmarks).
#
# The run unpacks them if need be and, for each thread count T of THREADS (default
# "16 2"), with GOMAXPROCS=T for sublet and torch.set_num_threads(T) for PyTorch:
#   train    for each case of CASES: sublet-bench -run train -cases CASE (built-in GEMM,
#            then the system BLAS), scripts/bench/torch_train.py --cases CASE, TIME
#            seconds each
#   ops      sublet-bench -run ops and scripts/bench/torch_ops.py (products, reductions,
#            elementwise ops over 64M float32, the host cost of a small op)
#   bench    BenchmarkSgemmTransposes (built-in GEMM beside the system BLAS),
#            BenchmarkSgemmTraining (the training cases' products), BenchmarkSgemmCold
#            (the deep case's products on operands from memory, both GEMMs), BenchmarkGemmMicro
#            and BenchmarkGemmTiles (the micro-kernel alone and as the driver runs it on
#            one core) and BenchmarkBandwidth of kernels/cpu, BenchmarkSmallOp of
#            tensor, BenchmarkCheckpointOverhead of checkpoint (go test -bench output)
#   profile  both sides' per-op tables of each training case (sublet-bench -profile,
#            torch_train.py --profile) and a CPU profile of sublet on each case
#            (CASE-T.pprof, for `go tool pprof .cpubench/bin/sublet-bench FILE`), and an
#            execution trace of deep-sgd (deep-sgd-T.trace: `go tool trace -pprof=sched
#            FILE` gives the time goroutines waited for a thread)
# train and ops run ROUNDS times (default 1), each round every thread count, so that a
# host whose speed drifts moves both sides alike; train runs case by case (CASES), each
# case's sides one after the other. With several rounds the tables give each side's
# median and its range over the rounds, the ratio of the medians, and for training the
# median and range of the rounds' own ratios (each round's sides seconds apart).
# The system BLAS is SUBLET_BLAS when set, else a libopenblas the loader finds, else the
# OpenBLAS that SciPy's or NumPy's wheels carry; none found, only the built-in GEMM runs.
# Each round's share of the host's CPU time that the hypervisor stole, and the cgroup's
# throttling, head the tables (from /proc/stat and cpu.stat at each round's start).
# Output (OUT defaults to .cpubench/out): $OUT/tables.md (both sides and their ratios)
# and $OUT/cpu.tar.gz (cpu/: every run's JSON lines and text, tables.md, profile/), two
# files, since the device tool brings back 8 files at most; the folder itself is written
# under WORK (.cpubench/work).
# Environment: THREADS, TIME (default 2), ROUNDS (default 1), PARTS (default "train ops
# bench profile"), CASES (default "tiny-sgd wide-adam deep-sgd deep-sgd-ckpt4"), OPS
# (space-separated op names, e.g. "matmul-nn-1024 matmul-nt-1024": the ops part runs
# only these, op by op, each op's sides one after the other; default every op, one side
# then the other), PIN (when set, the train and ops parts run both sides under
# `taskset -c 0-(T-1)`: the same T CPUs for both, where the scheduler would otherwise
# place and move each side's threads its own way; the tables' header says so).
set -uo pipefail

if [[ ${1:-} == build ]]; then
	set -e
	cd "$(git rev-parse --show-toplevel)"
	export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
	FLAGS=(-trimpath "-ldflags=-s -w")
	rm -rf .cpubench/bin .cpubench/bin.tar.xz .cpubench/out
	mkdir -p .cpubench/bin
	go build "${FLAGS[@]}" -o .cpubench/bin/sublet-bench ./cmd/sublet-bench
	for pkg in kernels/cpu tensor checkpoint; do
		go test -c "${FLAGS[@]}" -o ".cpubench/bin/${pkg//\//_}.test" "./$pkg"
	done
	tar -C .cpubench -cf - bin | xz -T1 --lzma2=preset=6,dict=256MiB >.cpubench/bin.tar.xz
	rm -rf .cpubench/bin # the run unpacks the archive
	du -sh .cpubench/bin.tar.xz | awk '{print "cpu_compare.sh: " $2 " is " $1 "; carry [\".cpubench/bin.tar.xz\"]"}' >&2
	exit 0
fi

OUT=${OUT:-.cpubench/out}
THREADS=${THREADS:-"16 2"}
TIME=${TIME:-2}
ROUNDS=${ROUNDS:-1}
CASES=${CASES:-"tiny-sgd wide-adam deep-sgd deep-sgd-ckpt4"}
PARTS=${PARTS:-"train ops bench profile"}
PY=${PYTHON:-python3}
BIN=.cpubench/bin
if [[ -f .cpubench/bin.tar.xz && ! -x $BIN/sublet-bench ]]; then
	tar -C .cpubench -xJf .cpubench/bin.tar.xz
fi
WORK=${WORK:-.cpubench/work}
dir=$WORK/cpu
rm -rf "$dir"
mkdir -p "$dir/profile" "$OUT"
has() { [[ " $PARTS " == *" $1 "* ]]; }

# The system BLAS for SUBLET_BLAS.
blas=${SUBLET_BLAS:-}
if [[ -z $blas ]]; then
	blas=$(ldconfig -p 2>/dev/null | awk '/libopenblas/ {print $NF; exit}')
fi
if [[ -z $blas ]]; then
	blas=$("$PY" -c 'import glob, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for pat in ("scipy.libs/lib*openblas*.so*", "numpy.libs/lib*openblas*.so*", "scipy_openblas*/lib/lib*.so*"):
        for f in sorted(glob.glob(d + "/" + pat)):
            print(f); sys.exit()' 2>/dev/null)
fi
if [[ -n ${PIN:-} ]] && ! command -v taskset >/dev/null; then
	echo "cpu_compare.sh: PIN needs taskset (util-linux)" >&2
	exit 2
fi
echo "cpu_compare.sh: system BLAS: ${blas:-none}; threads: $THREADS${PIN:+, each side pinned to CPUs 0-(T-1)}; $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo)" | tee "$dir/machine.txt"

# The host's CPU counters (/proc/stat's first line, the cgroup's cpu.stat) at the
# start of each round and at the end: the tables give each round's steal and
# throttling, to tell a slow round the hypervisor or a quota took from one the code lost.
snap() {
	echo "$1 $(date +%s.%N) $(head -1 /proc/stat) | $(tr '\n' ' ' </sys/fs/cgroup/cpu.stat 2>/dev/null)" >>"$dir/host.txt"
}

# side NAME CMD... runs CMD (pinned with PIN), which writes its JSON lines to
# $dir/case.jsonl, and appends its output and its lines to NAME's files: one side's run
# of one case or op, within a round. A run that writes no lines adds none.
side() {
	local name=$1
	shift
	rm -f "$dir/case.jsonl"
	"${on[@]}" "$@" 2>&1 | tee -a "$dir/$name.txt"
	[[ ! -f $dir/case.jsonl ]] || cat "$dir/case.jsonl" >>"$dir/$name.jsonl"
}

# Round r's files end in -rR; the tables read every round's.
for r in $(seq 1 "$ROUNDS"); do
	snap "round$r"
	for t in $THREADS; do
		export GOMAXPROCS=$t OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t
		on=()
		[[ -n ${PIN:-} ]] && on=(taskset -c "0-$((t - 1))")
		if has train; then
			# Case by case, the sides seconds apart: this host's speed swings within a minute.
			for c in $CASES; do
				side "sublet-train-$t-r$r" $BIN/sublet-bench -device cpu -run train -cases "$c" -time "${TIME}s" -jsonl "$dir/case.jsonl"
				if [[ -n $blas ]]; then
					side "sublet-blas-train-$t-r$r" env SUBLET_BLAS="$blas" $BIN/sublet-bench -device cpu -run train -cases "$c" \
						-time "${TIME}s" -jsonl "$dir/case.jsonl"
				fi
				side "torch-train-$t-r$r" env PYTHONUNBUFFERED=1 "$PY" scripts/bench/torch_train.py --threads "$t" --cases "$c" \
					--time "$TIME" --jsonl "$dir/case.jsonl"
			done
		fi
		if has ops; then
			# Every op on one side then on the other, or with OPS op by op, each op's
			# sides seconds apart (each run sets up every op's inputs: a second or two).
			for o in ${OPS:-all}; do
				ours=() theirs=()
				[[ $o == all ]] || ours=(-ops "$o") theirs=(--cases "$o")
				side "sublet-ops-$t-r$r" $BIN/sublet-bench -device cpu -run ops "${ours[@]}" -time "${TIME}s" -jsonl "$dir/case.jsonl"
				side "torch-ops-$t-r$r" env PYTHONUNBUFFERED=1 "$PY" scripts/bench/torch_ops.py --threads "$t" --time "$TIME" \
					"${theirs[@]}" --jsonl "$dir/case.jsonl"
			done
		fi
	done
done
rm -f "$dir/case.jsonl"

for t in $THREADS; do
	export GOMAXPROCS=$t OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t
	if has bench; then
		(cd kernels/cpu && SUBLET_BLAS=${blas:-builtin} "../../$BIN/kernels_cpu.test" -test.run '^$' \
			-test.bench 'SgemmTransposes|SgemmTraining|SgemmCold|GemmMicro|GemmTiles|Bandwidth' -test.benchtime 1s -test.cpu "$t") 2>&1 | tee "$dir/kernels-$t.txt"
		(cd tensor && "../$BIN/tensor.test" -test.run '^$' -test.bench 'SmallOp' -test.benchtime 300000x \
			-test.count 3 -test.cpu "$t") 2>&1 | tee "$dir/tensor-$t.txt"
		(cd checkpoint && "../$BIN/checkpoint.test" -test.run '^$' -test.bench CheckpointOverhead \
			-test.benchtime 10x -test.cpu "$t") 2>&1 | tee "$dir/checkpoint-$t.txt"
	fi
	if has profile; then
		mkdir -p "$dir/profile/$t"
		$BIN/sublet-bench -device cpu -run train -cases cpu -time 1s -profile "$dir/profile/$t" >"$dir/profile/$t/sublet.txt" 2>&1
		PYTHONUNBUFFERED=1 "$PY" scripts/bench/torch_train.py --threads "$t" --cases cpu --time 1 \
			--profile "$dir/profile/$t" >"$dir/profile/$t/torch.txt" 2>&1
		for c in tiny-sgd wide-adam deep-sgd deep-sgd-ckpt4; do
			$BIN/sublet-bench -device cpu -run train -cases "$c" -time 3s -cpuprofile "$dir/profile/$c-$t.pprof" \
				>>"$dir/profile/$t/pprof.txt" 2>&1
		done
		$BIN/sublet-bench -device cpu -run train -cases deep-sgd -time 3s -trace "$dir/profile/deep-sgd-$t.trace" \
			>>"$dir/profile/$t/pprof.txt" 2>&1
	fi
done
unset GOMAXPROCS OPENBLAS_NUM_THREADS OMP_NUM_THREADS
snap end

"$PY" - "$dir" "$ROUNDS" $THREADS <<'PY' | tee "$dir/tables.md"
import glob, json, os, re, statistics, sys
d, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def load(prefix):
    """Every round's records of prefix (e.g. sublet-train-16), by case, in round order."""
    out = {}
    for p in sorted(glob.glob(os.path.join(d, prefix + "-r*.jsonl")), key=lambda p: int(p.rsplit("-r", 1)[1][:-6])):
        for line in open(p):
            r = json.loads(line)
            out.setdefault(r["case"], []).append(r)
    return out

def med(rs):
    return statistics.median(r["value"] for r in rs)

def fig(rs):
    """The median, and with several rounds their range."""
    v = [r["value"] for r in rs]
    if len(v) == 1:
        return "%.4g" % v[0]
    return "%.4g (%.4g-%.4g)" % (statistics.median(v), min(v), max(v))

def paired(a, b):
    """The median of the rounds' own ratios a/b, with their range: "" unless every round has both."""
    if not a or not b or len(a) != len(b) or len(a) < 2:
        return ""
    q = [x["value"] / y["value"] for x, y in zip(a, b)]
    return "%.2f (%.2f-%.2f)" % (statistics.median(q), min(q), max(q))

def peak(rs, key):
    m = re.search(key + r" (\d+)", rs[-1]["note"]) if rs else None
    return int(m.group(1)) if m else None

print(open(os.path.join(d, "machine.txt")).read().strip() + "\n")

def host():
    """Each round's share of CPU time stolen by the hypervisor and the cgroup's throttling, from host.txt."""
    snaps = []
    for line in open(os.path.join(d, "host.txt")):
        stat, _, cg = line.partition(" | ")
        f = stat.split()
        ticks = [int(x) for x in f[3:]]  # after the label, the time and "cpu"
        c = dict(zip(cg.split()[::2], (int(x) for x in cg.split()[1::2])))
        snaps.append((f[0], float(f[1]), ticks, c))
    for (name, t0, a, ca), (_, t1, b, cb) in zip(snaps, snaps[1:]):
        total = sum(b[:8]) - sum(a[:8])  # guest time is counted in user's already
        steal = (b[7] - a[7]) if len(a) > 7 else 0
        busy = total - (b[3] - a[3]) - (b[4] - a[4])
        line = "%s: %.0f s, CPU busy %.1f %%, steal %.2f %%" % (name, t1 - t0, 100 * busy / max(total, 1), 100 * steal / max(total, 1))
        if "nr_throttled" in ca and "nr_throttled" in cb:
            line += ", throttled %d times for %.2f s" % (cb["nr_throttled"] - ca["nr_throttled"], (cb.get("throttled_usec", 0) - ca.get("throttled_usec", 0)) / 1e6)
        print("- " + line)
    print()

if os.path.exists(os.path.join(d, "host.txt")):
    print("The host's counters over each round (the whole machine's CPUs):\n")
    host()
if rounds > 1:
    print("Each figure: the median of %d rounds, the rounds' range in parentheses; ratios of the medians.\n" % rounds)
print("## Training, steps/s (sublet / PyTorch)\n")
print("| case | threads | PyTorch | sublet | sublet / PyTorch | rounds' ratios | sublet, system BLAS | its ratio | sublet peak allocated | PyTorch peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t in threads:
    s, b, p = load("sublet-train-%s" % t), load("sublet-blas-train-%s" % t), load("torch-train-%s" % t)
    for case in p:
        sv, bv, pv = s.get(case), b.get(case), p[case]
        row = [case, t, fig(pv)]
        row += [fig(sv), "%.2f" % (med(sv) / med(pv)), paired(sv, pv)] if sv else ["", "", ""]
        row += [fig(bv), "%.2f" % (med(bv) / med(pv))] if bv else ["", ""]
        row += [str(peak(sv, "peak allocated") or ""), str(peak(pv, "peak rss") or "")]
        print("| " + " | ".join(row) + " |")

print("\n## Single ops (sublet / PyTorch; for µs/op, PyTorch / sublet)\n")
print("| op | unit | threads | PyTorch | sublet | ratio | rounds' ratios |")
print("|---|---|---|---|---|---|---|")
for t in threads:
    s, p = load("sublet-ops-%s" % t), load("torch-ops-%s" % t)
    for case, pr in p.items():
        sr = s.get(case)
        if not sr:
            continue
        per = pr[0]["unit"] == "µs/op"
        ratio = med(pr) / med(sr) if per else med(sr) / med(pr)
        rounds = paired(pr, sr) if per else paired(sr, pr)
        print("| %s | %s | %s | %s | %s | %.2f | %s |" % (case, pr[0]["unit"], t, fig(pr), fig(sr), ratio, rounds))

print("\n## go test benchmarks\n")
for t in threads:
    for name in ("kernels", "tensor", "checkpoint"):
        p = os.path.join(d, "%s-%s.txt" % (name, t))
        if not os.path.exists(p):
            continue
        rows = [l.rstrip() for l in open(p) if l.startswith("Benchmark")]
        if rows:
            print("### %s, %s threads\n\n```\n%s\n```\n" % (name, t, "\n".join(rows)))
PY
tar -czf "$OUT/cpu.tar.gz" -C "$WORK" cpu
cp "$dir/tables.md" "$OUT/tables.md"
