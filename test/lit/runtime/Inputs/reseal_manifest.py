#!/usr/bin/env python3
"""Replaces text in a .helmpkg's manifest by text of the same length and re-seals the file (section,
table and header checksums recomputed), the way a foreign or hand-edited package would look: it
passes every integrity check, so only the runtime's consistency checks can catch it.

  reseal_manifest.py FILE OLD NEW
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pkgedit import checksum64  # noqa: E402  (XXH64 as docs/package-format.md defines it)


def main(path, old, new):
    old, new = old.encode(), new.encode()
    if len(old) != len(new):
        sys.exit("reseal_manifest: OLD and NEW must have the same length")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    count, entry_size = struct.unpack_from("<II", data, 16)
    table = struct.unpack_from("<Q", data, 24)[0]
    for k in range(count):
        e = table + k * entry_size
        if data[e + 8:e + 40].split(b"\0", 1)[0] != b"manifest":
            continue
        offset, size = struct.unpack_from("<QQ", data, e + 40)
        manifest = bytes(data[offset:offset + size])
        if manifest.count(old) != 1:
            sys.exit(f"reseal_manifest: {old!r} occurs {manifest.count(old)} times in the manifest")
        manifest = manifest.replace(old, new)
        data[offset:offset + size] = manifest
        struct.pack_into("<Q", data, e + 56, checksum64(manifest))
        break
    else:
        sys.exit("reseal_manifest: no manifest section")
    struct.pack_into("<Q", data, 48, checksum64(bytes(data[table:table + count * entry_size])))
    struct.pack_into("<Q", data, 56, checksum64(bytes(data[:56])))
    with open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main(*sys.argv[1:4])
