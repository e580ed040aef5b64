#!/usr/bin/env python3
"""Join sublet-bench's and torch_ops.py's ops figures into one markdown table.

    python3 scripts/bench/ops_table.py [--peak auto|none|GBPS] SUBLET.jsonl TORCH.jsonl

A row per case (sublet's order, then cases only PyTorch ran): both figures and their
ratio (sublet / PyTorch; PyTorch / sublet for µs/op, so above 1 is sublet ahead either
way). Each GB/s figure is also given as a percentage of the copy reference, the best
copy-* figure of either side in these files (a contiguous clone: the bandwidth a kernel
can practically reach), and of the card's peak: --peak GBPS, or --peak auto (the
default) for 2 x memory clock x bus width as the CUDA driver reports them
(cuDeviceGetAttribute through libcuda.so.1, device 0), or none. Needs no PyTorch.
"""
import argparse, ctypes, json, os, sys


def load(path):
    rows = {}
    if not os.path.exists(path):
        print("ops_table.py: %s is missing: its side is left empty" % path, file=sys.stderr)
        return rows
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            rows[r["case"]] = r
    return rows


def driver_peak():
    """The peak memory bandwidth of device 0 in GB/s and the card's name, or (None, why)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return None, "no CUDA driver (%s)" % e
    dev, clock, width = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    for call in (lambda: cu.cuInit(0), lambda: cu.cuDeviceGet(ctypes.byref(dev), 0),
                 lambda: cu.cuDeviceGetName(name, len(name), dev),
                 # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (kHz), _GLOBAL_MEMORY_BUS_WIDTH (bits)
                 lambda: cu.cuDeviceGetAttribute(ctypes.byref(clock), 36, dev),
                 lambda: cu.cuDeviceGetAttribute(ctypes.byref(width), 37, dev)):
        rc = call()
        if rc != 0:
            return None, "the CUDA driver answered %d" % rc
    if clock.value <= 0 or width.value <= 0:
        return None, "the driver gives no memory clock or bus width"
    peak = 2 * clock.value * 1e3 * width.value / 8 / 1e9
    return peak, "%s: 2 x %d MHz x %d bits, from the CUDA driver" % (
        name.value.decode(errors="replace"), clock.value // 1000, width.value)


def pct(v, ref):
    return "%.0f%%" % (100 * v / ref) if v is not None and ref else ""


def fmt(v):
    return "%.4g" % v if v is not None else "—"


def table(sublet, torch, peak, peak_note):
    out = []
    copies = [(r["value"], side, c) for side, rows in (("sublet", sublet), ("PyTorch", torch))
              for c, r in rows.items() if c.startswith("copy-") and r["unit"] == "GB/s"]
    ref = max(copies) if copies else None
    if ref:
        out.append("Copy reference: %.4g GB/s (%s, %s), the best copy of this run." % ref)
    else:
        out.append("Copy reference: none (no copy-* case in these files).")
    out.append("Card's peak: " + ("%.4g GB/s (%s)." % (peak, peak_note) if peak else "unknown (%s)." % peak_note))
    out.append("")
    out.append("| case | unit | sublet | PyTorch | ratio | sublet % copy | PyTorch % copy | sublet % peak | PyTorch % peak |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for case in list(sublet) + [c for c in torch if c not in sublet]:
        s, t = sublet.get(case), torch.get(case)
        unit = (s or t)["unit"]
        sv, tv = (s or {}).get("value"), (t or {}).get("value")
        ratio = ""
        if sv and tv:
            ratio = "%.2fx" % (tv / sv if unit == "µs/op" else sv / tv)
        row = [case, unit, fmt(sv), fmt(tv), ratio]
        if unit == "GB/s":
            row += [pct(sv, ref and ref[0]), pct(tv, ref and ref[0]), pct(sv, peak), pct(tv, peak)]
        else:
            row += ["", "", "", ""]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peak", default="auto", help="auto (from the CUDA driver), none, or the card's peak in GB/s")
    ap.add_argument("sublet")
    ap.add_argument("torch")
    a = ap.parse_args()
    if a.peak == "auto":
        peak, note = driver_peak()
    elif a.peak == "none":
        peak, note = None, "not asked for"
    else:
        peak, note = float(a.peak), "given with --peak"
    print(table(load(a.sublet), load(a.torch), peak, note))
    return 0


if __name__ == "__main__":
    sys.exit(main())
