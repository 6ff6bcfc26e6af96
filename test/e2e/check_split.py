#!/usr/bin/env python3
"""Heterogeneous execution on the emulated GPU: every corpus model at every split point.

For each model (test/models/*/model.onnx) with N units (embedding, one per block, head) the script
  1. compiles the all-CPU package (`helmc model.onnx -o cpu.helmpkg`) and runs it greedily for 32
     tokens at batch 1 (one prompt) and batch 2 (two prompts of different lengths);
  2. for every k in 0..N compiles `--target=emu:rtx4060-laptop --force-split=k` (units [0, k) on
     the CPU, the rest on the emulated GPU) and runs the same two generations with --stats-json;
     for every k < N also with `--gpu-code=kernels`: the GPU stage in the kernel form a CUDA GPU
     runs (host code calling helm_dev_* kernels, which emu implements on the host);
  3. requires the generated ids to be identical to the all-CPU package's, and the emu's link
     counters to show, for every decode step with B rows:
       host -> device: exactly one transfer of B x H x dtype bytes, the boundary activation
                       (B x 8 bytes of token ids when k = 0: the whole model is on the device);
       device -> host: exactly one transfer of B x V x 4 bytes, the f32 logits (the head is on the
                       device whenever k < N);
     so no weight byte crosses the link after load; at k = N nothing crosses at all. The host
     waits for the device once per step (for the logits; twice for code compiled for the host,
     which waits before it touches its buffers), and the device allocates nothing after the first
     decode step (the stage frees its buffers and the device keeps them for reuse);
It also checks that a package whose GPU stage does not fit the emu arena fails at load with one
line naming the sizes, and that a profile JSON given as --target=emu:profile.json plans and runs.

The expected byte counts come from the model's config.json (written by the generator from the
Hugging Face config, not from HELM), and the all-CPU package was checked against ONNX Runtime by
check_generation.py. Prints one line per model and split, then "N passed, M failed".

  python check_split.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --models test/models
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_profile import write_profile  # noqa: E402

N_NEW = 32
TARGET = "emu:rtx4060-laptop"
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def prompts_for(vocab: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=7).tolist(), rng.integers(0, vocab, size=4).tolist()]


def compile_package(helmc: str, model: str, out: str, extra: list[str]) -> None:
    r = subprocess.run([helmc, model, "-q", "-o", out] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"helmc {' '.join(extra)} failed: {r.stderr.strip()}")


def generate(helm_rt: str, package: str, prompts: list[list[int]], stats: str,
             extra: list[str] = ()) -> list[list[int]]:
    cmd = [helm_rt, package, "-n", str(N_NEW), "--temperature", "0", "--ignore-eos", "--emit-ids",
           "-q", "-t", "1", "--stats-json", stats] + list(extra)
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"helm-rt failed: {r.stderr.strip()}")
    lines = r.stdout.strip().splitlines()[-len(prompts):]
    return [[int(x) for x in line.split(",")] for line in lines]


def check_link(stats: dict, k: int, n_units: int, batch: int, cfg: dict, form: str) -> str | None:
    steps = N_NEW - 1  # the first token comes from the prefill
    if stats.get("decode_steps") != steps:
        return f"decode_steps {stats.get('decode_steps')}, expected {steps}"
    if k == n_units:
        if stats["link_bytes_per_step"] != 0 or "device" in stats:
            return "an all-CPU package reported link traffic or a device"
        return None
    width = cfg["hidden_size"] * DTYPE_BYTES[cfg["dtype"]] if k > 0 else 8
    want = {
        "link_decode_h2d_bytes": steps * batch * width,
        "link_decode_h2d_transfers": steps,
        "link_decode_d2h_bytes": steps * batch * cfg["vocab_size"] * 4,
        "link_decode_d2h_transfers": steps,
        "link_step_bytes_min": batch * (width + cfg["vocab_size"] * 4),
        "link_step_bytes_max": batch * (width + cfg["vocab_size"] * 4),
        "link_transfers_per_step": 2,
        # The host waits once, for the logits; code compiled for the host also waits before it
        # touches its buffers.
        "host_syncs_per_step": 1 if form == "kernels" else 2,
        # The buffers of a step are freed by the stage's code and kept by the device for the next
        # step: no allocation after the first decode step (a buffer never freed would be one).
        "device_allocations_per_step": 0,
    }
    for key, value in want.items():
        if stats.get(key) != value:
            return f"{key} = {stats.get(key)}, expected {value}"
    if stats["link_load_bytes"] <= 0:
        return "no weight bytes moved to the device at load"
    return None


def check_model(args, name: str) -> list[tuple[bool, str]]:
    folder = os.path.join(args.models, name)
    model = os.path.join(folder, "model.onnx")
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    n_units = cfg["num_units"]
    prompts = prompts_for(cfg["vocab_size"], seed=sum(map(ord, name)))
    runs = {1: prompts[:1], 2: prompts}
    results: list[tuple[bool, str]] = []
    with tempfile.TemporaryDirectory(prefix=f"helm-split-{name}-") as tmp:
        cpu_pkg = os.path.join(tmp, "cpu.helmpkg")
        stats_path = os.path.join(tmp, "stats.json")
        try:
            compile_package(args.helmc, model, cpu_pkg, [])
            reference = {b: generate(args.helm_rt, cpu_pkg, p, stats_path) for b, p in runs.items()}
        except RuntimeError as e:
            return [(False, f"{name}: all-CPU reference: {e}")]
        # Both forms of the GPU stage's code: compiled for the host, and the kernel form a CUDA GPU
        # runs (emu runs its kernel calls with host kernels), which must give the same tokens.
        splits = [(k, "host") for k in range(n_units + 1)] + [(k, "kernels") for k in range(n_units)]
        for k, form in splits:
            pkg = os.path.join(tmp, f"k{k}-{form}.helmpkg")
            try:
                compile_package(args.helmc, model, pkg, [f"--target={TARGET}", f"--force-split={k}",
                                                         f"--gpu-code={form}"])
                for batch, p in runs.items():
                    ids = generate(args.helm_rt, pkg, p, stats_path)
                    with open(stats_path) as f:
                        stats = json.load(f)
                    label = f"{name} k={k}/{n_units} {form} batch {batch}"
                    if ids != reference[batch]:
                        first = next(i for i, (a, b) in enumerate(zip(ids, reference[batch])) if a != b)
                        results.append((False, f"{label}: tokens differ from the all-CPU package "
                                               f"(sequence {first})"))
                        continue
                    problem = check_link(stats, k, n_units, batch, cfg, form)
                    if problem:
                        results.append((False, f"{label}: {problem}"))
                    else:
                        per_step = stats["link_bytes_per_step"]
                        results.append((True, f"{label}: {N_NEW} tokens identical, "
                                              f"{per_step:.0f} link bytes per step"))
            except RuntimeError as e:
                results.append((False, f"{name} k={k} {form}: {e}"))
    return results


def check_limits(args) -> list[tuple[bool, str]]:
    """The arena limit and a profile-file target, on one model."""
    results = []
    name = "llama-fp32"
    folder = os.path.join(args.models, name)
    model = os.path.join(folder, "model.onnx")
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    prompts = prompts_for(cfg["vocab_size"], seed=1)[:1]
    with tempfile.TemporaryDirectory(prefix="helm-split-limits-") as tmp:
        pkg = os.path.join(tmp, "k1.helmpkg")
        stats = os.path.join(tmp, "stats.json")
        compile_package(args.helmc, model, pkg, [f"--target={TARGET}", "--force-split=1"])
        # 1. The GPU stage's weights do not fit a 64 KiB arena: one line naming the sizes, no stats.
        r = subprocess.run([args.helm_rt, pkg, "--prompt-ids", "1,2,3", "-n", "4", "--emu-vram", "64KiB",
                            "--stats-json", stats], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        ok = (r.returncode == 1 and len(lines) == 1 and "cannot allocate" in lines[0]
              and "64.0 KiB of the 64.0 KiB arena free" in lines[0] and "bytes" in lines[0]
              and not os.path.exists(stats) and r.stdout == "")
        results.append((ok, f"arena too small: {'one-line error' if ok else 'unexpected'}: "
                            f"rc {r.returncode}: {r.stderr.strip()}"))
        # 2. A profile file as the emu target: a GPU that holds about half the weights, so the
        # planner must split (at a short context: at the default 4096 the GPU blocks' KV would
        # spill past the little memory left and stream back every step, and the planner rightly
        # keeps everything on the CPU); tokens equal the all-CPU package's.
        size = os.path.getsize(model)
        profile_path = write_profile(tmp, "half-gpu", size // 2)
        cpu_pkg = os.path.join(tmp, "cpu.helmpkg")
        split_pkg = os.path.join(tmp, "half.helmpkg")
        try:
            compile_package(args.helmc, model, cpu_pkg, [])
            compile_package(args.helmc, model, split_pkg, [f"--target=emu:{profile_path}", "--context=64"])
            want = generate(args.helm_rt, cpu_pkg, prompts, stats)
            got = generate(args.helm_rt, split_pkg, prompts, stats, ["--emu-throttle"])
            with open(stats) as f:
                s = json.load(f)
            cap = s.get("device_capacity_bytes")
            ok = got == want and cap == size // 2 // 256 * 256 and s["link_transfers_per_step"] == 2
            results.append((ok, f"emu:profile.json ({size // 2} B of VRAM, throttled): "
                                f"{'tokens identical' if got == want else 'tokens differ'}, "
                                f"arena {cap} B, {s['link_bytes_per_step']:.0f} link bytes per step"))
        except RuntimeError as e:
            results.append((False, f"emu:profile.json: {e}"))
        # 3. A package for a real GPU (the kernel form plus the CUDA kernels' fatbin): without a GPU
        # it fails at load with one line saying so; with one its first logits match the all-CPU
        # package's within 1e-3 of the largest.
        cuda_pkg = os.path.join(tmp, "cuda.helmpkg")
        r = subprocess.run([args.helmc, model, "-q", "-o", cuda_pkg, "--target=rtx4060-laptop",
                            "--force-split=1"], capture_output=True, text=True)
        if r.returncode != 0:
            ok = "built without CUDA" in r.stderr and not os.path.exists(cuda_pkg)
            results.append((ok, f"CUDA package: helmc without CUDA refuses: {r.stderr.strip()}"))
        else:
            r = subprocess.run([args.helm_rt, cuda_pkg, "--prompt-ids", "1,2,3", "-n", "4",
                                "--stats-json", stats], capture_output=True, text=True)
            lines = r.stderr.strip().splitlines()
            if r.returncode == 0:
                # On a GPU the arithmetic differs from the CPU's (cuBLAS summation order, no
                # probability rounding): compare the first step's logits within a tolerance.
                got_l, want_l = os.path.join(tmp, "cuda.logits"), os.path.join(tmp, "cpu.logits")
                runs = [subprocess.run([args.helm_rt, p, "--prompt-ids", ",".join(map(str, prompts[0])),
                                        "-n", "1", "--temperature", "0", "-q", "--logits-out", out],
                                       capture_output=True, text=True)
                        for p, out in ((cuda_pkg, got_l), (cpu_pkg, want_l))]
                if any(x.returncode != 0 for x in runs):
                    results.append((False, "CUDA package on a GPU: " +
                                    " | ".join(x.stderr.strip() for x in runs)))
                else:
                    a = np.fromfile(got_l, dtype=np.float32)
                    b = np.fromfile(want_l, dtype=np.float32)
                    err = float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-30) \
                        if a.shape == b.shape else float("inf")
                    results.append((err <= 1e-3, f"CUDA package on a GPU: first logits within "
                                                 f"{err:.2e} of the largest (limit 1e-3)"))
            else:
                ok = (r.returncode == 1 and len(lines) == 1 and "CUDA GPU" in lines[0]
                      and "there is none here" in lines[0] and r.stdout == "")
                results.append((ok, f"CUDA package without a GPU: rc {r.returncode}: "
                                    f"{r.stderr.strip()}"))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--only", help="run one model")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    names = sorted(d for d in os.listdir(args.models)
                   if os.path.exists(os.path.join(args.models, d, "model.onnx")))
    if args.only:
        names = [args.only]
    results: list[tuple[bool, str]] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for model_results in pool.map(lambda n: check_model(args, n), names):
            for ok, line in model_results:
                print(("PASS " if ok else "FAIL ") + line, flush=True)
            results += model_results
    if not args.only:
        for ok, line in check_limits(args):
            print(("PASS " if ok else "FAIL ") + line, flush=True)
            results.append((ok, line))
    failed = sum(1 for ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
