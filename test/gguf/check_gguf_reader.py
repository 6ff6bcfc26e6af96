#!/usr/bin/env python3
"""HELM's GGUF reader (helm-gguf-dump --json) against the `gguf` package's writer and reader.

  1. Files written here with gguf-py's GGUFWriter: every scalar value type, strings (empty,
     non-ASCII), arrays of every element type, tensors of several ggml types (F32, F16, BF16, Q8_0,
     Q4_0, Q4_K, Q6_K, I8 with raw blocks), a non-default general.alignment, version 3 and the same
     file as version 2. Every key, type, value and array element, and every tensor's name, dims
     (GGUF order), type, offset, size and data (SHA-256) must be what was written.
  2. Real GGUF files, where present: the default model's (models/.cache/gguf/) and llama.cpp's
     vocabulary files (bench/.cache/llama.cpp/.../models/ggml-vocab-*.gguf): every key and tensor as
     gguf-py's GGUFReader reads them.
  3. Corrupt files made from (1): truncated at many points, a bad magic, version 1, 4 and
     big-endian, counts beyond the file, a string longer than the file, an unknown value type, an
     array of arrays, a duplicate key and tensor, 0 and 5 dimensions, more than 2^62 elements or
     bytes, an unknown ggml type, rows
     not whole blocks, a misaligned offset, overlapping tensors, a general.alignment of 0, 48 or
     type f32: each exits 1 with
     one line naming the file and the problem, never crashes.
Prints one line per check and "N passed, M failed"; exits non-zero on any failure.

  python check_gguf_reader.py --dump build/bin/helm-gguf-dump [--root .]
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from tally import Tally  # noqa: E402

SCALARS = [  # key, value type, value
    ("test.u8", V.UINT8, 250), ("test.i8", V.INT8, -100), ("test.u16", V.UINT16, 65000),
    ("test.i16", V.INT16, -32000), ("test.u32", V.UINT32, 4000000000), ("test.i32", V.INT32, -2000000000),
    ("test.f32", V.FLOAT32, 1.5e-6), ("test.bool", V.BOOL, True), ("test.string", V.STRING, "héllo wörld ✓"),
    ("test.empty_string", V.STRING, ""), ("test.u64", V.UINT64, 2**64 - 5), ("test.i64", V.INT64, -(2**62)),
    ("test.f64", V.FLOAT64, 3.141592653589793),
]
ARRAYS = [
    ("test.array.u8", V.UINT8, [0, 1, 255]), ("test.array.i8", V.INT8, [-128, 0, 127]),
    ("test.array.u16", V.UINT16, [7, 65535]), ("test.array.i16", V.INT16, [-7, 32767]),
    ("test.array.u32", V.UINT32, [1, 2, 3, 4000000000]), ("test.array.i32", V.INT32, [-1, 2, -3]),
    ("test.array.f32", V.FLOAT32, [0.5, -2.25, 1e10]), ("test.array.bool", V.BOOL, [True, False, True]),
    ("test.array.string", V.STRING, ["a", "", "merges ġ Ġt", "日本語"]),
    ("test.array.u64", V.UINT64, [5, 2**40, 2**64 - 1]), ("test.array.i64", V.INT64, [-5, 2**40]),
    ("test.array.f64", V.FLOAT64, [1.0 / 3.0, -0.0]),
]
TENSORS = [  # name, ggml type, GGUF dims (innermost first)
    ("token_embd.weight", T.Q8_0, [64, 10]), ("blk.0.attn_q.weight", T.Q4_0, [64, 8]),
    ("blk.0.ffn_down.weight", T.Q4_K, [256, 3]), ("blk.0.ffn_up.weight", T.Q6_K, [512, 2]),
    ("blk.0.attn_norm.weight", T.F32, [64]), ("output.weight", T.F16, [64, 5]),
    ("blk.0.attn_k.weight", T.BF16, [32, 4]), ("blk.0.codes", T.I8, [3, 5, 2]),
]


def write_synthetic(path: str, alignment: int | None) -> list[tuple[str, T, list[int], bytes]]:
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)  # general.alignment, and the writer pads to it
    for key, vtype, value in SCALARS:
        w.add_key_value(key, value, vtype)
    for key, vtype, value in ARRAYS:
        w.add_key_value(key, value, V.ARRAY, sub_type=vtype)
    written = []
    for name, ttype, dims in TENSORS:
        block, size = gguf.GGML_QUANT_SIZES[ttype]
        n = int(np.prod(dims))
        raw = rng.integers(0, 256, size=n // block * size, dtype=np.uint8)
        # gguf-py takes the byte shape of a quantized tensor as numpy order (outermost first).
        w.add_tensor(name, raw, raw_shape=list(reversed(dims[1:])) + [dims[0] // block * size], raw_dtype=ttype)
        written.append((name, ttype, dims, raw.tobytes()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return written


def dump(tool: str, path: str) -> tuple[int, dict | None, str]:
    r = subprocess.run([tool, path, "--json", "--all-elements", "--hash"], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def same_value(vtype: V, got, want) -> bool:
    if vtype == V.FLOAT32:
        return got == float(np.float32(want))
    if vtype == V.FLOAT64:
        return got == want or (want == 0 and got == 0)
    return got == want


def check_synthetic(tool: str, work: str, tally: Tally) -> str:
    for version, alignment in ((3, None), (3, 64), (2, 64)):
        path = os.path.join(work, f"synthetic-v{version}-a{alignment or 32}.gguf")
        written = write_synthetic(path, alignment)
        if version == 2:
            with open(path, "r+b") as f:
                f.seek(4)
                f.write(struct.pack("<I", 2))
        rc, doc, err = dump(tool, path)
        problems = []
        if rc != 0:
            tally.report(False, f"synthetic v{version} alignment {alignment or 32}", [f"exit {rc}: {err.strip()}"])
            continue
        meta = {m["key"]: m for m in doc["metadata"]}
        if doc["version"] != version or doc["alignment"] != (alignment or 32):
            problems.append(f"version {doc['version']} alignment {doc['alignment']}")
        for key, vtype, value in SCALARS:
            m = meta.get(key)
            if not m or m["type"] != gguf_type_name(vtype) or not same_value(vtype, m["value"], value):
                problems.append(f"{key}: {m}")
        for key, vtype, value in ARRAYS:
            m = meta.get(key)
            if (not m or m["type"] != "array" or m["element_type"] != gguf_type_name(vtype) or m["count"] != len(value)
                    or not all(same_value(vtype, g, w) for g, w in zip(m["value"], value))):
                problems.append(f"{key}: {m}")
        tensors = {t["name"]: t for t in doc["tensors"]}
        reader = gguf.GGUFReader(path)
        offsets = {t.name: t.data_offset - reader.data_offset for t in reader.tensors}
        for name, ttype, dims, raw in written:
            t = tensors.get(name)
            if (not t or t["dims"] != dims or t["type_id"] != int(ttype) or t["bytes"] != len(raw)
                    or t["sha256"] != hashlib.sha256(raw).hexdigest() or t["offset"] != offsets[name]
                    or t["offset"] % (alignment or 32) != 0):
                problems.append(f"tensor {name}: {t}")
        if doc["data_offset"] != reader.data_offset:
            problems.append(f"data offset {doc['data_offset']}, gguf-py {reader.data_offset}")
        tally.report(not problems, f"synthetic v{version} alignment {alignment or 32}: {len(meta)} keys, "
                     f"{len(tensors)} tensors as written", problems)
    return os.path.join(work, "synthetic-v3-a32.gguf")  # synthetic-v3-a64.gguf stays for check_corrupt


def gguf_type_name(vtype: V) -> str:
    return {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
            V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string", V.ARRAY: "array", V.UINT64: "u64",
            V.INT64: "i64", V.FLOAT64: "f64"}[vtype]


def reader_value(field):
    """A gguf-py ReaderField as plain Python: scalar, string, or list."""
    vtype = field.types[0]
    if vtype == V.ARRAY:
        sub = field.types[1] if len(field.types) > 1 else None
        if sub == V.STRING:
            return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if vtype == V.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
    return field.parts[field.data[0]].tolist()[0]


def check_real(tool: str, root: str, tally: Tally) -> None:
    files = sorted(glob.glob(os.path.join(root, "models", ".cache", "gguf", "*.gguf")))
    files += sorted(glob.glob(os.path.join(root, "bench", ".cache", "llama.cpp", "src", "vendor", "llama.cpp",
                                           "models", "ggml-vocab-*.gguf")))
    if not files:
        print("note: no real GGUF files here (the default model's is fetched by scripts/setup.sh)")
    for path in files:
        rc, doc, err = dump(tool, path)
        name = os.path.relpath(path, root)
        if rc != 0:
            tally.report(False, name, [f"exit {rc}: {err.strip()}"])
            continue
        reader = gguf.GGUFReader(path)
        problems = []
        meta = {m["key"]: m for m in doc["metadata"]}
        for key, field in reader.fields.items():
            if key.startswith("GGUF."):
                continue  # gguf-py's own view of the header
            m = meta.get(key)
            want = reader_value(field)
            got = m["value"] if m else None
            if isinstance(want, float) or (isinstance(want, list) and want and isinstance(want[0], float)):
                ok = got is not None and np.allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64),
                                                     rtol=0, atol=0, equal_nan=True)
            else:
                ok = got == want
            if not ok:
                problems.append(f"{key}: {str(got)[:80]} != {str(want)[:80]}")
        tensors = {t["name"]: t for t in doc["tensors"]}
        for t in reader.tensors:
            mine = tensors.get(t.name)
            if (not mine or mine["dims"] != [int(d) for d in t.shape] or mine["type_id"] != int(t.tensor_type)
                    or mine["bytes"] != int(t.n_bytes)
                    or mine["offset"] != t.data_offset - reader.data_offset
                    or mine["sha256"] != hashlib.sha256(np.asarray(t.data).tobytes()).hexdigest()):
                problems.append(f"tensor {t.name}: {mine}")
        if len(tensors) != len(reader.tensors) or len(meta) != len([k for k in reader.fields if not k.startswith("GGUF.")]):
            problems.append(f"{len(meta)} keys / {len(tensors)} tensors, gguf-py {len(reader.fields)} / {len(reader.tensors)}")
        tally.report(not problems, f"{name}: {len(meta)} keys, {len(tensors)} tensors as gguf-py reads them",
                     problems[:5])


def check_corrupt(tool: str, base: str, work: str, tally: Tally) -> None:
    data = bytearray(open(base, "rb").read())
    reader = gguf.GGUFReader(base)
    first = reader.tensors[0]
    kv_start = 24

    def tensor_info_offset(index: int) -> int:
        """Byte offset of tensor info `index` (its name length) in `base`."""
        pos = reader.fields["test.array.f64"].offset + sum(len(p) * p.itemsize for p in reader.fields["test.array.f64"].parts)
        for _ in range(index):
            (n,) = struct.unpack_from("<Q", data, pos)
            pos += 8 + n
            (dims,) = struct.unpack_from("<I", data, pos)
            pos += 4 + 8 * dims + 4 + 8
        return pos

    t0 = tensor_info_offset(0)
    (name_len,) = struct.unpack_from("<Q", data, t0)
    dims_at = t0 + 8 + name_len  # n_dims
    n_dims = struct.unpack_from("<I", data, dims_at)[0]
    type_at = dims_at + 4 + 8 * n_dims
    offset_at = type_at + 4
    t1 = tensor_info_offset(1)

    def patched(at: int, fmt: str, value) -> bytes:
        d = bytearray(data)
        struct.pack_into(fmt, d, at, value)
        return bytes(d)

    # The first key is general.architecture (written by GGUFWriter), a string.
    key0_len = struct.unpack_from("<Q", data, kv_start)[0]
    key0_type_at = kv_start + 8 + key0_len
    cases = [
        ("empty file", b"", "not a GGUF file"),
        ("bad magic", b"GGUG" + bytes(data[4:]), "not a GGUF file"),
        ("version 1", patched(4, "<I", 1), "GGUF version 1 is not supported (2 or 3)"),
        ("version 4", patched(4, "<I", 4), "GGUF version 4 is not supported (2 or 3)"),
        ("big-endian", patched(4, ">I", 3), "big-endian GGUF files are not supported"),
        ("tensor count", patched(8, "<Q", 2**60), "the tensor count 1152921504606846976 is more than the file can hold"),
        ("metadata count", patched(16, "<Q", 2**40), "the metadata count 1099511627776 is more than the file can hold"),
        ("key length", patched(kv_start, "<Q", 2**50), "truncated: metadata key 0 is 1125899906842624 bytes long"),
        ("value type", patched(key0_type_at, "<I", 13), "has unknown value type 13"),
        ("array of arrays", patched(reader.fields["test.array.u8"].offset + 8 + len("test.array.u8") + 4, "<I", 9),
         "'test.array.u8' is an array of arrays"),
        ("array length", patched(reader.fields["test.array.u32"].offset + 8 + len("test.array.u32") + 8, "<Q", 2**61),
         "truncated: metadata 'test.array.u32' holds 2305843009213693952 values of 4 bytes"),
        ("string array length", patched(reader.fields["test.array.string"].offset + 8 + len("test.array.string") + 8,
                                        "<Q", 2**61), "holds 2305843009213693952 strings, more than the file can hold"),
        ("duplicate key", bytes(data).replace(b"test.u16", b"test.u32", 1), "metadata key 'test.u32' appears twice"),
        ("duplicate tensor", bytes(data).replace(b"blk.0.attn_k.weight", b"blk.0.attn_q.weight", 1),
         "tensor 'blk.0.attn_q.weight' appears twice"),
        ("0 dimensions", patched(dims_at, "<I", 0), "has 0 dimensions (1 to 4)"),
        ("5 dimensions", patched(dims_at, "<I", 5), "has 5 dimensions (1 to 4)"),
        ("zero dimension", patched(dims_at + 4, "<Q", 0), "has dimension 0 = 0"),
        ("huge dimension", patched(dims_at + 4, "<Q", 2**63), "over 2^62 elements in all"),
        ("unknown ggml type", patched(type_at, "<I", 99), "has unknown ggml type 99"),
        # 2^61 - 2^5 elements fit the element limit; as F64 (8 bytes each) they do not fit 2^62 bytes.
        ("bytes over 2^62", patched(type_at, "<I", 28)[:dims_at + 4] + struct.pack("<QQ", 2**61 - 32, 1)
         + patched(type_at, "<I", 28)[dims_at + 20:], "(F64, 2305843009213693920 elements) is over 2^62 bytes"),
        ("rows not whole blocks", patched(dims_at + 4, "<Q", 65), "(Q8_0) has rows of 65, not a multiple of its block of 32"),
        ("misaligned offset", patched(offset_at, "<Q", 16), "has offset 16, not a multiple of the alignment 32"),
        ("offset past the end", patched(offset_at, "<Q", 2**40), "runs past the end of the"),
        ("overlap", patched(offset_at, "<Q", struct.unpack_from("<Q", data, tensor_info_offset(1) + 8 +
                                                                struct.unpack_from("<Q", data, t1)[0] + 4 + 16 + 4)[0]),
         "overlap"),
        ("truncated data", bytes(data[:-100]), "runs past the end of the"),
    ]
    # A bad general.alignment, in the file written with alignment 64 (its value is the field's last part).
    a64 = os.path.join(work, "synthetic-v3-a64.gguf")
    a64_data = bytearray(open(a64, "rb").read())
    field = gguf.GGUFReader(a64).fields["general.alignment"]
    value_at = field.offset + sum(len(p) * p.itemsize for p in field.parts) - 4
    for bad in (0, 48):
        d = bytearray(a64_data)
        struct.pack_into("<I", d, value_at, bad)
        cases.append((f"alignment {bad}", bytes(d), f"general.alignment must be a u32 power of 2, got {bad}"))
    d = bytearray(a64_data)
    struct.pack_into("<I", d, value_at - 4, 6)  # the value's type (u32 before it) as f32
    cases.append(("alignment f32", bytes(d), "general.alignment must be a u32 power of 2, got a value of type f32"))
    # Truncations everywhere in the header and tables.
    for cut in sorted({1, 4, 7, 8, 15, 16, 23, 24, 31, kv_start + 8, key0_type_at, key0_type_at + 2, t0, t0 + 3,
                       dims_at, type_at, offset_at, offset_at + 4, reader.data_offset - 1}):
        cases.append((f"truncated at {cut}", bytes(data[:cut]), None))
    for label, blob, expected in cases:
        path = os.path.join(work, "corrupt.gguf")
        with open(path, "wb") as f:
            f.write(blob)
        r = subprocess.run([tool, path], capture_output=True, text=True, timeout=60)
        lines = r.stderr.strip().splitlines()
        problems = []
        if r.returncode != 1:
            problems.append(f"exit {r.returncode} (1 expected)")
        if len(lines) != 1 or "corrupt.gguf: " not in (lines[0] if lines else ""):
            problems.append(f"stderr {r.stderr.strip()[:300]!r} is not one line naming the file")
        if expected and expected not in r.stderr:
            problems.append(f"expected {expected!r} in {r.stderr.strip()[:300]!r}")
        if expected is None and "truncated" not in r.stderr and "not a GGUF" not in r.stderr:
            problems.append(f"expected 'truncated' in {r.stderr.strip()[:300]!r}")
        tally.report(not problems, f"refused: {label}: {lines[0] if lines else ''}", problems)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True, help="helm-gguf-dump")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = ap.parse_args(argv)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="helm-gguf-") as work:
        base = check_synthetic(args.dump, work, tally)
        check_real(args.dump, os.path.abspath(args.root), tally)
        check_corrupt(args.dump, base, work, tally)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
