#!/usr/bin/env python3
"""compare_replay.py: compare `sublet replay -series` results with torch_replay.py's.

    python3 scripts/gpu/compare_replay.py ORACLE_DIR RESULT.json [RESULT.json ...]

Each RESULT.json is sublet's output for the matrix run named by its file name
(NAME.json); ORACLE_DIR/NAME.json.gz is PyTorch's result for the same run. For each run
one line: the rows (one per trace event) whose statistics are all equal, out of
PyTorch's, the first differing row, and the final memory_stats() keys that differ or
that only one side has. A last line sums the runs. Exit status 0 when every run matched
row for row, 1 otherwise (2 for bad usage). A result that is not valid JSON (the replay
failed), or that has no PyTorch result to compare with, counts as a mismatch.
"""
import gzip
import json
import os
import sys


def compare(ours, theirs):
    """Returns (equal rows, PyTorch's rows, first difference or None, differing final keys)."""
    keys = [k for k in theirs["keys"] if k in ours["keys"]]
    oi = [ours["keys"].index(k) for k in keys]
    ti = [theirs["keys"].index(k) for k in keys]
    same, first = 0, None
    ours_rows, their_rows = ours.get("series") or [], theirs["series"]
    for n, (a, b) in enumerate(zip(ours_rows, their_rows)):
        av, bv = [a[i] for i in oi], [b[i] for i in ti]
        if av == bv:
            same += 1
        elif first is None:
            k = next(k for k, x, y in zip(keys, av, bv) if x != y)
            first = f"event {n} (line {n + 1}): {k} sublet {av[keys.index(k)]} torch {bv[keys.index(k)]}"
    if first is None and len(ours_rows) != len(their_rows):
        first = f"sublet has {len(ours_rows)} rows, torch {len(their_rows)}"
    final_o, final_t = ours.get("final") or {}, theirs.get("final") or {}
    diff = sorted(k if k in final_o and k in final_t else f"{k} (only {'sublet' if k in final_o else 'torch'})"
                  for k in final_o.keys() | final_t.keys() if final_o.get(k) != final_t.get(k))
    return same, len(their_rows), first, diff


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    oracle_dir, results = argv[1], argv[2:]
    runs = matched = rows = equal = 0
    for path in results:
        name = os.path.basename(path)[: -len(".json")]
        oracle = os.path.join(oracle_dir, name + ".json.gz")
        runs += 1
        if not os.path.exists(oracle):
            print(f"{name:28s} no oracle result at {oracle}")
            continue
        with gzip.open(oracle, "rt") as f:
            theirs = json.load(f)
        rows += len(theirs["series"])
        try:
            with open(path) as f:
                ours = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{name:28s} 0/{len(theirs['series'])} rows equal; no sublet result ({e})")
            continue
        same, total, first, diff = compare(ours, theirs)
        equal += same
        ok = first is None and not diff
        matched += ok
        line = f"{name:28s} {same}/{total} rows equal"
        if first:
            line += "; first difference at " + first
        if diff:
            line += f"; final keys differing: {len(diff)} ({', '.join(diff[:4])}{', ...' if len(diff) > 4 else ''})"
        print(line)
    print(f"TOTAL: {matched} of {runs} runs identical to PyTorch row for row; {equal} of {rows} rows equal")
    return 0 if matched == runs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
