#!/usr/bin/env bash
# ddp_scaling.sh: data-parallel training on two GPUs, sublet against PyTorch DDP in the
# same call. Run on a machine with 2 or more GPUs, from the repository root, after
# building here (carry [".gpu"]); python3 with torch there:
#
#   GPU_PKGS="dist dist/nccl device/cuda" scripts/gpu/build.sh   # here: the dist tests too
#   bash scripts/gpu/ddp_scaling.sh                                # there
#
# (the default GPU_PKGS with the dist tests added would pass the 64 MiB carry limit).
# With .gpu/tests.txt listing them, a first step runs the dist and dist/nccl test
# binaries (their GPU tests: NCCL world of one, two ranks on two GPUs, DataParallel
# through NCCL in two processes).
#
# Steps, each logged, none stopping the others:
#   equal:   examples/ddp on cuda (NCCL), the spirals MLP: one process with -batch 32
#            against `sublet run -nproc 2` with -batch 16 each; the checksums of the two
#            ranks must be equal, and the parameters within 1e-5 of the one process's
#   scaling: the wide MLP of torch_train.py (4096-4096x4-10, Adam, batch 4096 per GPU)
#            on 1 and then 2 GPUs: sublet (`sublet run -nproc N ddp -bench STEPS`) and
#            PyTorch DDP (`torchrun --nproc-per-node N torch_ddp.py`), alternating; the
#            efficiency is samples/s on 2 GPUs over twice samples/s on 1
# Output: $OUT/ddp_scaling.txt (the table) and $OUT/ddp_scaling.tar.gz (every log).
# Knobs: STEPS (100), PYTHON (python3), OUT (.gpu/out), STEP_TIMEOUT (600 s per run).
# NCCL_NVLS_ENABLE=0 in every process it starts (NVLink SHARP stays off).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
PY=${PYTHON:-python3}
STEPS=${STEPS:-100}
OUT=${OUT:-.gpu/out}
STEP_TIMEOUT=${STEP_TIMEOUT:-600}
LOG=.gpu/ddp_scaling
[[ -x .gpu/bin/sublet && -x .gpu/bin/ddp ]] ||
	{ echo "ddp_scaling.sh: .gpu/bin/{sublet,ddp} missing: run scripts/gpu/build.sh and carry .gpu" >&2; exit 1; }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
((gpus >= 2)) || { echo "ddp_scaling.sh: needs 2 GPUs, nvidia-smi lists $gpus" >&2; exit 1; }
rm -rf "$LOG"
mkdir -p "$LOG" "$OUT"
{ date -u; nvidia-smi; nvidia-smi topo -m; "$PY" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } >"$LOG/env.txt" 2>&1
status=0
run() { # run NAME COMMAND...: log to $LOG/NAME.log, note a failure
	local name=$1
	shift
	echo "== $name: $*" | tee -a "$LOG/steps.txt"
	timeout "$STEP_TIMEOUT" "$@" >"$LOG/$name.log" 2>&1
	local rc=$?
	echo "   exit $rc" | tee -a "$LOG/steps.txt"
	((rc == 0)) || status=1
}

# tests: the dist and dist/nccl test binaries, in their package folders
if [[ -f .gpu/tests.txt ]]; then
	while read -r dir bin; do
		case "$dir" in dist | dist/nccl) ;; *) continue ;; esac
		run "tests-${dir//\//_}" bash -c "cd '$dir' && '$PWD/$bin' -test.v -test.timeout 300s"
	done <.gpu/tests.txt
fi

# equal
small=(-device cuda -samples 600 -epochs 3 -hidden 32,32 -first-bucket-mb 0.001)
run equal-1 .gpu/bin/ddp "${small[@]}" -batch 32 -save "$LOG/one.bin"
run equal-2 .gpu/bin/sublet run -nproc 2 .gpu/bin/ddp "${small[@]}" -batch 16 -save "$LOG/two.bin"
"$PY" - "$LOG" >"$LOG/equal.txt" 2>&1 <<'PY' || status=1
import re, struct, sys
d = sys.argv[1]
sums = set(re.findall(r"fnv64 ([0-9a-f]{16})", open(d + "/equal-2.log").read()))
read = lambda p: struct.unpack("<%df" % (len(open(p, "rb").read()) // 4), open(p, "rb").read())
one, two = read(d + "/one.bin"), read(d + "/two.bin")
diff = max(abs(a - b) for a, b in zip(one, two))
print(f"2 ranks on cuda: {len(sums)} distinct checksum(s) over the ranks; max |2 ranks - 1 process| = {diff:.3g} over {len(one)} parameters")
sys.exit(0 if len(sums) == 1 and len(one) == len(two) and diff <= 1e-5 else 1)
PY

# scaling
wide=(-device cuda -bench "$STEPS" -features 4096 -hidden 4096,4096,4096,4096 -classes 10 -batch 4096 -optimizer adam -lr 0.001)
for n in 1 2; do
	run "sublet-$n" .gpu/bin/sublet run -nproc "$n" -timeout 10m .gpu/bin/ddp "${wide[@]}"
	run "torch-$n" "$PY" -m torch.distributed.run --standalone --nproc-per-node "$n" scripts/gpu/torch_ddp.py --steps "$STEPS"
done
samples() { sed -n "s/.*bench: rank 0 of $2,.* \([0-9]*\) samples\/s in all.*/\1/p" "$LOG/$1.log" | head -1; }
{
	echo "wide MLP 4096-4096x4-10, Adam, batch 4096 per GPU, $STEPS steps after 10 warm-up ($(date -u +%F))"
	printf "%-8s %14s %14s %11s\n" "" "1 GPU (sam/s)" "2 GPUs (sam/s)" "efficiency"
	for who in sublet torch; do
		s1=$(samples "$who-1" 1)
		s2=$(samples "$who-2" 2)
		eff=$(awk -v a="$s1" -v b="$s2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", b / (2 * a); else print "-" }')
		printf "%-8s %14s %14s %11s\n" "$who" "${s1:--}" "${s2:--}" "$eff"
	done
	cat "$LOG/equal.txt"
} | tee "$OUT/ddp_scaling.txt"
tar -czf "$OUT/ddp_scaling.tar.gz" -C .gpu ddp_scaling
exit $status
