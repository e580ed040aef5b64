#!/usr/bin/env bash
# oracle.sh: replay every run of testdata/traces/matrix.json through PyTorch's CUDA
# caching allocator and pack the results into ONE tarball under $OUT.
#
# Runs ON the GPU machine, from the repository root. Needs python3 with torch (not in a
# dry run), the bench scripts in .gpu/bench/torch/ (copy /work/shared/bench to .gpu/bench
# first, e.g. with scripts/gpu/build.sh) and the traces in testdata/traces/.
#
#   scripts/gpu/oracle.sh [--dry-run] [--jobs N] [--only REGEX]
#
#   --dry-run   do everything but start python: each run's log gets the command it would
#               run; no result files are written (tests the plan and the packing).
#   --jobs N    runs at once in the shared phase (default 6). Runs marked "alone" in the
#               matrix (a memory fraction, or the device's real limit) and the
#               torch_segment_addresses.py runs go one at a time afterwards, with nothing
#               else on the GPU, because other processes' memory would change them.
#   --only RE   only runs whose name matches the extended regex RE (and addresses only
#               for traces whose name matches it).
#
# Environment: PYTHON (default python3), BENCH (default .gpu/bench/torch),
# PER_RUN_TIMEOUT seconds (default 300), OUT.
#
# Output: $OUT/oracle.tar.gz (default $OUT = .gpu/out) holding
#   oracle/NAME.json.gz     torch_replay.py's result for run NAME
#   logs/NAME.log           its stdout+stderr (one summary line when it succeeds)
#   addresses/TRACE.txt     torch_segment_addresses.py's output for traces marked "addresses"
#   status.tsv              name, exit status, seconds, phase; one line per run
#   env.txt, matrix.json    torch/driver versions and the matrix that was run
# Unpack it on the dev machine with scripts/oracle_unpack.sh.
set -euo pipefail

DRY=0
JOBS=6
ONLY=""
while (($#)); do
	case "$1" in
	--dry-run) DRY=1 ;;
	--jobs) JOBS="$2"; shift ;;
	--only) ONLY="$2"; shift ;;
	*) echo "oracle.sh: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
	esac
	shift
done

MATRIX=testdata/traces/matrix.json
BENCH=${BENCH:-.gpu/bench/torch}
PY=${PYTHON:-python3}
OUT=${OUT:-.gpu/out}
WORK=.gpu/oracle-work
TRACES=.gpu/traces
PER_RUN_TIMEOUT=${PER_RUN_TIMEOUT:-300}

[[ -f $MATRIX ]] || { echo "oracle.sh: $MATRIX not found: run from the repository root" >&2; exit 1; }
if ((!DRY)); then
	for f in torch_replay.py torch_segment_addresses.py; do
		[[ -f $BENCH/$f ]] || { echo "oracle.sh: $BENCH/$f missing: copy /work/shared/bench to .gpu/bench" >&2; exit 1; }
	done
fi

rm -rf "$WORK" "$TRACES"
mkdir -p "$WORK/oracle" "$WORK/logs" "$WORK/addresses" "$TRACES" "$OUT"
: >"$WORK/status.tsv"

# The matrix as lines of fields separated by \x1f (a tab would not do: read collapses
# runs of whitespace separators, and conf is often empty): run name, trace, conf,
# fraction, alone (0/1). python3 reads the JSON.
SEP=$'\x1f'
"$PY" - "$MATRIX" "$ONLY" >"$WORK/plan.txt" 3>"$WORK/addresses.txt" <<'EOF'
import json, os, re, sys
m = json.load(open(sys.argv[1]))
only = re.compile(sys.argv[2]) if sys.argv[2] else None
for r in m["runs"]:
    if only and not only.search(r["name"]):
        continue
    for v in (r["name"], r["trace"], r["conf"]):
        assert "\x1f" not in v and "\n" not in v, r["name"]
    print("\x1f".join([r["name"], r["trace"], r["conf"], repr(float(r["fraction"])), "1" if r["alone"] else "0"]))
with os.fdopen(3, "w") as f:
    for t in m["traces"]:
        if t.get("addresses") and (not only or only.search(t["name"])):
            print(t["name"], file=f)
EOF

# torch_replay.py reads plain JSONL.
for gz in testdata/traces/*.jsonl.gz; do
	name=$(basename "$gz" .gz)
	gzip -dc "$gz" >"$TRACES/$name"
done

# run_one NAME TRACE CONF FRACTION PHASE: one torch_replay.py process; never fails the
# script, its status lands in status.tsv.
run_one() {
	local name=$1 trace=$2 conf=$3 frac=$4 phase=$5
	local out=$WORK/oracle/$name.json.gz log=$WORK/logs/$name.log start=$SECONDS rc=0
	local cmd=("$PY" "$BENCH/torch_replay.py" "$TRACES/$trace.jsonl" "$conf" "$frac" "$out")
	if ((DRY)); then
		printf 'dry run:' >"$log"
		printf ' %q' "${cmd[@]}" >>"$log"
		echo >>"$log"
	else
		timeout "$PER_RUN_TIMEOUT" "${cmd[@]}" >"$log" 2>&1 || rc=$?
	fi
	printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" "$phase" >>"$WORK/status.tsv"
	if ((rc != 0)); then
		echo "oracle.sh: run $name failed with status $rc; tail of its log:" >&2
		tail -n 5 "$log" >&2
	fi
}

t0=$SECONDS
running=0
while IFS=$SEP read -r name trace conf frac alone; do
	[[ $alone == 1 ]] && continue
	run_one "$name" "$trace" "$conf" "$frac" shared &
	running=$((running + 1))
	if ((running >= JOBS)); then
		wait -n || true
		running=$((running - 1))
	fi
done <"$WORK/plan.txt"
wait
echo "oracle.sh: shared phase done in $((SECONDS - t0)) s" >&2

t1=$SECONDS
while IFS=$SEP read -r name trace conf frac alone; do
	[[ $alone == 1 ]] || continue
	run_one "$name" "$trace" "$conf" "$frac" alone
done <"$WORK/plan.txt"
echo "oracle.sh: alone phase done in $((SECONDS - t1)) s" >&2

while read -r trace; do
	log=$WORK/addresses/$trace.txt
	if ((DRY)); then
		echo "dry run: $PY $BENCH/torch_segment_addresses.py $TRACES/$trace.jsonl" >"$log"
	else
		timeout "$PER_RUN_TIMEOUT" "$PY" "$BENCH/torch_segment_addresses.py" "$TRACES/$trace.jsonl" >"$log" 2>&1 ||
			echo "oracle.sh: torch_segment_addresses.py $trace failed with status $?" | tee -a "$log" >&2
	fi
done <"$WORK/addresses.txt"

{
	echo "date: $(date -u +%FT%TZ)  dry_run: $DRY  jobs: $JOBS  total_s: $((SECONDS - t0))"
	if ((!DRY)); then
		"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1 || true
		nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 || true
	fi
} >"$WORK/env.txt"
cp "$MATRIX" "$WORK/matrix.json"

tar -czf "$OUT/oracle.tar.gz" -C "$WORK" oracle logs addresses status.tsv env.txt matrix.json
failed=$(awk -F'\t' '$2 != 0' "$WORK/status.tsv" | wc -l)
echo "oracle.sh: $(wc -l <"$WORK/status.tsv") runs, $failed failed, $(du -h "$OUT/oracle.tar.gz" | cut -f1) in $OUT/oracle.tar.gz, $((SECONDS - t0)) s" >&2
