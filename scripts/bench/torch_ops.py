#!/usr/bin/env python3
"""PyTorch side of `sublet-bench -run ops`: the same single ops on the CPU, the same JSON lines.

    python3 scripts/bench/torch_ops.py [--threads N] [--time SECONDS] [--jsonl FILE]

Each case runs once to warm up, then again for --time seconds (at least 3 runs); its
figure is taken at the median run: GFLOP/s for the products of 1024x1024 float32
matrices (nn, nt, tn), GB/s for the ops over 64M float32 (the bytes each reads and
writes once: 4 per element for a reduction, 12 for add, 6 for a cast to float16, 8 for
relu), and microseconds per op for add of two 1k float32 tensors, 100 ops whose results
are kept and then dropped together (sublet-bench's 100 ops per scope). norm-64M is
torch.linalg.vector_norm (one pass); sublet composes it (x*x, sum, sqrt). A line per
case on stdout: {"experiment": "ops", "device": "cpu", "case": ..., "value": ...,
"unit": ..., "n": runs, "note": ...}.

--threads N also sets OPENBLAS_NUM_THREADS and OMP_NUM_THREADS (unless set) before
PyTorch loads. Works with PyTorch 1.13 and 2.x.
"""
import argparse, json, os, statistics, sys, time


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 keeps PyTorch's default")
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--jsonl")
    return ap.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS and ARGS.threads:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(ARGS.threads))
import torch

SMALL_OPS = 100


def cases():
    n, big, width = 1024, 1 << 26, 1024
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    x, y = torch.randn(big, generator=g), torch.randn(big, generator=g)
    m = x.view(big // width, width)
    small = torch.randn(1024, generator=g)
    flops = 2.0 * n * n * n / 1e9

    def gb(per):
        return per * big / 1e9

    def add_1k():
        kept = [small + small for _ in range(SMALL_OPS)]
        del kept

    return [
        ("matmul-nn-1024", "GFLOP/s", flops, lambda: a @ b),
        ("matmul-nt-1024", "GFLOP/s", flops, lambda: a @ b.T),
        ("matmul-tn-1024", "GFLOP/s", flops, lambda: a.T @ b),
        ("sum-64M", "GB/s", gb(4), lambda: x.sum()),
        ("sum-rows-64M", "GB/s", gb(4), lambda: m.sum(1)),
        ("sum-cols-64M", "GB/s", gb(4), lambda: m.sum(0)),
        ("mean-64M", "GB/s", gb(4), lambda: x.mean()),
        ("max-rows-64M", "GB/s", gb(4), lambda: m.max(1)),
        ("norm-64M", "GB/s", gb(4), lambda: torch.linalg.vector_norm(x)),
        ("add-64M", "GB/s", gb(12), lambda: x + y),
        ("cast-f16-64M", "GB/s", gb(6), lambda: x.to(torch.float16)),
        ("relu-64M", "GB/s", gb(8), lambda: torch.relu(x)),
        ("add-1k", "µs/op", SMALL_OPS, add_1k),
    ]


def main():
    a = ARGS
    if a.threads:
        torch.set_num_threads(a.threads)
    out = open(a.jsonl, "w") if a.jsonl else None
    with torch.no_grad():
        for name, unit, work, fn in cases():
            fn()  # warm up
            times, start = [], time.perf_counter()
            while len(times) < 3 or time.perf_counter() - start < a.time:
                t = time.perf_counter()
                r = fn()
                del r
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            value = med * 1e6 / work if unit == "µs/op" else work / med
            rec = {"experiment": "ops", "device": "cpu", "case": name, "value": value, "unit": unit, "n": len(times),
                   "note": "median of %d runs %.4g ms; torch %s, %d threads" % (
                       len(times), med * 1e3, torch.__version__, torch.get_num_threads())}
            line = json.dumps(rec, ensure_ascii=False)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    if out:
        out.close()


if __name__ == "__main__":
    sys.exit(main())
