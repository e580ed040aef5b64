"""Reads a safetensors file with Python's standard library only (struct and json),
checking what the format requires (the header's length, '{' first, space padding,
dtypes, sizes, tensors tiling the data without holes), and prints every tensor's dtype,
shape and values as JSON, and the metadata, for the Go test to compare.

    python3 reference_reader.py FILE
"""
import json
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
         "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}
FORMATS = {"BOOL": "?", "U8": "B", "I8": "b", "I16": "h", "U16": "H", "F16": "e",
           "I32": "i", "U32": "I", "F32": "f", "F64": "d", "I64": "q", "U64": "Q"}

raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
assert 8 + n <= len(raw), "header past the end"
h = raw[8:8 + n]
assert h[:1] == b"{", "header does not start with {"
text = h.decode("utf-8")
assert text.rstrip(" ") == text.rstrip(" ").rstrip() and text.rstrip(" ").endswith("}"), "bad padding"
pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
names = [k for k, _ in pairs]
assert len(names) == len(set(names)), "duplicate names"
header = dict(pairs)
meta = dict(header.pop("__metadata__", []))
data = raw[8 + n:]
out, spans = {}, []
for name, entry in header.items():
    e = dict(entry)
    dt, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
    count = 1
    for d in shape:
        count *= d
    assert end - begin == count * SIZES[dt], name + ": size"
    spans.append((begin, end))
    buf = data[begin:end]
    if dt == "BF16":
        vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0]
                for v in struct.unpack("<%dH" % count, buf)]
    else:
        vals = list(struct.unpack("<%d%s" % (count, FORMATS[dt]), buf))
    out[name] = {"dtype": dt, "shape": shape, "values": [float(v) for v in vals]}
at = 0
for begin, end in sorted(spans):
    assert begin == at, "hole or overlap at %d" % begin
    at = end
assert at == len(data), "data not covered"
print(json.dumps({"tensors": out, "metadata": meta}))
