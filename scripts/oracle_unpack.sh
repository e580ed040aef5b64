#!/usr/bin/env bash
# oracle_unpack.sh: put the results of a GPU oracle run (the oracle.tar.gz that
# scripts/gpu/oracle.sh leaves in $OUT) into testdata/oracle/, checking each one first.
#
#   scripts/oracle_unpack.sh PATH/TO/oracle.tar.gz
#
# Run from the repository root. A result is copied to testdata/oracle/NAME.json.gz only
# if NAME is a run of testdata/traces/matrix.json and the result's trace, conf and
# fraction are that run's and its series has one row per line of the trace; anything
# else is reported and left out (exit status 1). Also copied: addresses/TRACE.txt
# (torch_segment_addresses.py output), status.tsv and env.txt. Runs of the matrix that
# the tarball lacks, and runs that failed on the GPU, are listed at the end.
# Afterwards: go test ./alloc/replay/ runs the golden tests against the new results.
set -euo pipefail
[[ $# == 1 && -f $1 ]] || { echo "usage: $0 oracle.tar.gz (see the top of $0)" >&2; exit 2; }
TARBALL=$1
MATRIX=testdata/traces/matrix.json
DEST=testdata/oracle
[[ -f $MATRIX ]] || { echo "oracle_unpack.sh: $MATRIX not found: run from the repository root" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$TARBALL" -C "$tmp"
mkdir -p "$DEST/addresses"

python3 - "$MATRIX" "$tmp" "$DEST" <<'PY'
import glob, gzip, json, os, shutil, sys
matrix, src, dest = sys.argv[1:]
m = json.load(open(matrix))
runs = {r["name"]: r for r in m["runs"]}
tracedir = os.path.dirname(matrix)
lines = {}
bad = 0
got = set()
for path in sorted(glob.glob(os.path.join(src, "oracle", "*.json.gz"))):
    name = os.path.basename(path)[:-len(".json.gz")]
    problem = None
    try:
        res = json.load(gzip.open(path, "rt"))
    except Exception as e:
        problem = f"unreadable: {e}"
    if problem is None and name not in runs:
        problem = "not a run of the matrix"
    if problem is None:
        r = runs[name]
        if r["trace"] not in lines:
            with gzip.open(os.path.join(tracedir, r["trace"] + ".jsonl.gz"), "rt") as f:
                lines[r["trace"]] = sum(1 for _ in f)
        want = {"trace": r["trace"] + ".jsonl", "conf": r["conf"], "fraction": float(r["fraction"])}
        have = {k: res.get(k) for k in want}
        if have != want:
            problem = f"result is for {have}, the matrix says {want}"
        elif len(res.get("series", [])) != lines[r["trace"]]:
            problem = f"{len(res.get('series', []))} rows for a trace of {lines[r['trace']]} lines"
        elif not all(k in res for k in ("keys", "final", "segments", "total_capacity", "free_at_start")):
            problem = "missing keys, segments, final, total_capacity or free_at_start"
    if problem:
        print(f"oracle_unpack.sh: {name}: {problem}; left out", file=sys.stderr)
        bad += 1
        continue
    shutil.copyfile(path, os.path.join(dest, name + ".json.gz"))
    got.add(name)
    f = res["final"]
    print(f"{name:28s} rows={len(res['series']):6d} segments={len(res['segments']):5d} ooms={f.get('num_ooms', 0)} retries={f.get('num_alloc_retries', 0)} peak_reserved={f.get('reserved_bytes.all.peak', 0)}")
for p in glob.glob(os.path.join(src, "addresses", "*.txt")):
    shutil.copyfile(p, os.path.join(dest, "addresses", os.path.basename(p)))
for p in ("status.tsv", "env.txt"):
    if os.path.exists(os.path.join(src, p)):
        shutil.copyfile(os.path.join(src, p), os.path.join(dest, p))
status = os.path.join(src, "status.tsv")
if os.path.exists(status):
    for line in open(status):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 2 and f[1] != "0":
            print(f"oracle_unpack.sh: run {f[0]} failed on the GPU (status {f[1]}); see its log in the tarball", file=sys.stderr)
missing = sorted(set(runs) - got)
if missing:
    print(f"oracle_unpack.sh: no result for {len(missing)} runs: {' '.join(missing)}", file=sys.stderr)
print(f"oracle_unpack.sh: {len(got)} results in {dest}, {bad} left out", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
