#!/usr/bin/env bash
# smallop_instructions.sh: the instructions a small op executes on this machine
# (BenchmarkSmallOp of package tensor: a 1k-element float32 Add in a no-grad scope, 100
# an op per scope), counted by callgrind, which unlike a timer gives the same figure on
# a busy machine to within about ±60 instructions (the collector's share moves).
#
#   scripts/bench/smallop_instructions.sh [TEST_BINARY]
#
# Without an argument it builds the tensor package's test binary from the working tree.
# It prints the instructions per op inside tensor.binaryOp (the op), inside
# Scope.Close (its share of releasing the result), and their sum, each the inclusive
# count over N ops (default 50000) divided by N. Needs valgrind (Debian: valgrind) and
# python3.
set -euo pipefail
N=${N:-50000}
bin=${1:-}
if [[ -z $bin ]]; then
	bin=$(mktemp -d)/tensor.test
	go test -c -o "$bin" "$(git rev-parse --show-toplevel)/tensor"
fi
out=$(mktemp)
GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" \
	-test.run '^$' -test.bench 'SmallOp$' -test.benchtime "${N}x" -test.cpu 1 >/dev/null 2>&1
callgrind_annotate --inclusive=yes "$out" | python3 -c '
import re, sys
n = int(sys.argv[1]) + 1  # the benchmark runs once before the N ops
want = {"github.com/subletml/sublet/tensor.binaryOp": "op", "github.com/subletml/sublet/tensor.(*Scope).Close": "close"}
got = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\S+:(\S+)", line)
    if m and m.group(2) in want:
        k = want[m.group(2)]
        got[k] = max(got.get(k, 0), int(m.group(1).replace(",", "")))
op, close = got.get("op", 0) // n, got.get("close", 0) // n
print(f"instructions per op: {op} in the op, {close} in its share of Close, {op + close} in all")
' "$N"
rm -f "$out"
