#!/usr/bin/env python3
"""Writes small valid .helmpkg files as fuzzing seeds (test/fuzz/package-corpus/valid-*.helmpkg).

This is a second, independent implementation of docs/package-format.md (the C++ one is
contract/format + compiler/package): helm-package-tests opens every seed with full verification,
so the two implementations and the spec are checked against each other. Standard library only.

  python3 test/fuzz/make_package_seeds.py            (writes the seeds)
  python3 test/fuzz/make_package_seeds.py --vector   (prints the checksum test vectors)
"""
import json
import pathlib
import struct
import sys

M64 = (1 << 64) - 1
P1 = 0x9E3779B185EBCA87
P2 = 0xC2B2AE3D27D4EB4F
P3 = 0x165667B19E3779F9
P4 = 0x85EBCA77C2B2AE63
P5 = 0x27D4EB2F165667C5


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    acc = (acc + lane * P2) & M64
    return (_rotl(acc, 31) * P1) & M64


def checksum64(data: bytes, seed: int = 0) -> int:
    """XXH64, as defined in docs/package-format.md."""
    n = len(data)
    i = 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed & M64, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for k in range(4):
            h ^= _round(0, v[k])
            h = (h * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * P1) & M64
        h = (_rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (_rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


KINDS = {"manifest": 1, "cpu-weights": 2, "gpu-weights": 3, "cpu-code": 4, "gpu-code": 5, "tokenizer": 6}
PAGE = 4096


def align(x, a):
    return (x + a - 1) // a * a


def build(sections):
    """sections: list of (kind number, name, bytes). The table goes at offset 64 when it fits in the
    first page (at most 63 sections), else after the last section at a multiple of 64."""
    body = bytearray(PAGE)  # header page, filled in at the end
    table = bytearray()
    for kind, name, data in sections:
        offset = align(len(body), PAGE)
        body += bytes(offset - len(body)) + data
        raw = name.encode("ascii")
        assert 1 <= len(raw) <= 31
        table += struct.pack("<II32sQQQ", kind, 0, raw, offset, len(data), checksum64(bytes(data)))
    if len(sections) <= 63:
        table_offset = 64
        body[64:64 + len(table)] = table
    else:
        table_offset = align(len(body), 64)
        body += bytes(table_offset - len(body)) + table
    header = struct.pack("<8sIIIIQQQQ", b"HELMPKG\0", 1, 64, len(sections), 64, table_offset, len(body), 0,
                         checksum64(bytes(table)))
    header += struct.pack("<Q", checksum64(header))
    body[0:64] = header
    return bytes(body)


def tensors(count, seed):
    out, offsets = bytearray(), []
    for t in range(count):
        out += bytes(align(len(out), 64) - len(out))
        offsets.append(len(out))
        out += bytes((seed * 31 + t * 7 + i) & 0xFF for i in range(13 + 40 * t))
    return bytes(out), offsets


def main():
    if "--vector" in sys.argv:
        for text in (b"", b"a", b"abc"):
            print(f"{text!r}: 0x{checksum64(text):016X}")
        print(f"bytes i mod 256, 1000 bytes: 0x{checksum64(bytes(i & 0xFF for i in range(1000))):016X}")
        return
    out_dir = pathlib.Path(__file__).resolve().parent / "package-corpus"
    out_dir.mkdir(exist_ok=True)
    w, offs = tensors(4, 1)
    manifest = {"config": {"num_layers": 2}, "tensors": [{"name": f"t{i}", "offset": o} for i, o in enumerate(offs)]}
    seeds = {
        "valid-minimal": [(1, "manifest", b"{}")],
        "valid-weights": [(1, "manifest", json.dumps(manifest).encode()), (2, "cpu_weights", w),
                          (6, "tokenizer", b'{"model":{"type":"BPE"}}')],
        "valid-all-kinds": [(1, "manifest", b'{"stages":["cpu","gpu"],"plan":{"k":1}}'),
                            (2, "cpu_weights", tensors(2, 2)[0]), (3, "gpu_weights", tensors(3, 3)[0]),
                            (4, "cpu_code", b"\x7fELF" + bytes(60)), (5, "gpu_code", b"//ptx\n"),
                            (6, "tokenizer", b"{}"), (99, "future", b"unknown kind, skipped"),
                            (4, "empty", b"")],
        "valid-table-at-end": [(1, "manifest", b'{"tensors":[]}')]
                              + [(4 + i % 2, f"part_{i}", bytes([i]) * (3 if i % 10 == 0 else 0)) for i in range(69)],
    }
    for name, sections in seeds.items():
        (out_dir / f"{name}.helmpkg").write_bytes(build(sections))
        print(f"wrote {name}.helmpkg")


if __name__ == "__main__":
    main()
