#!/usr/bin/env python3
"""PyTorch side of `sublet-bench -run train`: the same training cases, the same JSON lines.

    python3 scripts/bench/torch_train.py [--device cpu|cuda] [--cases cpu|gpu|NAME,...]
                                         [--threads N] [--time SECONDS] [--steps N] [--jsonl FILE]
                                         [--upload resident|each-step] [--graph] [--profile DIR]

Each case trains an MLP (Linear layers with ReLU between, cross entropy over the last
width) on one random batch: 3 warm-up steps, then steps for --time seconds (at least 3),
reading the loss every step as sublet-bench does (--steps N: exactly N steps). A line per
case on stdout: {"experiment": "train", "device": ..., "case": ..., "value": steps/s,
"unit": "steps/s", "n": steps, "note": "peak allocated A reserved R; P parameters; cpu C
ms per step; ..."}, C being the process's CPU time per timed step, every thread's. The
peaks are those of PyTorch's CUDA allocator on cuda; on cpu the note gives the process's
peak resident set instead (sublet-bench's peaks count tensor memory only).

--threads N also sets OPENBLAS_NUM_THREADS (unless set) before PyTorch loads: a PyTorch
linked to OpenBLAS (Debian's) otherwise runs its GEMMs on every core whatever
set_num_threads says. Works with PyTorch 1.13 (Debian's) and 2.x.
"""
import argparse, json, os, resource, sys, time


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--cases", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 keeps PyTorch's default")
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=0, help="time exactly this many steps instead of --time")
    ap.add_argument("--jsonl")
    ap.add_argument("--upload", default="resident", choices=["resident", "each-step"],
                    help="the batch on the device once (resident), or copied every step from pinned host "
                         "memory with non_blocking=True, as a DataLoader with pin_memory does (each-step)")
    ap.add_argument("--graph", action="store_true",
                    help="capture one step as a CUDA graph after the warm-up (torch.cuda.graph, on a side stream "
                         "as PyTorch's docs do it) and time its replays; the case's name gets -graph")
    ap.add_argument("--profile", help="a folder for each case's torch.profiler table of 3 steps after the timing "
                                       "(CASE.torch.txt, sorted by self CUDA time on cuda)")
    return ap.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS and ARGS.threads:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential


def repeat(w, n, *last):
    return [w] * n + list(last)


CASES = {
    "tiny-sgd": dict(widths=[784, 256, 256, 10], batch=64, opt="sgd"),
    "tiny-adam": dict(widths=[784, 256, 256, 10], batch=64, opt="adam"),
    "wide-adam": dict(widths=[1024, 4096, 4096, 4096, 1024], batch=512, opt="adam"),
    "deep-sgd": dict(widths=repeat(1024, 17, 10), batch=1024, opt="sgd"),
    "deep-sgd-ckpt4": dict(widths=repeat(1024, 17, 10), batch=1024, opt="sgd", segments=4),
    "wide4096-adam": dict(widths=repeat(4096, 5, 10), batch=4096, opt="adam"),
    "wide4096-adam-f16": dict(widths=repeat(4096, 5, 10), batch=4096, opt="adam", amp=torch.float16),
    "wide4096-adam-bf16": dict(widths=repeat(4096, 5, 10), batch=4096, opt="adam", amp=torch.bfloat16),
    "deep4096-sgd": dict(widths=repeat(4096, 17, 10), batch=4096, opt="sgd"),
    "deep4096-sgd-ckpt4": dict(widths=repeat(4096, 17, 10), batch=4096, opt="sgd", segments=4),
}
SETS = {
    "cpu": ["tiny-sgd", "wide-adam", "deep-sgd", "deep-sgd-ckpt4"],
    "gpu": ["tiny-sgd", "tiny-adam", "wide4096-adam", "wide4096-adam-f16", "wide4096-adam-bf16",
            "deep4096-sgd", "deep4096-sgd-ckpt4"],
}


def mlp(widths, dev):
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).to(dev)


def sequential_checkpointed(model, segments, x):
    """checkpoint_sequential without reentrant autograd (the input needs no grad), which
    PyTorch 1.13's checkpoint_sequential cannot be asked for: its segments as 2.x cuts
    them, each but the last through checkpoint(use_reentrant=False)."""
    fns = list(model.children())
    size = len(fns) // segments

    def run_range(lo, hi):
        def f(h):
            for m in fns[lo:hi]:
                h = m(h)
            return h
        return f

    end = 0
    for lo in range(0, size * (segments - 1), size):
        end = lo + size
        x = checkpoint(run_range(lo, end), x, use_reentrant=False)
    return run_range(end, len(fns))(x)


def capture(step_body, o, x, y, hx, hy):
    """Captures one training step as a CUDA graph after warming it up on a side stream
    (PyTorch's whole-network capture recipe) and returns a step that replays it and reads
    the loss; with pinned hx, hy the batch is copied into the static inputs first."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            o.zero_grad(set_to_none=True)
            step_body(x, y)
    torch.cuda.current_stream().wait_stream(side)
    o.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = step_body(x, y)

    def replay():
        if hx is not None:
            x.copy_(hx, non_blocking=True)
            y.copy_(hy, non_blocking=True)
        g.replay()
        loss.item()
    return replay


def run(name, dev, per, steps, upload, profile, widths, batch, opt, segments=0, amp=None, graph=False):
    torch.manual_seed(0)
    model = mlp(widths, dev)
    params = sum(p.numel() for p in model.parameters())
    if opt == "sgd":
        o = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        o = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graph)  # a captured step needs it
    scaler = torch.amp.GradScaler(dev, enabled=amp is not None) if dev == "cuda" else None
    x = torch.randn(batch, widths[0], device=dev)
    y = torch.randint(0, widths[-1], (batch,), device=dev)
    pinned = dev == "cuda" and upload == "each-step"
    if pinned:
        hx, hy = x.cpu().pin_memory(), y.cpu().pin_memory()
    lossf = nn.CrossEntropyLoss()

    def step():
        nonlocal x, y
        if pinned:
            x, y = hx.to(dev, non_blocking=True), hy.to(dev, non_blocking=True)
        with torch.autocast(dev, dtype=amp or torch.bfloat16, enabled=amp is not None):
            if segments:
                try:
                    out = checkpoint_sequential(model, segments, x, use_reentrant=False)
                except ValueError:  # PyTorch 1.13: no use_reentrant here
                    out = sequential_checkpointed(model, segments, x)
            else:
                out = model(x)
            loss = lossf(out, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(o)
            scaler.update()
        else:
            loss.backward()
            o.step()
        o.zero_grad(set_to_none=True)
        loss.item()

    for _ in range(3):
        step()
    if graph:
        if dev != "cuda" or amp is not None:
            sys.exit("%s: --graph needs cuda and a case without autocast" % name)

        def step_body(x, y):
            out = checkpoint_sequential(model, segments, x, use_reentrant=False) if segments else model(x)
            loss = lossf(out, y)
            loss.backward()
            o.step()
            return loss
        step = capture(step_body, o, x, y, hx if pinned else None, hy if pinned else None)
        name += "-graph"
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while n < steps if steps else (n < 3 or time.perf_counter() - t0 < per):
        step()
        n += 1
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    if profile:
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(3):
                step()
        sort = "self_cuda_time_total" if dev == "cuda" else "self_cpu_time_total"
        with open(os.path.join(profile, name + ".torch.txt"), "w") as f:
            f.write("%s on %s: 3 steps profiled\n" % (name, dev))
            f.write(prof.key_averages().table(sort_by=sort, row_limit=40))
    if dev == "cuda":
        note = "peak allocated %d reserved %d" % (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
    else:
        note = "peak rss %d" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"experiment": "train", "device": dev if dev == "cpu" else "cuda:0", "case": name,
            "value": n / el, "unit": "steps/s", "n": n,
            "note": "%s; %d parameters; cpu %.4g ms per step; torch %s, %d threads; batch %s" % (
                note, params, cpu / n * 1e3, torch.__version__, torch.get_num_threads(), upload)}


def main():
    a = ARGS
    if a.threads:
        torch.set_num_threads(a.threads)
    names = []
    for n in a.cases.split(","):
        names += SETS.get(n, [n])
    out = open(a.jsonl, "w") if a.jsonl else None
    for n in names:
        if n not in CASES:
            sys.exit("unknown case %r (cases: %s; sets: cpu, gpu)" % (n, ", ".join(CASES)))
        r = run(n, a.device, a.time, a.steps, a.upload, a.profile, graph=a.graph, **CASES[n])
        line = json.dumps(r)
        print(line, flush=True)
        if out:
            out.write(line + "\n")


if __name__ == "__main__":
    main()
