#!/usr/bin/env python3
"""Edits a .helmpkg the way a damaged or foreign file would look, following docs/package-format.md
(written from that document, not from HELM's reader or writer).

  pkgedit.py set-version FILE N            version field := N, header checksum recomputed (a well-formed
                                           file of another format version)
  pkgedit.py flip FILE SECTION OFFSET      inverts one byte at OFFSET inside section SECTION (by name,
                                           located through the section table); checksums left alone
  pkgedit.py section FILE SECTION          prints "offset size" of the section
"""
import struct
import sys

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    return (_rotl((acc + lane * P2) & M64, 31) * P1) & M64


def checksum64(data: bytes) -> int:
    """XXH64, seed 0, as §5 of docs/package-format.md spells it out."""
    n, i = len(data), 0
    if n >= 32:
        v = [(P1 + P2) & M64, P2, 0, (-P1) & M64]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], struct.unpack_from("<Q", data, i + 8 * j)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for x in v:
            h = (((h ^ _round(0, x)) * P1) + P4) & M64
    else:
        h = P5
    h = (h + n) & M64
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ ((struct.unpack_from("<I", data, i)[0] * P1) & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * P5) & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


# The document's test vectors: a wrong checksum here would make every edit below meaningless.
assert checksum64(b"") == 0xEF46DB3751D8E999
assert checksum64(b"a") == 0xD24EC4F1A98C6E5B
assert checksum64(b"abc") == 0x44BC2CF5AD770999
assert checksum64(b"Hello, World!") == 0xC49AACF8080FE47F
assert checksum64(bytes(i % 256 for i in range(1000))) == 0x6EF436B00EBA4078


def find_section(data: bytes, name: str):
    count, entry_size = struct.unpack_from("<II", data, 16)
    table = struct.unpack_from("<Q", data, 24)[0]
    for k in range(count):
        e = table + k * entry_size
        raw = data[e + 8:e + 40].split(b"\0", 1)[0].decode()
        if raw == name:
            return struct.unpack_from("<QQ", data, e + 40)
    sys.exit(f"pkgedit: no section {name!r}")


def main(argv):
    cmd, path = argv[1], argv[2]
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if cmd == "set-version":
        struct.pack_into("<I", data, 8, int(argv[3]))
        struct.pack_into("<Q", data, 56, checksum64(bytes(data[:56])))
    elif cmd == "flip":
        offset, size = find_section(data, argv[3])
        at = int(argv[4])
        if at >= size:
            sys.exit(f"pkgedit: offset {at} outside section {argv[3]!r} ({size} bytes)")
        data[offset + at] ^= 0xFF
    elif cmd == "section":
        print(*find_section(data, argv[3]))
        return 0
    else:
        sys.exit(f"pkgedit: unknown command {cmd!r}")
    with open(path, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
