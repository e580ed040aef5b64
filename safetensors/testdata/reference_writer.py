"""Writes a safetensors file with Python's standard library only (struct and json),
independently of sublet's writer: tensors in the order given, offsets one after the
other, the header as json.dumps prints it (spaces after separators), no padding, the
metadata last. The Go test reads it and checks every value.

    python3 reference_writer.py OUT
"""
import json
import struct
import sys


def bf16(x):
    # bfloat16 is the upper half of the float32 bits (these values are exact).
    return struct.pack("<H", struct.unpack("<I", struct.pack("<f", x))[0] >> 16)


tensors = [
    ("weight", "F32", [2, 2], struct.pack("<4f", 1.5, -2.25, 3e10, -0.0)),
    ("double", "F64", [2], struct.pack("<2d", 0.1, -1e300)),
    ("half", "F16", [4], struct.pack("<4e", 1.0, -2.0, 65504.0, 0.00006103515625)),
    ("brain", "BF16", [3], b"".join(bf16(x) for x in (1.0, -1.5, 3.140625))),
    ("ids", "I64", [2], struct.pack("<2q", -(1 << 62), 5)),
    ("counts", "I32", [1, 3], struct.pack("<3i", 7, -8, 2147483647)),
    ("flags", "BOOL", [2], bytes([1, 0])),
    ("scalar", "F32", [], struct.pack("<f", 0.125)),
    ("none", "F32", [0, 4], b""),
    ("raw", "U8", [3], bytes([1, 2, 255])),
]

header, data = {}, b""
for name, dt, shape, raw in tensors:
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
header["__metadata__"] = {"writer": "python-stdlib", "format": "pt"}
h = json.dumps(header).encode("utf-8")
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    f.write(data)
