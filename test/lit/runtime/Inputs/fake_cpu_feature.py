#!/usr/bin/env python3
"""fake_cpu_feature.py FILE: makes a .helmpkg ask for a CPU feature no machine has. One entry of
the manifest's target.features with an 8-letter name ("+avx512vl", "-cldemote", ...) becomes
"+helmfake" (same length, so the manifest is re-sealed in place by reseal_manifest.py): the package
passes every checksum, and the only thing wrong with it is a CPU feature this machine lacks."""
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reseal_manifest  # noqa: E402


def manifest_text(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read()
    count, entry_size = struct.unpack_from("<II", data, 16)
    table = struct.unpack_from("<Q", data, 24)[0]
    for k in range(count):
        e = table + k * entry_size
        if data[e + 8:e + 40].split(b"\0", 1)[0] == b"manifest":
            offset, size = struct.unpack_from("<QQ", data, e + 40)
            return data[offset:offset + size].decode()
    sys.exit("fake_cpu_feature: no manifest section")


def main(path: str) -> None:
    features = json.loads(manifest_text(path))["target"]["features"]
    for entry in features.split(","):
        if re.fullmatch(r"[+-][a-z0-9]{8}", entry):
            old = f'"features": "{features}"'
            new = old.replace(entry, "+helmfake", 1) if features.startswith(entry) else \
                old.replace("," + entry, ",+helmfake", 1)
            reseal_manifest.main(path, old, new)
            return
    sys.exit("fake_cpu_feature: no 8-letter feature in target.features")


if __name__ == "__main__":
    main(sys.argv[1])
