#!/usr/bin/env python3
"""PyTorch side of `sublet-bench -run ops`: the same single ops, the same JSON lines.

    python3 scripts/bench/torch_ops.py [--device cpu|cuda] [--threads N] [--time SECONDS] [--cases NAME,...] [--jsonl FILE]
    python3 scripts/bench/torch_ops.py --list [--device cpu|cuda]

--device cpu (the default): products of 1024x1024 float32 matrices (nn, nt, tn) in
GFLOP/s; GB/s for the ops over 64M float32 (the bytes each reads and writes once: 4 per
element for a reduction, 12 for add, 6 for a cast to float16, 8 for relu); microseconds
per op for add of two 1k float32 tensors, 100 ops whose results are kept and then
dropped together (sublet-bench's 100 ops per scope). norm-64M is
torch.linalg.vector_norm, sublet's Norm (each one pass). Each case runs
once to warm up, then again for --time seconds (at least 3 runs); its figure is taken at
the median run.

--device cuda: the kernel families of issue 18 (sublet-bench -device cuda:0 -run ops),
in float32, float16 and bfloat16 (f32, f16, bf16 in the names) over 64M elements or
their [65536, 1024] matrix of rows: copy (clone), add, add-bias (a [1024] row broadcast),
mul, relu, relu-backward (torch.ops.aten.threshold_backward(g, relu(x), 0), the kernel
autograd's ReluBackward0 runs), gelu-tanh, sum, sum-rows (sum(1)), sum-cols (sum(0), the
bias gradient), max-rows (max(1): values and indices), softmax-rows, log-softmax-rows,
cross-entropy (int64 labels), layernorm (over rows, with weight and bias), transpose
(m.t().contiguous()); the casts f32->f16, f16->f32, f32->bf16, bf16->f32; products of
4096x4096 matrices (nn, nt, tn) in each type at PyTorch's default settings (no TF32);
add-1k. GB/s counts e bytes an element (4 or 2) once per read and write: 2e for copy,
add-bias, relu, gelu-tanh, softmax, log-softmax, layernorm and transpose; 3e for add, mul
and relu-backward; e for the reductions and cross-entropy; 6 for a cast (what is per row
or per column is not counted). A timed run is R repetitions of the op, each result
dropped at once, then torch.cuda.synchronize(); after one run that warms up, R doubles
from 1 until a run lasts 1 ms, and runs are timed for --time seconds (at least 3); the
figure is R times the work over the median run, as sublet-bench times a GPU.

--cases times only the cases named (sublet-bench's -ops), in the order given.

A line per case on stdout: {"experiment": "ops", "device": "cpu" or "cuda:0", "case":
..., "value": ..., "unit": ..., "n": runs, "note": ...}. --list prints each case's name,
unit and work (GFLOP, GB or ops a run) as JSON lines without loading PyTorch.

--threads N also sets OPENBLAS_NUM_THREADS and OMP_NUM_THREADS (unless set) before
PyTorch loads. Works with PyTorch 1.13 and 2.x.
"""
import argparse, json, os, statistics, sys, time, types

BIG, WIDTH, SMALL_OPS = 1 << 26, 1024, 100
CPU_N, GPU_N = 1024, 4096
DTYPES = (("f32", 4), ("f16", 2), ("bf16", 2))  # name, bytes an element
MIN_DEVICE_RUN = 1e-3  # seconds


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 keeps PyTorch's default")
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--jsonl")
    ap.add_argument("--cases", help="comma-separated case names: only these, in this order (default every case)")
    ap.add_argument("--list", action="store_true", help="print the cases (name, unit, work) and exit")
    return ap.parse_args()


def gb(per):
    return per * BIG / 1e9


def cpu_cases(t):
    """The CPU cases: (name, unit, work, fn); fn reads the inputs in t (cpu_inputs)."""
    flops = 2.0 * CPU_N ** 3 / 1e9

    def add_1k():
        kept = [t.small + t.small for _ in range(SMALL_OPS)]
        del kept

    return [
        ("matmul-nn-1024", "GFLOP/s", flops, lambda: t.a @ t.b),
        ("matmul-nt-1024", "GFLOP/s", flops, lambda: t.a @ t.b.T),
        ("matmul-tn-1024", "GFLOP/s", flops, lambda: t.a.T @ t.b),
        ("sum-64M", "GB/s", gb(4), lambda: t.x.sum()),
        ("sum-rows-64M", "GB/s", gb(4), lambda: t.m.sum(1)),
        ("sum-cols-64M", "GB/s", gb(4), lambda: t.m.sum(0)),
        ("mean-64M", "GB/s", gb(4), lambda: t.x.mean()),
        ("max-rows-64M", "GB/s", gb(4), lambda: t.m.max(1)),
        ("norm-64M", "GB/s", gb(4), lambda: t.torch.linalg.vector_norm(t.x)),
        ("add-64M", "GB/s", gb(12), lambda: t.x + t.y),
        ("cast-f16-64M", "GB/s", gb(6), lambda: t.x.to(t.torch.float16)),
        ("relu-64M", "GB/s", gb(8), lambda: t.torch.relu(t.x)),
        ("add-1k", "µs/op", SMALL_OPS, add_1k),
    ]


def cpu_inputs(torch):
    g = torch.Generator().manual_seed(1)
    t = types.SimpleNamespace(torch=torch)
    t.a, t.b = torch.randn(CPU_N, CPU_N, generator=g), torch.randn(CPU_N, CPU_N, generator=g)
    t.x, t.y = torch.randn(BIG, generator=g), torch.randn(BIG, generator=g)
    t.m = t.x.view(BIG // WIDTH, WIDTH)
    t.small = torch.randn(1024, generator=g)
    return t


def gpu_cases(t):
    """The GPU cases, those of sublet-bench's gpuOpCases: (name, unit, work, fn)."""
    flops = 2.0 * GPU_N ** 3 / 1e9
    out = []
    for d, e in DTYPES:
        def case(op, unit, work, fn):
            out.append(("%s-%s-64M" % (op, d), unit, work, fn))

        case("copy", "GB/s", gb(2 * e), lambda d=d: t.x[d].clone())
        case("add", "GB/s", gb(3 * e), lambda d=d: t.x[d] + t.y[d])
        case("add-bias", "GB/s", gb(2 * e), lambda d=d: t.m[d] + t.bias[d])
        case("mul", "GB/s", gb(3 * e), lambda d=d: t.x[d] * t.y[d])
        case("relu", "GB/s", gb(2 * e), lambda d=d: t.torch.relu(t.x[d]))
        case("relu-backward", "GB/s", gb(3 * e), lambda d=d: t.torch.ops.aten.threshold_backward(t.y[d], t.relu[d], 0))
        case("gelu-tanh", "GB/s", gb(2 * e), lambda d=d: t.F.gelu(t.x[d], approximate="tanh"))
        case("sum", "GB/s", gb(e), lambda d=d: t.x[d].sum())
        case("sum-rows", "GB/s", gb(e), lambda d=d: t.m[d].sum(1))
        case("sum-cols", "GB/s", gb(e), lambda d=d: t.m[d].sum(0))
        case("max-rows", "GB/s", gb(e), lambda d=d: t.m[d].max(1))
        case("softmax-rows", "GB/s", gb(2 * e), lambda d=d: t.torch.softmax(t.m[d], 1))
        case("log-softmax-rows", "GB/s", gb(2 * e), lambda d=d: t.torch.log_softmax(t.m[d], 1))
        case("cross-entropy", "GB/s", gb(e), lambda d=d: t.F.cross_entropy(t.m[d], t.labels))
        case("layernorm", "GB/s", gb(2 * e), lambda d=d: t.F.layer_norm(t.m[d], (WIDTH,), t.w[d], t.bias[d], 1e-5))
        case("transpose", "GB/s", gb(2 * e), lambda d=d: t.m[d].t().contiguous())
        out.append(("matmul-nn-%s-4096" % d, "GFLOP/s", flops, lambda d=d: t.a[d] @ t.b[d]))
        out.append(("matmul-nt-%s-4096" % d, "GFLOP/s", flops, lambda d=d: t.a[d] @ t.b[d].T))
        out.append(("matmul-tn-%s-4096" % d, "GFLOP/s", flops, lambda d=d: t.a[d].T @ t.b[d]))
    for src, dst in (("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f32")):
        out.append(("cast-%s-%s-64M" % (src, dst), "GB/s", gb(6), lambda src=src, dst=dst: t.x[src].to(t.types[dst])))

    def add_1k():
        kept = [t.small + t.small for _ in range(SMALL_OPS)]
        del kept

    out.append(("add-1k", "µs/op", SMALL_OPS, add_1k))
    return out


def gpu_inputs(torch, dev="cuda"):
    """The inputs of gpu_cases on dev: float32 normals, the float16 and bfloat16 ones their casts."""
    g = torch.Generator(device=dev).manual_seed(1)
    t = types.SimpleNamespace(torch=torch, F=torch.nn.functional, types={"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16})
    x, y = torch.randn(BIG, generator=g, device=dev), torch.randn(BIG, generator=g, device=dev)
    a, b = torch.randn(GPU_N, GPU_N, generator=g, device=dev), torch.randn(GPU_N, GPU_N, generator=g, device=dev)
    t.labels = torch.randint(0, WIDTH, (BIG // WIDTH,), generator=g, device=dev)
    t.x, t.y, t.a, t.b, t.m, t.bias, t.w, t.relu = {}, {}, {}, {}, {}, {}, {}, {}
    for d, _ in DTYPES:
        dt = t.types[d]
        t.x[d], t.y[d], t.a[d], t.b[d] = x.to(dt), y.to(dt), a.to(dt), b.to(dt)
        t.m[d] = t.x[d].view(BIG // WIDTH, WIDTH)
        t.bias[d], t.w[d] = t.y[d][:WIDTH], t.y[d][WIDTH:2 * WIDTH]
        t.relu[d] = torch.relu(t.x[d])
    t.small = torch.randn(1024, generator=g, device=dev)
    return t


def time_cpu(fn, per):
    fn()  # warm up
    times, start = [], time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < per:
        t = time.perf_counter()
        r = fn()
        del r
        times.append(time.perf_counter() - t)
    return times, 1


def time_cuda(torch, fn, per):
    reps = 1

    def run():
        t = time.perf_counter()
        for _ in range(reps):
            r = fn()
            del r
        torch.cuda.synchronize()
        return time.perf_counter() - t

    run()  # warm up
    while run() < MIN_DEVICE_RUN and reps < 1 << 20:
        reps *= 2
    times, start = [], time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < per:
        times.append(run())
    return times, reps


def main():
    a = parse_args()
    every = gpu_cases if a.device == "cuda" else cpu_cases
    names = [c[0] for c in every(None)]
    wanted = a.cases.split(",") if a.cases else names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        sys.exit("torch_ops.py: unknown case(s) %s for --device %s (cases: %s)" % (", ".join(unknown), a.device, ", ".join(names)))

    def cases(t):
        by = {c[0]: c for c in every(t)}
        return [by[n] for n in wanted]

    if a.list:
        for name, unit, work, _ in cases(None):
            print(json.dumps({"case": name, "unit": unit, "work": work}, ensure_ascii=False))
        return 0
    if a.threads:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
        os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch
    if a.threads:
        torch.set_num_threads(a.threads)
    cuda = a.device == "cuda"
    inputs = gpu_inputs(torch) if cuda else cpu_inputs(torch)
    device = "cuda:%d" % torch.cuda.current_device() if cuda else "cpu"
    out = open(a.jsonl, "w") if a.jsonl else None
    with torch.no_grad():
        for name, unit, work, fn in cases(inputs):
            times, reps = time_cuda(torch, fn, a.time) if cuda else time_cpu(fn, a.time)
            med = statistics.median(times) / reps
            value = med * 1e6 / work if unit == "µs/op" else work / med
            if cuda:
                note = "median of %d runs of %d repetitions and a synchronisation: %.4g ms a repetition; torch %s, %s" % (
                    len(times), reps, med * 1e3, torch.__version__, torch.cuda.get_device_name())
            else:
                note = "median of %d runs %.4g ms; torch %s, %d threads" % (
                    len(times), med * 1e3, torch.__version__, torch.get_num_threads())
            rec = {"experiment": "ops", "device": device, "case": name, "value": value, "unit": unit,
                   "n": len(times), "note": note}
            line = json.dumps(rec, ensure_ascii=False)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
