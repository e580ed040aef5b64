#!/usr/bin/env bash
# train_compare.sh: GPU training, sublet against PyTorch eager, in one call on the GPU
# machine (issue 18's table). Run there from the repository root after
# scripts/gpu/build.sh has filled .gpu/ here (carry [".gpu/bin.tar.xz", ".gpu/bench",
# ".gpu/tests.txt"]); needs python3 + torch there, no Go.
#
#   bash scripts/gpu/train_compare.sh
#
# For each upload mode (resident: the batch on the device before the timing; each-step:
# copied from host memory every step, PyTorch from pinned memory with non_blocking=True)
# it runs sublet-bench -run train and scripts/bench/torch_train.py on the same cases,
# alternating, TIME seconds each (default 2); with the batch resident each side also
# profiles 3 steps (sublet: the per-op table with device times and a Perfetto trace;
# PyTorch: torch.profiler's table). Output: $OUT/train-table.md (steps/s of both sides
# and their ratio, per case and mode) and $OUT/train.tar.gz (train/: the JSON lines of
# every run, table.md, profile/), two files, since the device tool brings back 8 files
# at most; the folder itself is written under WORK (.gpu/work).
# Also a CPU profile of sublet's host side on the smallest case (PPROF_CASE, tiny-adam;
# empty for none), train/host.pprof, for `go tool pprof .gpu/bin/sublet-bench`.
# Each mode also times GRAPH_CASES (tiny-sgd,tiny-adam,deep4096-sgd; empty for none) with one step
# captured as a CUDA graph and replayed (sublet-bench -graph, torch_train.py --graph):
# the cases named NAME-graph.
# Environment: CASES (gpu: the issue's set), TIME, UPLOADS ("resident each-step"),
# GRAPH_CASES.
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-.gpu/out}
CASES=${CASES:-gpu}
TIME=${TIME:-2}
UPLOADS=${UPLOADS:-"resident each-step"}
PPROF_CASE=${PPROF_CASE-tiny-adam}
GRAPH_CASES=${GRAPH_CASES-tiny-sgd,tiny-adam,deep4096-sgd}
PY=${PYTHON:-python3}
if [[ -f .gpu/bin.tar.xz && ! -x .gpu/bin/sublet-bench ]]; then
	tar -C .gpu -xJf .gpu/bin.tar.xz
fi
WORK=${WORK:-.gpu/work}
dir=$WORK/train
rm -rf "$dir"
mkdir -p "$dir/profile" "$OUT"
source scripts/gpu/find_cublas.sh
for upload in $UPLOADS; do
	prof=()
	tprof=()
	if [[ $upload == resident ]]; then
		prof=(-profile "$dir/profile")
		tprof=(--profile "$dir/profile")
	fi
	.gpu/bin/sublet-bench -device cuda:0 -run train -cases "$CASES" -time "${TIME}s" -upload "$upload" "${prof[@]}" \
		-jsonl "$dir/sublet-$upload.jsonl" 2>&1 | tee "$dir/sublet-$upload.txt"
	PYTHONUNBUFFERED=1 "$PY" scripts/bench/torch_train.py --device cuda --cases "$CASES" --time "$TIME" --upload "$upload" \
		"${tprof[@]}" --jsonl "$dir/torch-$upload.jsonl" 2>&1 | tee "$dir/torch-$upload.txt"
	if [[ -n $GRAPH_CASES ]]; then
		.gpu/bin/sublet-bench -device cuda:0 -run train -cases "$GRAPH_CASES" -time "${TIME}s" -upload "$upload" -graph \
			-jsonl "$dir/sublet-$upload-graph.jsonl" 2>&1 | tee "$dir/sublet-$upload-graph.txt"
		PYTHONUNBUFFERED=1 "$PY" scripts/bench/torch_train.py --device cuda --cases "$GRAPH_CASES" --time "$TIME" --upload "$upload" \
			--graph --jsonl "$dir/torch-$upload-graph.jsonl" 2>&1 | tee "$dir/torch-$upload-graph.txt"
	fi
done
if [[ -n $PPROF_CASE ]]; then
	.gpu/bin/sublet-bench -device cuda:0 -run train -cases "$PPROF_CASE" -time 3s -cpuprofile "$dir/host.pprof" >"$dir/host.txt" 2>&1
fi
"$PY" - "$dir" $UPLOADS <<'PY' | tee "$dir/table.md"
import json, os, sys
d, uploads = sys.argv[1], sys.argv[2:]
def load(p):
    out = {}
    for q in (p, p.replace(".jsonl", "-graph.jsonl")):
        if os.path.exists(q):
            for line in open(q):
                r = json.loads(line)
                out[r["case"]] = r["value"]
    return out
print("| case | batch | PyTorch steps/s | sublet steps/s | sublet / PyTorch |")
print("|---|---|---|---|---|")
for up in uploads:
    s, t = load(os.path.join(d, "sublet-%s.jsonl" % up)), load(os.path.join(d, "torch-%s.jsonl" % up))
    for case in t:
        if case in s:
            print("| %s | %s | %.4g | %.4g | %.2fx |" % (case, up, t[case], s[case], s[case] / t[case]))
PY
tar -czf "$OUT/train.tar.gz" -C "$WORK" train
cp "$dir/table.md" "$OUT/train-table.md"
