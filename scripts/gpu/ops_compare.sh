#!/usr/bin/env bash
# ops_compare.sh: GPU kernel families, sublet against PyTorch, in one call on the GPU
# machine (issue 18: elementwise, cast and reduction kernels against the card's memory
# bandwidth). Run there from the repository root after scripts/gpu/build.sh has filled
# .gpu/ here (carry [".gpu/bin.tar.xz", ".gpu/bench", ".gpu/tests.txt"]); needs python3
# + torch there, no Go.
#
#   bash scripts/gpu/ops_compare.sh
#
# Runs `sublet-bench -device cuda:0 -run ops` and `scripts/bench/torch_ops.py --device
# cuda` (the same cases, names and units: copy, add, add-bias, mul, relu, relu-backward,
# gelu-tanh, the sums, max, softmax, log-softmax, cross-entropy, layernorm and transpose
# in f32, f16 and bf16 over 64M elements; four casts; products at 4096; add-1k), TIME
# seconds a case on each side (62 cases: 2 x 62 x TIME seconds and the set-up, under
# 2 minutes is what the default TIME aims at), then joins them (scripts/bench/ops_table.py) into one
# table: both figures, their ratio, and each GB/s figure as a percentage of the best
# copy of the run and of the card's peak (2 x memory clock x bus width from the CUDA
# driver). Output: $OUT/ops-table.md (the table) and $OUT/ops.tar.gz (ops/: machine.txt,
# both sides' JSON lines and text, table.md), two files, since the device tool brings
# back 8 files at most; the folder itself is written under WORK.
# Environment: TIME (seconds a case, default 0.5), OUT (.gpu/out), WORK (.gpu/work),
# PYTHON.
set -uo pipefail
OUT=${OUT:-.gpu/out}
TIME=${TIME:-0.5}
PY=${PYTHON:-python3}
if [[ -f .gpu/bin.tar.xz && ! -x .gpu/bin/sublet-bench ]]; then
	tar -C .gpu -xJf .gpu/bin.tar.xz
fi
WORK=${WORK:-.gpu/work}
dir=$WORK/ops
rm -rf "$dir"
mkdir -p "$dir" "$OUT"
source scripts/gpu/find_cublas.sh
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader
	"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} 2>&1 | tee "$dir/machine.txt"
.gpu/bin/sublet-bench -device cuda:0 -run ops -time "${TIME}s" -jsonl "$dir/sublet.jsonl" 2>&1 | tee "$dir/sublet.txt"
PYTHONUNBUFFERED=1 "$PY" scripts/bench/torch_ops.py --device cuda --time "$TIME" --jsonl "$dir/torch.jsonl" 2>&1 |
	tee "$dir/torch.txt"
"$PY" scripts/bench/ops_table.py "$dir/sublet.jsonl" "$dir/torch.jsonl" | tee "$dir/table.md"
tar -czf "$OUT/ops.tar.gz" -C "$WORK" ops
cp "$dir/table.md" "$OUT/ops-table.md"
