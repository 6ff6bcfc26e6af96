#!/usr/bin/env python3
"""gpu_speed_report.py B1.json B16.json PLAN.json COPY_GBS: one package's lines of the GPU check's
speed part (scripts/gpu-check.sh run), from helm-rt --stats-json at batch 1 and 16, the package's
plan (helmc --emit=plan-json with the same flags) and the device copy bandwidth (read + write) that
helm-gpu-linear-bench --bandwidth measured on the same machine.

Bytes read per batch-1 decode step are the plan's param_bytes of the units on the GPU (the
embedding reads one row, a head or block all its weights); the time per token beyond those bytes
is the measured time less what the copy bandwidth needs to read them. Figures only: never fails."""
import json
import sys


def load(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main() -> int:
    b1, b16, plan = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
    copy = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    if not b1 or not plan:
        print("   no figures (a run failed)")
        return 0
    try:
        report(b1, b16, plan, copy)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        print(f"   no figures ({type(e).__name__}: {e})")
    return 0


def report(b1, b16, plan, copy: float) -> None:
    k = plan["chosen_k"]
    gpu_bytes = sum(u["param_bytes"] for u in plan["units"][k:])
    tok_s = b1.get("decode_tok_s", 0)
    ms = 1000 / tok_s if tok_s else float("inf")
    line = (f"   load {b1['load_ms'] / 1000:.1f} s | prefill {b1['prefill_tok_s']:.0f} tok/s "
            f"({b1['prompt_tokens']} tokens) | decode {tok_s:.1f} tok/s = {ms:.2f} ms/token")
    if b16:
        line += f" | batch 16: {b16['decode_tok_s']:.0f} tok/s"
    print(line)
    line = f"   GPU stage: units {k}..{len(plan['units']) - 1}, {gpu_bytes / 1e9:.2f} GB read per token"
    if k == 0 and copy > 0:
        gbs = gpu_bytes * tok_s / 1e9
        floor_ms = gpu_bytes / (copy * 1e9) * 1000
        line += (f", {gbs:.0f} GB/s = {100 * gbs / copy:.0f}% of the device copy's {copy:.0f} GB/s; "
                 f"{ms - floor_ms:.2f} ms per token beyond the bytes")
    print(line)
    print(f"   per decode step: {b1.get('device_allocations_per_step', '?')} allocations "
          f"(first step {b1.get('device_allocations_first_step', '?')}), "
          f"{b1.get('host_syncs_per_step', '?')} host waits")
    predicted = plan["predicted_ms_per_token"]
    ratio = f"{ms / predicted:.2f}x" if predicted > 0 else "no prediction"
    line = f"   plan: {predicted:.2f} ms/token predicted, {ms:.2f} measured ({ratio})"
    # The per-block overhead the cost model would need to predict this run (delta_gpu of
    # docs/cost-model.md, for a profile of this machine): the time the plan does not explain,
    # spread over the GPU stage's units.
    gpu_units = len(plan["units"]) - k
    delta = plan.get("target", {}).get("gpu", {}).get("overhead_ms_per_block") if isinstance(plan.get("target"), dict) else None
    if k == 0 and gpu_units > 0 and ms != float("inf"):
        line += f"; implied overhead_ms_per_block {max(0.0, ms - predicted) / gpu_units + (delta or 0):.3f}"
    print(line)


if __name__ == "__main__":
    sys.exit(main())
