#!/usr/bin/env bash
# suite.sh: everything sublet checks on the GPU machine, in one call. Run there from the
# repository root, after scripts/gpu/build.sh has filled .gpu/ here (carry [".gpu"]).
# Needs no Go there; python3 + torch only for the oracle and the comparisons.
#
#   scripts/gpu/suite.sh [--no-tests] [--no-bench] [--no-oracle] [--no-replay]
#
# Steps, each logged, none stopping the others:
#   1. tests:  every test binary of .gpu/tests.txt with -test.v, in its package folder
#   2. bench:  benchmarks (-test.bench .) of the test binaries of BENCH_PKGS
#              (default "alloc"), -test.benchtime BENCHTIME (default 1s)
#   3. oracle: scripts/gpu/oracle.sh (PyTorch on every matrix run) -> $OUT/oracle.tar.gz
#   4. replay: .gpu/bin/sublet replay -device cuda:0 -series on every matrix run, one at
#              a time, each compared row by row with the oracle result (this call's if
#              step 3 ran, else testdata/oracle/NAME.json.gz)
# Output: $OUT/suite.tar.gz (logs: env.txt, status.tsv, tests/, bench/, replay/) and,
# with step 3, $OUT/oracle.tar.gz. Each step's time limit: STEP_TIMEOUT seconds (300).
set -uo pipefail

steps="tests bench oracle replay"
while (($#)); do
	case "$1" in
	--no-tests | --no-bench | --no-oracle | --no-replay) steps=${steps/${1#--no-}/} ;;
	*) echo "suite.sh: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
	esac
	shift
done
has() { [[ " $steps " == *" $1 "* ]]; }

ROOT=$PWD
OUT=${OUT:-.gpu/out}
LOG=.gpu/suite
PY=${PYTHON:-python3}
BENCH_PKGS=${BENCH_PKGS:-alloc}
BENCHTIME=${BENCHTIME:-1s}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
[[ -x .gpu/bin/sublet && -f .gpu/tests.txt ]] || { echo "suite.sh: .gpu/ not built: run scripts/gpu/build.sh on the dev machine and carry .gpu" >&2; exit 1; }
rm -rf "$LOG"
mkdir -p "$LOG/tests" "$LOG/bench" "$LOG/replay" "$OUT"
: >"$LOG/status.tsv"

# status STEP NAME RC SECONDS: one line of status.tsv, echoed to stderr.
status() { printf '%s\t%s\t%s\t%s\n' "$@" | tee -a "$LOG/status.tsv" >&2; }

{
	date -u +%FT%TZ
	uname -a
	nvidia-smi 2>&1
	"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$LOG/env.txt"

if has tests; then
	while read -r dir bin; do
		t=$SECONDS
		(cd "$dir" && timeout "$STEP_TIMEOUT" "$ROOT/$bin" -test.v -test.count=1) >"$LOG/tests/$(basename "$bin").log" 2>&1
		status tests "$dir" $? $((SECONDS - t))
	done <.gpu/tests.txt
fi

if has bench; then
	for pkg in $BENCH_PKGS; do
		bin=.gpu/bin/${pkg//\//_}.test
		[[ -x $bin ]] || { status bench "$pkg" missing 0; continue; }
		t=$SECONDS
		(cd "$pkg" && timeout "$STEP_TIMEOUT" "$ROOT/$bin" -test.run '^$' -test.bench . -test.benchmem -test.benchtime "$BENCHTIME") >"$LOG/bench/${pkg//\//_}.log" 2>&1
		status bench "$pkg" $? $((SECONDS - t))
	done
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
			-fraction "$frac" -device cuda:0 -series >"$LOG/replay/$name.json" 2>"$LOG/replay/$name.err"
		rc=$?
		if ((rc == 0)) && [[ -f $oracle_dir/$name.json.gz ]]; then
			"$PY" - "$LOG/replay/$name.json" "$oracle_dir/$name.json.gz" >>"$LOG/replay/compare.txt" 2>&1 <<'EOF'
import gzip, json, os, sys
ours, theirs = json.load(open(sys.argv[1])), json.load(gzip.open(sys.argv[2], "rt"))
keys = [k for k in theirs["keys"] if k in ours["keys"]]
oi, ti = [ours["keys"].index(k) for k in keys], [theirs["keys"].index(k) for k in keys]
same, first = 0, None
for n, (a, b) in enumerate(zip(ours["series"], theirs["series"])):
    av, bv = [a[i] for i in oi], [b[i] for i in ti]
    if av == bv:
        same += 1
    elif first is None:
        d = [k for k, x, y in zip(keys, av, bv) if x != y][0]
        first = f"first difference at event {n} (line {n + 1}): {d} sublet {av[keys.index(d)]} torch {bv[keys.index(d)]}"
name = os.path.basename(sys.argv[1])[:-5]
print(f"{name:28s} {same}/{len(theirs['series'])} rows equal{'; ' + first if first else ''}")
EOF
		fi
		status replay "$name" $rc $((SECONDS - t))
	done <"$LOG/replay/plan.txt"
fi

tar -czf "$OUT/suite.tar.gz" -C .gpu suite
echo "suite.sh: $(awk -F'\t' '$3 != 0' "$LOG/status.tsv" | wc -l) of $(wc -l <"$LOG/status.tsv") steps failed; logs in $OUT/suite.tar.gz" >&2
