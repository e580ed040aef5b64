"""PyTorch DDP baseline for sublet's `examples/ddp -bench`: the wide MLP of
/work/shared/bench/torch/torch_train.py (4096-4096-4096-4096-4096-10, Adam lr 1e-3, one
fixed batch of noise per rank), one process per GPU under torchrun, DDP with its default
buckets, 10 warm-up steps then STEPS timed ones (torch.cuda.synchronize around them).

    python3 -m torch.distributed.run --standalone --nproc-per-node 2 scripts/gpu/torch_ddp.py --steps 100

Each rank prints one line in the format of examples/ddp's -bench, so that
scripts/gpu/ddp_scaling.sh reads both the same way.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=100)
p.add_argument("--batch", type=int, default=4096, help="batch of each rank")
p.add_argument("--features", type=int, default=4096)
p.add_argument("--hidden", default="4096,4096,4096,4096")
p.add_argument("--classes", type=int, default=10)
a = p.parse_args()

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
rank, world = dist.get_rank(), dist.get_world_size()

widths = [a.features] + [int(w) for w in a.hidden.split(",")] + [a.classes]
layers = []
for i, o in zip(widths, widths[1:]):
    layers += [nn.Linear(i, o), nn.ReLU()]
torch.manual_seed(0)
model = DDP(nn.Sequential(*layers[:-1]).cuda(), device_ids=[local])
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
g = torch.Generator(device="cuda").manual_seed(rank)
x = torch.randn(a.batch, a.features, device="cuda", generator=g)
y = torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)
lossf = nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=True)
    lossf(model(x), y).backward()
    opt.step()


for _ in range(10):
    step()
torch.cuda.synchronize()
dist.barrier()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
torch.cuda.synchronize()
dt = time.perf_counter() - t0
sps = a.steps / dt
print(f"bench: rank {rank} of {world}, MLP {'-'.join(map(str, widths))}, batch {a.batch} per rank, "
      f"nccl backend on cuda:{local} (pytorch {torch.__version__} DDP): {a.steps} steps in {dt:.3f}s: "
      f"{sps:.2f} steps/s, {sps * a.batch * world:.0f} samples/s in all", flush=True)
dist.destroy_process_group()
