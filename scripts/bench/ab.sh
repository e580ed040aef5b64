#!/usr/bin/env bash
# ab.sh: sublet-bench of several builds (git revisions) in alternating rounds on one
# machine, for deciding whether a candidate branch is faster than main: the same call,
# the same card or host, each build's runs interleaved with the others' so that a
# drifting machine moves them alike. Two steps:
#
#   scripts/bench/ab.sh build REV...   # here, with Go: .ab/NAME.xz for each REV, .ab/revs.txt
#   bash scripts/bench/ab.sh run       # there, from the repository root, no Go;
#                                      # carry [".ab"]
#
# build checks each REV out into a temporary worktree, builds cmd/sublet-bench
# (CGO_ENABLED=0 GOOS=linux GOARCH=amd64, stripped) and packs it with xz (about 6 MB a
# build: kernels/cuda's fatbins are inside); with TESTS=PKG (a package, e.g. kernels/cuda)
# also that package's test binary, which run then runs with -test.v in the package's
# folder (a candidate kernel is merged only where its tests passed on the card). A REV's
# NAME is its branch name, or its short hash; the first REV is the base the others are
# compared with.
#
# run unpacks the builds and, ROUNDS times (default 3), runs each build's
#   sublet-bench -device DEVICE -run RUN -time TIME $ARGS
# in turn (DEVICE cuda:0, RUN ops, TIME 0.15s; GOMAXPROCS=THREADS when THREADS is set),
# then prints, per case, every round's figure of each build and the ratio of each
# build's median to the base's. Output: $OUT/ab.txt (that table) and $OUT/ab.tar.gz
# (every run's text and JSON lines, the tests' logs, the machine), two files.
# With VARIANTS (space-separated VAR=VALUE settings, e.g. "SUBLET_GEMMV=kc=256
# SUBLET_GEMMV=guided=50"), each build also runs once a round under each setting, a
# column of its own (NAME[VAR=VALUE]) after the build's plain one: settings a measurement
# branch reads from its environment, alternated as builds are. (Every build runs under
# every setting: when the branch's plain run is main's behaviour, build the branch
# alone.)
# Environment: ROUNDS, DEVICE, RUN, TIME, ARGS, THREADS, VARIANTS, CASES (a regular
# expression: only the cases it matches in the table), OUT (.ab/out), PYTHON.
set -uo pipefail

if [[ ${1:-} == build ]]; then
	set -e
	shift
	(($#)) || { echo "ab.sh build: name at least one revision" >&2; exit 2; }
	root=$(git rev-parse --show-toplevel)
	cd "$root"
	rm -rf .ab
	mkdir -p .ab
	export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
	for rev in "$@"; do
		hash=$(git rev-parse --short "$rev^{commit}")
		name=$rev
		git show-ref --verify -q "refs/heads/$rev" || name=$hash
		name=${name//\//-}
		wt=$(mktemp -d)
		git worktree add -q --detach "$wt" "$hash"
		(cd "$wt" && go build -trimpath "-ldflags=-s -w" -o "$root/.ab/$name-bench" ./cmd/sublet-bench)
		if [[ -n ${TESTS:-} ]]; then
			(cd "$wt" && go test -c -trimpath "-ldflags=-s -w" -o "$root/.ab/$name-tests" "./$TESTS")
		fi
		git worktree remove --force "$wt"
		tar -C .ab -cf - "$name-bench" $([[ -n ${TESTS:-} ]] && echo "$name-tests") | xz -T2 -6e >".ab/$name.xz"
		rm -f ".ab/$name-bench" ".ab/$name-tests"
		echo "$name $hash ${TESTS:-}" >>.ab/revs.txt
	done
	du -ch .ab/*.xz | tail -1 | awk '{print "ab.sh: .ab holds " $1 " of builds; carry [\".ab\"]"}' >&2
	exit 0
fi
if [[ ${1:-} != run ]]; then
	echo "usage: scripts/bench/ab.sh build REV... | bash scripts/bench/ab.sh run (see the top of $0)" >&2
	exit 2
fi

OUT=${OUT:-.ab/out}
ROUNDS=${ROUNDS:-3}
DEVICE=${DEVICE:-cuda:0}
RUN=${RUN:-ops}
TIME=${TIME:-0.15s}
PY=${PYTHON:-python3}
dir=.ab/work
rm -rf "$dir"
mkdir -p "$dir" "$OUT"
[[ -f .ab/revs.txt ]] || { echo "ab.sh run: no .ab/revs.txt: run 'scripts/bench/ab.sh build REV...' first and carry .ab" >&2; exit 2; }
names=()
while read -r name hash tests; do
	names+=("$name")
	[[ -x .ab/$name-bench ]] || tar -C .ab -xJf ".ab/$name.xz"
done <.ab/revs.txt
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader 2>/dev/null
	echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo)"
	cat .ab/revs.txt
	echo "sublet-bench -device $DEVICE -run $RUN -time $TIME ${ARGS:-}; GOMAXPROCS ${THREADS:-unset}; $ROUNDS rounds"
} | tee "$dir/machine.txt"
[[ $DEVICE == cuda* && -f scripts/gpu/find_cublas.sh ]] && source scripts/gpu/find_cublas.sh
while read -r name hash tests; do
	[[ -z $tests ]] && continue
	(cd "$tests" && "$OLDPWD/.ab/$name-tests" -test.v >"$OLDPWD/$dir/$name-tests.txt" 2>&1)
	echo "$name $tests tests: exit status $?, $(grep -c '^--- PASS' "$dir/$name-tests.txt") passed, $(grep -c '^--- FAIL' "$dir/$name-tests.txt") failed, $(grep -c '^--- SKIP' "$dir/$name-tests.txt") skipped" |
		tee -a "$dir/machine.txt"
done <.ab/revs.txt
# Columns: each build, then each build under each of VARIANTS; column i's files are
# $dir/col$i-ROUND.*, its label in labels.
read -r -a variants <<<"${VARIANTS:-}"
cols=() labels=() settings=()
for name in "${names[@]}"; do
	cols+=("$name") labels+=("$name") settings+=("")
	for v in "${variants[@]}"; do
		cols+=("$name") labels+=("$name[$v]") settings+=("$v")
	done
done
[[ ${#variants[@]} -gt 0 ]] && echo "variants: ${variants[*]}" | tee -a "$dir/machine.txt"
for round in $(seq "$ROUNDS"); do
	for i in "${!cols[@]}"; do
		name=${cols[$i]}
		env ${THREADS:+GOMAXPROCS=$THREADS} ${settings[$i]:+"${settings[$i]}"} ".ab/$name-bench" -device "$DEVICE" -run "$RUN" -time "$TIME" ${ARGS:-} \
			-jsonl "$dir/col$i-$round.jsonl" >"$dir/col$i-$round.txt" 2>&1 || echo "ab.sh: ${labels[$i]} round $round: exit status $?" | tee -a "$dir/machine.txt"
	done
done
"$PY" - "$dir" "$ROUNDS" "${CASES:-.}" "${labels[@]}" <<'PY' | tee "$OUT/ab.txt"
import json, os, re, statistics, sys
d, rounds, pat, names = sys.argv[1], int(sys.argv[2]), re.compile(sys.argv[3]), sys.argv[4:]
print(open(os.path.join(d, "machine.txt")).read().strip() + "\n")
fig, units, order = {}, {}, []
for i, n in enumerate(names):
    for r in range(1, rounds + 1):
        p = os.path.join(d, f"col{i}-{r}.jsonl")
        if not os.path.exists(p):
            continue
        for line in open(p):
            x = json.loads(line)
            c = x["case"]
            if not pat.search(c):
                continue
            if c not in units:
                units[c] = x["unit"]
                order.append(c)
            fig.setdefault((c, n), []).append(x["value"])
head = ["case", "unit"] + names + [f"{n} / {names[0]}" for n in names[1:]]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for c in order:
    runs = [fig.get((c, n), []) for n in names]
    med = [statistics.median(v) if v else None for v in runs]
    cells = [", ".join(f"{v:.4g}" for v in r) or "-" for r in runs]
    ratios = [f"{m / med[0]:.3f}" if m and med[0] else "-" for m in med[1:]]
    print("| " + " | ".join([c, units[c]] + cells + ratios) + " |")
PY
tar -C .ab -czf "$OUT/ab.tar.gz" work
