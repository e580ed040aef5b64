#!/usr/bin/env bash
# suite.sh: everything sublet checks and measures on the GPU machine, in one call. Run
# there from the repository root, after scripts/gpu/build.sh has filled .gpu/ here
# (carry [".gpu"]). Needs no Go there; python3 + torch for the PyTorch side.
#
#   scripts/gpu/suite.sh [--no-info] [--no-gencheck] [--no-tests] [--no-sanitize]
#                        [--no-memory] [--no-examples] [--no-gpubench] [--no-torch]
#                        [--no-bench] [--no-safetensors] [--no-replay] [--no-planned]
#                        [--no-memviz] [--oracle]
#
# .gpu/bin.tar.xz (from build.sh) is unpacked into .gpu/bin first.
#
# Steps, in this order, each logged, none stopping the others:
#   info:     sublet info (devices, driver, cuBLAS, allocator settings)
#   gencheck: scripts/gpu/gen_kernels.sh --check where nvcc is installed: the committed
#             kernels against a fresh compile (another nvcc's outputs land in
#             suite/gen-check)
#   tests:    every test binary of .gpu/tests.txt with -test.v, in its package folder:
#             the device, allocator and kernel backend conformance suites on cuda
#             among them, and every tensor, nn, checkpoint, amp and gradcheck test over
#             tensortest.DataDevices, which include cuda:0 on a GPU machine
#   sanitize: kernels/cuda's TestConformance under compute-sanitizer --tool memcheck
#             (every kernel of the conformance suite: no bad access, no leak)
#   memory:   the test binaries of MEMORY_PKGS (nn checkpoint amp optim) again with
#             SUBLET_TEST_META=cuda:0: their full-size memory-at-named-moments tests on
#             the GPU, with real data, must give the simulated device's bytes (the
#             cuBLAS workspace the kernels keep is left out, as in every report)
#   examples: every program of examples/ that takes -device, with -device cuda:0
#             (EXAMPLE_TIMEOUT seconds each, 120); mlp also on sim and on cuda:0
#             without a cuBLAS workspace, amp also on cpu
#   gpubench: sublet-bench on sim and cuda:0 (pair, churn, raw cuMemAlloc/cuMemFree
#             against the cache, EmptyCache schedules over an MLP step, concurrent
#             goroutines with errors counted), GPUBENCH_TIME per figure (500ms)
#   torch:    torch_alloc_cpp.py (PyTorch's allocator timed from C++; compiles an
#             extension first, about a minute)
#   bench:    go benchmarks of BENCH_PKGS (alloc: BenchmarkPair, BenchmarkChurn, ...;
#             kernels/cuda: BenchmarkOpHostCost, the host's cost per op) with
#             -test.benchtime BENCHTIME (1s)
#   safetensors: safetensors' TestInteropWithPyTorch writes sublet's files (tensors from
#             the cpu and through cuda:0, an MLP, its AdamW state),
#             safetensors_interop.py loads them with safetensors.torch.load_file, into
#             a torch MLP (load_state_dict) and a torch AdamW (load_state_dict), steps
#             once and compares, then writes PyTorch's, which the test reads back onto
#             the cpu and cuda:0, loads into an nn.MLP and AdamW, steps and compares
#   replay:   sublet replay -device cuda:0 -series of every run of
#             testdata/traces/matrix.json, one at a time with nothing else on the GPU,
#             compared row by row and final key by key with PyTorch's results
#             (testdata/oracle/NAME.json.gz, or this call's with --oracle) by
#             compare_replay.py
#   planned:  sublet compare -device cuda:0 -json of every trace of testdata/traces: the
#             PyTorch policy and the planned one (issue 20) on the GPU, each on a fresh
#             allocator (peak reserved and allocated, driver calls, OOMs, time per
#             allocation with the driver's real cost); planned/table.md sums them up
#   memviz:   sublet snapshot of testdata/traces/oom_fraction (expandable segments, a
#             memory fraction, so OOMs and segment_map/unmap are in it) and of train on
#             cuda:0, each read by PyTorch's own `python -m torch.cuda._memory_viz` stats,
#             trace, trace_plot and segment_plot (issue 11: the pickle PyTorch reads)
#   oracle:   only with --oracle: scripts/gpu/oracle.sh (PyTorch on every matrix run,
#             about 3 minutes) before the replay; testdata/oracle already holds its
#             results of 2026-11-30
# Output: $OUT/suite.tar.gz (suite/: env.txt, status.tsv, info.txt, gencheck.txt and
# gen-check/, tests/, memory/, examples/, gpubench.txt and .json, torch.txt, bench/,
# safetensors.log and safetensors/ with the files both sides wrote, replay/ with
# compare.txt, planned/ with a JSON per trace and table.md, memviz/), rewritten after every step so that a call cut short still
# brings back what ran; with --oracle also $OUT/oracle.tar.gz. Each step's time limit:
# STEP_TIMEOUT seconds (300). The last lines printed are the table of status.tsv.
set -uo pipefail

steps=" info gencheck tests sanitize memory examples gpubench torch bench safetensors replay planned memviz " # spaced: names are removed whole
while (($#)); do
	case "$1" in
	--no-info | --no-gencheck | --no-tests | --no-sanitize | --no-memory | --no-examples | --no-gpubench | --no-torch | --no-bench | --no-safetensors | --no-replay | --no-planned | --no-memviz) steps=${steps/ ${1#--no-} / } ;;
	--oracle) steps=${steps/ replay / oracle replay } ;;
	*) echo "suite.sh: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
	esac
	shift
done
has() { [[ $steps == *" $1 "* ]]; }

ROOT=$PWD
OUT=${OUT:-.gpu/out}
LOG=.gpu/suite
PY=${PYTHON:-python3}
BENCH_PKGS=${BENCH_PKGS:-"alloc kernels/cuda"}
MEMORY_PKGS=${MEMORY_PKGS:-"nn checkpoint amp optim"}
BENCHTIME=${BENCHTIME:-1s}
GPUBENCH_TIME=${GPUBENCH_TIME:-500ms}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
EXAMPLE_TIMEOUT=${EXAMPLE_TIMEOUT:-120}
SANITIZER=${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
if [[ -f .gpu/bin.tar.xz ]]; then
	rm -rf .gpu/bin
	tar -C .gpu -xJf .gpu/bin.tar.xz 2>/dev/null ||
		"$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu/bin.tar.xz .gpu
fi
[[ -x .gpu/bin/sublet && -x .gpu/bin/sublet-bench && -f .gpu/tests.txt ]] ||
	{ echo "suite.sh: .gpu/ not built: run scripts/gpu/build.sh on the dev machine and carry .gpu" >&2; exit 1; }
rm -rf "$LOG"
mkdir -p "$LOG/tests" "$LOG/memory" "$LOG/examples" "$LOG/bench" "$LOG/replay" "$LOG/memviz" "$OUT"
: >"$LOG/status.tsv"
t0=$SECONDS

# pack writes the logs so far to $OUT/suite.tar.gz.
pack() { tar -czf "$OUT/suite.tar.gz" -C .gpu suite; }

# status STEP NAME RC SECONDS: one line of status.tsv, echoed to stderr; then pack.
status() {
	printf '%s\t%s\t%s\t%s\n' "$@" | tee -a "$LOG/status.tsv" >&2
	pack
}

source scripts/gpu/find_cublas.sh

{
	echo "date: $(date -u +%FT%TZ)  steps: $steps"
	echo "SUBLET_CUBLAS=${SUBLET_CUBLAS:-}"
	uname -a
	nvidia-smi 2>&1
	"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$LOG/env.txt"

if has info; then
	t=$SECONDS
	.gpu/bin/sublet info >"$LOG/info.txt" 2>&1
	status info sublet $? $((SECONDS - t))
fi

if has gencheck; then
	t=$SECONDS
	if command -v "${NVCC:-nvcc}" >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
		PATH=$PATH:/usr/local/cuda/bin CHECK_OUT="$LOG/gen-check" timeout "$STEP_TIMEOUT" bash scripts/gpu/gen_kernels.sh --check >"$LOG/gencheck.txt" 2>&1
		status gencheck gen_kernels.sh $? $((SECONDS - t))
	else
		echo "no nvcc on this machine" >"$LOG/gencheck.txt"
		status gencheck no-nvcc 0 0
	fi
fi

if has tests; then
	while read -r dir bin; do
		t=$SECONDS
		(cd "$dir" && timeout "$STEP_TIMEOUT" "$ROOT/$bin" -test.v -test.count=1 -test.timeout "${STEP_TIMEOUT}s") \
			>"$LOG/tests/$(basename "$bin").log" 2>&1
		status tests "$dir" $? $((SECONDS - t))
	done <.gpu/tests.txt
fi

if has sanitize; then
	t=$SECONDS
	if [[ -x $SANITIZER ]]; then
		(cd kernels/cuda && timeout "$STEP_TIMEOUT" "$SANITIZER" --tool memcheck --leak-check full --error-exitcode 9 \
			"$ROOT/.gpu/bin/kernels_cuda.test" -test.run '^TestConformance$' -test.count=1) >"$LOG/sanitize.txt" 2>&1
		status sanitize "memcheck TestConformance" $? $((SECONDS - t))
	else
		echo "no $SANITIZER on this machine" >"$LOG/sanitize.txt"
		status sanitize no-sanitizer 0 0
	fi
fi

if has memory; then
	for pkg in $MEMORY_PKGS; do
		bin=.gpu/bin/${pkg//\//_}.test
		[[ -x $bin ]] || { status memory "$pkg" missing 0; continue; }
		t=$SECONDS
		(cd "$pkg" && SUBLET_TEST_META=cuda:0 timeout "$STEP_TIMEOUT" "$ROOT/$bin" -test.v -test.count=1 -test.timeout "${STEP_TIMEOUT}s") \
			>"$LOG/memory/${pkg//\//_}.log" 2>&1
		status memory "$pkg" $? $((SECONDS - t))
	done
fi

if has examples; then
	runs=("mlp -device sim" "amp -device cpu")
	for bin in .gpu/bin/example-*; do
		runs+=("${bin#.gpu/bin/example-} -device cuda:0")
	done
	for run in "${runs[@]}"; do
		name=${run// /_}
		t=$SECONDS
		# $run is the program and its flags: split into words on purpose.
		timeout "$EXAMPLE_TIMEOUT" .gpu/bin/example-$run >"$LOG/examples/$name.txt" 2>&1
		status examples "$run" $? $((SECONDS - t))
	done
	t=$SECONDS
	CUBLAS_WORKSPACE_CONFIG=:0:0 timeout "$EXAMPLE_TIMEOUT" .gpu/bin/example-mlp -device cuda:0 >"$LOG/examples/mlp_-device_cuda:0_no-workspace.txt" 2>&1
	status examples "mlp -device cuda:0 (no cuBLAS workspace)" $? $((SECONDS - t))
fi

if has gpubench; then
	t=$SECONDS
	timeout "$STEP_TIMEOUT" .gpu/bin/sublet-bench -device sim,cuda:0 -time "$GPUBENCH_TIME" -json "$LOG/gpubench.json" \
		>"$LOG/gpubench.txt" 2>&1
	status gpubench sublet-bench $? $((SECONDS - t))
fi

if has torch; then
	t=$SECONDS
	PYTHONUNBUFFERED=1 timeout "$STEP_TIMEOUT" "$PY" .gpu/bench/torch/torch_alloc_cpp.py >"$LOG/torch.txt" 2>&1
	status torch torch_alloc_cpp.py $? $((SECONDS - t))
fi

if has bench; then
	for pkg in $BENCH_PKGS; do
		bin=.gpu/bin/${pkg//\//_}.test
		[[ -x $bin ]] || { status bench "$pkg" missing 0; continue; }
		t=$SECONDS
		(cd "$pkg" && timeout "$STEP_TIMEOUT" "$ROOT/$bin" -test.run '^$' -test.bench . -test.benchmem -test.benchtime "$BENCHTIME") \
			>"$LOG/bench/${pkg//\//_}.log" 2>&1
		status bench "$pkg" $? $((SECONDS - t))
	done
fi

if has safetensors; then
	t=$SECONDS
	dir=$ROOT/$LOG/safetensors
	mkdir -p "$dir"
	bin=$ROOT/.gpu/bin/safetensors.test
	# interop PHASE: the Go side of the exchange, in the package folder.
	interop() {
		(cd safetensors && SUBLET_SAFETENSORS_INTEROP=$dir SUBLET_SAFETENSORS_PHASE=$1 SUBLET_SAFETENSORS_DEVICE=cuda:0 \
			timeout "$STEP_TIMEOUT" "$bin" -test.run '^TestInteropWithPyTorch$' -test.v -test.count=1)
	}
	{
		if [[ ! -x $bin ]]; then
			echo "suite.sh: no $bin; build.sh builds it (safetensors is in GPU_PKGS)"
			false
		else
			interop write &&
				timeout "$STEP_TIMEOUT" "$PY" scripts/gpu/safetensors_interop.py "$dir" &&
				interop read
		fi
	} >"$LOG/safetensors.log" 2>&1
	status safetensors interop $? $((SECONDS - t))
fi

oracle_dir=testdata/oracle
if has oracle; then
	t=$SECONDS
	OUT=$OUT bash scripts/gpu/oracle.sh >"$LOG/oracle.log" 2>&1
	status oracle oracle.sh $? $((SECONDS - t))
	oracle_dir=.gpu/oracle-work/oracle
fi

if has replay; then
	# One line per run: name, trace, conf, fraction (\x1f-separated, see oracle.sh).
	"$PY" -c '
import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    print("\x1f".join([r["name"], r["trace"], r["conf"], repr(float(r["fraction"]))]))
' testdata/traces/matrix.json >"$LOG/replay/plan.txt"
	while IFS=$'\x1f' read -r name trace conf frac; do
		t=$SECONDS
		timeout "$STEP_TIMEOUT" .gpu/bin/sublet replay -trace "testdata/traces/$trace.jsonl.gz" -conf "$conf" \
			-fraction "$frac" -device cuda:0 -series -allow-oom >"$LOG/replay/$name.json" 2>"$LOG/replay/$name.err"
		rc=$?
		printf '%s\t%s\t%s\t%s\n' replay "$name" $rc $((SECONDS - t)) >>"$LOG/status.tsv"
	done <"$LOG/replay/plan.txt"
	t=$SECONDS
	"$PY" scripts/gpu/compare_replay.py "$oracle_dir" "$LOG"/replay/*.json >"$LOG/replay/compare.txt" 2>&1
	status replay compare_replay.py $? $((SECONDS - t))
	tail -n 1 "$LOG/replay/compare.txt" >&2
fi

if has planned; then
	mkdir -p "$LOG/planned"
	for trace in testdata/traces/*.jsonl.gz; do
		name=$(basename "$trace" .jsonl.gz)
		t=$SECONDS
		timeout "$STEP_TIMEOUT" .gpu/bin/sublet compare -device cuda:0 -conf "" -json "$trace" \
			>"$LOG/planned/$name.json" 2>"$LOG/planned/$name.err"
		status planned "$name" $? $((SECONDS - t))
	done
	"$PY" - "$LOG/planned" >"$LOG/planned/table.md" 2>&1 <<'PY'
import glob, json, os, sys
print("| trace | policy | peak reserved MiB | peak allocated MiB | reserved/allocated | device allocs | device frees | OOMs | µs/alloc | served by plans |")
print("|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        d = json.load(open(f))
    except ValueError:
        continue
    for p in d.get("policies", []):
        print("| %s | %s | %.1f | %.1f | %.3f | %d | %d | %d | %.2f | %d |" % (os.path.basename(f)[:-5], p["policy"],
              p["peak_reserved"] / 2**20, p["peak_allocated"] / 2**20, p["ratio"], p["device_allocs"],
              p["device_frees"], p["ooms"], p["ns_per_alloc"] / 1e3, p["served_by_plans"]))
PY
fi

if has memviz; then
	for run in "oom_fraction expandable_segments:True 0.0143" "train - 0"; do
		read -r trace conf frac <<<"$run"
		[[ $conf == - ]] && conf=
		snap=$LOG/memviz/$trace.pickle
		t=$SECONDS
		timeout "$STEP_TIMEOUT" .gpu/bin/sublet snapshot -trace "testdata/traces/$trace.jsonl.gz" -conf "$conf" \
			-fraction "$frac" -device cuda:0 -o "$snap" >"$LOG/memviz/$trace.snapshot.txt" 2>&1
		status memviz "snapshot $trace" $? $((SECONDS - t))
		for act in stats trace trace_plot segment_plot; do
			t=$SECONDS
			case $act in
			stats | trace) timeout "$STEP_TIMEOUT" "$PY" -m torch.cuda._memory_viz $act "$snap" ;;
			*) timeout "$STEP_TIMEOUT" "$PY" -m torch.cuda._memory_viz $act "$snap" -o "$LOG/memviz/$trace.$act.html" ;;
			esac >"$LOG/memviz/$trace.$act.txt" 2>&1
			status memviz "_memory_viz $act $trace" $? $((SECONDS - t))
		done
	done
fi

pack
{
	echo "step      result  seconds  name"
	awk -F'\t' '{ printf "%-9s %-7s %7s  %s\n", $1, ($3 == 0 ? "pass" : "FAIL " $3), $4, $2 }' "$LOG/status.tsv"
} >&2
echo "suite.sh: $(awk -F'\t' '$3 != 0' "$LOG/status.tsv" | wc -l) of $(wc -l <"$LOG/status.tsv") steps failed in $((SECONDS - t0)) s; logs in $OUT/suite.tar.gz" >&2
