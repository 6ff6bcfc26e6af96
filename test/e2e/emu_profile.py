"""A target profile JSON (docs/target-profile.md) for an emulated GPU of a chosen VRAM size.

The e2e tests plan for a GPU of an exact size with `--target=emu:<profile.json>`; everything but
the VRAM is a plain mid-range machine (the tests force the split, so speeds only have to be valid).
"""

from __future__ import annotations

import json
import os


def write_profile(folder: str, name: str, vram_bytes: int) -> str:
    """Writes <folder>/<name>.json with `vram_bytes` of VRAM and no reserve; returns its path."""
    profile = {
        "name": name,
        "cpu": {"dram_bw_gbs": 20, "l3_bytes": 32 << 20, "l3_bw_gbs": 200, "p_dec_gflops": 50,
                "p_pre_gflops": 200, "ram_bytes": 8 << 30, "overhead_ms_per_block": 0.01},
        "gpu": {"vram_bytes": vram_bytes, "reserved_bytes": 0, "mem_bw_gbs": 200,
                "p_dec_gflops": 1000, "p_pre_gflops": 10000, "overhead_ms_per_block": 0.01},
        "link": {"bw_gbs": 16, "latency_us": 5},
    }
    path = os.path.join(folder, name + ".json")
    with open(path, "w") as f:
        json.dump(profile, f)
    return path
