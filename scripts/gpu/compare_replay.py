#!/usr/bin/env python3
"""compare_replay.py: compare `sublet replay -series` results with torch_replay.py's.

    python3 scripts/gpu/compare_replay.py [--matrix FILE] ORACLE_DIR RESULT.json [RESULT.json ...]

Each RESULT.json is sublet's output for the matrix run named by its file name
(NAME.json); ORACLE_DIR/NAME.json.gz is PyTorch's result for the same run. For each run
one line: the rows (one per trace event) whose statistics are all equal, out of
PyTorch's, the first differing row, and the final memory_stats() keys that differ or
that only one side has. A last line sums the runs. Exit status 0 when every comparable
run matched row for row, 1 otherwise (2 for bad usage). A result that is not valid JSON
(the replay failed), or that has no PyTorch result to compare with, counts as a
mismatch.

Runs the matrix (--matrix, default testdata/traces/matrix.json) marks "alone" depend on
the card's memory: a memory fraction of it, a garbage-collection threshold of that, or
running out of it. Each side records the card's total memory (total_capacity); where
they differ (an oracle recorded on an H200, a replay on an H100) such a run is compared
with ORACLE_DIR/cards/TOTAL/NAME.json.gz, PyTorch's result on a card of this card's
total memory (TOTAL bytes), where the repository holds one (scripts/gpu/suite.sh
--oracle records them); without one it cannot match, and is reported as not comparable
on this card instead of compared. Every other run must match on any card.
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


def card_dependent(matrix):
    """The names of the runs that depend on the card's memory (matrix "alone")."""
    with open(matrix) as f:
        return {r["name"] for r in json.load(f)["runs"] if r.get("alone")}


def main(argv):
    matrix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "traces", "matrix.json")
    if len(argv) > 2 and argv[1] == "--matrix":
        matrix, argv = argv[2], argv[:1] + argv[3:]
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    oracle_dir, results = argv[1], argv[2:]
    dependent = card_dependent(matrix)
    runs = matched = rows = equal = 0
    other_card = []
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
        if name in dependent and ours.get("total_capacity") != theirs.get("total_capacity"):
            card = os.path.join(oracle_dir, "cards", str(ours.get("total_capacity")), name + ".json.gz")
            if os.path.exists(card):
                rows -= len(theirs["series"])
                with gzip.open(card, "rt") as f:
                    theirs = json.load(f)
                rows += len(theirs["series"])
        if name in dependent and ours.get("total_capacity") != theirs.get("total_capacity"):
            runs -= 1
            rows -= len(theirs["series"])
            other_card.append(name)
            print(f"{name:28s} not comparable on this card: it depends on the card's memory, "
                  f"{ours.get('total_capacity')} bytes here, {theirs.get('total_capacity')} where the oracle was recorded")
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
    line = f"TOTAL: {matched} of {runs} runs identical to PyTorch row for row; {equal} of {rows} rows equal"
    if other_card:
        line += f"; {len(other_card)} runs that depend on the card's memory not comparable on this card (an oracle of this card's: scripts/gpu/suite.sh --oracle)"
    print(line)
    return 0 if matched == runs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
