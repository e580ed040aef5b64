# torch_matmul.py THREADS: PyTorch's 1024 products (nn, nt, tn) on the CPU at THREADS threads,
# GFLOP/s as the median of five 0.4 s runs, beside kernels/cpu's BenchmarkSgemmTransposes.
import sys, time, torch
th = int(sys.argv[1]); torch.set_num_threads(th)
n = 1024
a = torch.rand(n, n); b = torch.rand(n, n)
for name, f in [("nn", lambda: a @ b), ("nt", lambda: a @ b.t()), ("tn", lambda: a.t() @ b)]:
    for _ in range(30): f()
    ts = []
    for r in range(5):
        t = time.perf_counter(); k = 0
        while time.perf_counter() - t < 0.4: f(); k += 1
        ts.append((time.perf_counter() - t) / k)
    ts.sort()
    print("torch %d threads %s 1024: GFLOP/s med %.0f (min %.0f, max %.0f), µs med %.0f" % (th, name, 2*n**3/ts[2]/1e9, 2*n**3/ts[4]/1e9, 2*n**3/ts[0]/1e9, ts[2]*1e6))
