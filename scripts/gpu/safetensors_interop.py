"""safetensors_interop.py: sublet's safetensors files against Python's safetensors and
PyTorch, both ways. suite.sh (step safetensors) runs it between the two phases of
safetensors' TestInteropWithPyTorch:

    safetensors.test -test.run TestInteropWithPyTorch   (SUBLET_SAFETENSORS_PHASE=write)
    python3 scripts/gpu/safetensors_interop.py DIR
    safetensors.test -test.run TestInteropWithPyTorch   (SUBLET_SAFETENSORS_PHASE=read)

It reads what sublet wrote in DIR (sublet_*.safetensors, sublet_expected.json):
every tensor with safetensors.torch.load_file, the MLP with model.load_state_dict
(strict), the AdamW state with optimizer.load_state_dict, then takes one step and
compares the parameters with sublet's. Then it writes its own files for sublet to read
(torch_*.safetensors, torch_expected.json): tensors of every type sublet has, a torch
MLP and its AdamW after two steps, and the parameters after one more step. Exits 1 on
the first mismatch, saying which.
"""
import glob
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DIR = sys.argv[1]
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I32": torch.int32, "I64": torch.int64, "BOOL": torch.bool}
SPELL = {v: k for k, v in DTYPES.items()}


def fail(msg):
    print("safetensors_interop: FAIL: " + msg)
    sys.exit(1)


def values(t):
    return [float(v) for v in t.detach().reshape(-1).to(torch.float64).tolist()]


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def step(model, opt, batch):
    x = torch.tensor(batch["x"], dtype=torch.float32).reshape(2, 4)
    labels = torch.tensor([int(v) for v in batch["labels"]], dtype=torch.int64)
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), labels).backward()
    opt.step()


def close(name, got, want, atol):
    if len(got) != len(want) or any(abs(a - b) > atol for a, b in zip(got, want)):
        fail("%s: got %s, want %s" % (name, got[:8], want[:8]))


# --- sublet's files, read by Python's safetensors and PyTorch ---
exp = json.load(open(os.path.join(DIR, "sublet_expected.json")))
files = sorted(glob.glob(os.path.join(DIR, "sublet_tensors*.safetensors")))
if not files:
    fail("no sublet_tensors*.safetensors in " + DIR)
for path in files:
    got = load_file(path)
    if set(got) != set(exp["tensors"]):
        fail("%s holds %s, want %s" % (path, sorted(got), sorted(exp["tensors"])))
    for name, e in exp["tensors"].items():
        t = got[name]
        if SPELL.get(t.dtype) != e["dtype"] or list(t.shape) != e["shape"]:
            fail("%s %s: %s %s, want %s %s" % (path, name, t.dtype, list(t.shape), e["dtype"], e["shape"]))
        if values(t) != e["values"]:
            fail("%s %s: %s, want %s" % (path, name, values(t), e["values"]))
    print("read %s: %d tensors" % (os.path.basename(path), len(got)))

model = mlp()
model.load_state_dict(load_file(os.path.join(DIR, "sublet_model.safetensors")), strict=True)
for name, p in model.state_dict().items():
    if values(p) != exp["model"][name]:
        fail("sublet_model %s differs" % name)
opt = torch.optim.AdamW(model.parameters())
with safe_open(os.path.join(DIR, "sublet_adamw.safetensors"), "pt") as f:
    meta = f.metadata()
    if meta.get("optimizer") != "AdamW":
        fail("sublet_adamw: optimizer %r" % meta.get("optimizer"))
    state = {}
    for k in f.keys():
        _, i, name = k.split(".", 2)
        state.setdefault(int(i), {})[name] = f.get_tensor(k)
    opt.load_state_dict({"state": state, "param_groups": json.loads(meta["param_groups"])})
step(model, opt, exp["batch"])
for name, p in model.state_dict().items():
    close("sublet's model after a torch step from sublet's AdamW state, " + name, values(p), exp["after_step"][name], 1e-5)
print("loaded sublet's MLP and AdamW into torch; one step agrees")

# --- PyTorch's files, for sublet to read ---
torch.manual_seed(0)
tensors = {
    "w.f32": torch.randn(3, 5),
    "d.f64": torch.tensor([0.1, -1e300, 2.0 ** -1074], dtype=torch.float64),
    "h.f16": torch.tensor([1.0, -2.0, 65504.0, 2.0 ** -24], dtype=torch.float16),
    "b.bf16": torch.tensor([-1.5, 3.140625, 2.0 ** 100], dtype=torch.bfloat16),
    "i32": torch.tensor([[7, -8], [2 ** 31 - 1, -(2 ** 31)]], dtype=torch.int32),
    "labels": torch.tensor([2 ** 40, -3, 0], dtype=torch.int64),
    "mask": torch.tensor([True, False, True]),
    "scalar": torch.tensor(0.125),
    "empty": torch.zeros(0, 4),
}
save_file(tensors, os.path.join(DIR, "torch_tensors.safetensors"))
model = mlp()
opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
batches = [{"x": [1.0, -2.0, 0.5, float(k), 0.0, 1.0, 2.0, -1.0], "labels": [2, k % 3]} for k in range(3)]
for k in range(2):
    step(model, opt, batches[k])
save_file(model.state_dict(), os.path.join(DIR, "torch_model.safetensors"), metadata={"format": "pt"})
sd = opt.state_dict()
flat = {}
for i, st in sd["state"].items():
    for name, t in st.items():
        if name == "step":
            t = torch.as_tensor(t, dtype=torch.float32)
        flat["state.%d.%s" % (i, name)] = t.contiguous()
save_file(flat, os.path.join(DIR, "torch_adamw.safetensors"),
          metadata={"optimizer": "AdamW", "param_groups": json.dumps(sd["param_groups"])})
out = {
    "tensors": {n: {"dtype": SPELL[t.dtype], "shape": list(t.shape), "values": values(t)} for n, t in tensors.items()},
    "model": {n: values(p) for n, p in model.state_dict().items()},
    "batch": {"x": batches[2]["x"], "labels": [float(v) for v in batches[2]["labels"]]},
}
step(model, opt, batches[2])
out["after_step"] = {n: values(p) for n, p in model.state_dict().items()}
json.dump(out, open(os.path.join(DIR, "torch_expected.json"), "w"))
print("wrote torch_tensors, torch_model and torch_adamw for sublet to read")
