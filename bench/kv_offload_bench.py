#!/usr/bin/env python3
"""Paged KV offload on the emulated GPU: context reached and decode speed (thesis Figure 6.1).

Two tables, both on `emu` (a test and research device: the GPU stage runs on this CPU, the link is
counted, not a GPU speed claim):

  1. Context reached vs device KV capacity. llama-fp32 from the test corpus (2 layers, tiny, so the
     runs take seconds), blocks and head on the emulated GPU (--force-split=1). For a device that
     holds P KV pages of 512 positions (P = 1, 2, 4: --emu-vram = the GPU stage's weights + two
     staging buffers + P pages, at --kv-watermark 1), it reports
       - without offload: the longest context the device holds (P x 512), checked by running one
         token past it, which must be refused before generating;
       - with offload: a run to 8 x that context (a prompt of 8 x P x 512 - 16 tokens, prefilled page
         by page, then 16 decoded tokens), which must succeed, with the pages evicted/prefetched;
       - the host-RAM bound on context from `helmc --emit=plan` for the same model and target.
  2. Decode tok/s vs context, offload on and off. The Qwen3-0.6B-shaped fp16 model of
     bench/e2e_bench.py (28 layers, built there and cached in bench/.cache/qwen3-0.6b-kv-fp16),
     split at k = 15 (14 blocks and the head on the emulated GPU). For contexts L (prompt of L - 16
     tokens, 16 decoded tokens): offload on, with a device that holds 2 KV pages of 512 (so
     L / 512 - 2 pages stream back per layer and step), and offload off on an uncapped device.
     The ratio on/off is the decode slowdown from offload (here: the cost of the copies on the
     host; on a GPU it is PCIe time).

Holds /tmp/helm-build.lock (no C++ build shares the cores). Prints the tables; --json writes them.

  .venv/bin/python bench/kv_offload_bench.py [--helmc build/bin/helmc] [--helm-rt build/bin/helm-rt]
                                              [--contexts 1024,4096] [--threads 2] [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOCK = "/tmp/helm-build.lock"
PAGE = 512
N_DECODE = 16


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def section_bytes(helm_rt: str, pkg: str, name: str) -> int:
    info = run([helm_rt, pkg, "--info"]).stdout
    for line in info.splitlines():
        parts = line.split()
        if parts[:2] == ["section", name]:
            return int(parts[2])
    raise RuntimeError(f"{pkg}: no section {name}")


def generate(helm_rt: str, pkg: str, prompt: list[int], n: int, extra: list[str], threads: int):
    stats = os.path.join(os.path.dirname(pkg), "stats.json")
    if os.path.exists(stats):
        os.remove(stats)
    r = run([helm_rt, pkg, "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n),
             "--temperature", "0", "--ignore-eos", "-q", "-t", str(threads), "--stats-json", stats]
            + extra)
    if r.returncode != 0:
        return None, r.stderr.strip()
    with open(stats) as f:
        return json.load(f), ""


def context_table(args, tmp: str) -> list[dict]:
    model = ROOT / "test" / "models" / "llama-fp32" / "model.onnx"
    cfg = json.load(open(model.parent / "config.json"))
    layers, width = cfg["num_layers"], cfg["num_key_value_heads"] * cfg["head_dim"]
    page = layers * 2 * PAGE * width * 4
    staging = 2 * page // layers
    pkg = os.path.join(tmp, "llama.helmpkg")
    r = run([args.helmc, str(model), "-q", "-o", pkg, "--target=emu:rtx4060-laptop",
             "--force-split=1", "--max-context", str(1 << 20)])
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    weights = section_bytes(args.helm_rt, pkg, "gpu_weights")
    plan = run([args.helmc, str(model), "--target=rtx4060-laptop", "--force-split=1", "--emit=plan"])
    host_limit = next((line for line in plan.stdout.splitlines() if line.startswith("context")), "")
    rng = np.random.default_rng(7)
    rows = []
    for pages in ([1, 2] if args.quick else [1, 2, 4]):
        # Weights, staging, P pages and 4 MiB for the stage's activations and I/O buffers; the
        # watermark gives the KV pool exactly P pages (half a page of slack) of the free memory.
        free = staging + pages * page + (4 << 20)
        vram = weights + free
        watermark = (staging + (pages + 0.5) * page) / free
        common = ["--kv-page", str(PAGE), "--kv-watermark", f"{watermark:.6f}", "--emu-vram", str(vram)]
        limit = pages * PAGE
        # Without offload: one token past the device's pages is refused up front.
        prompt = rng.integers(0, cfg["vocab_size"], size=limit - N_DECODE).tolist()
        fits, err_fit = generate(args.helm_rt, pkg, prompt, N_DECODE, common + ["--kv-offload", "off"],
                                 args.threads)
        over, err_over = generate(args.helm_rt, pkg, prompt, N_DECODE + 1,
                                  common + ["--kv-offload", "off"], args.threads)
        # With offload: 8 x the context.
        long_prompt = rng.integers(0, cfg["vocab_size"], size=8 * limit - N_DECODE).tolist()
        offload, err_off = generate(args.helm_rt, pkg, long_prompt, N_DECODE, common, args.threads)
        rows.append({
            "device_pages": pages,
            "device_kv_tokens": limit,
            "no_offload_fits": fits is not None,
            "no_offload_refuses_one_more": over is None and "KV offload off" in err_over,
            "offload_context": 8 * limit if offload else 0,
            "offload_error": err_off,
            "no_offload_error": err_fit,
            "ratio": 8.0 if offload else 0.0,
            "pages_evicted": offload["kv_pages_evicted"] if offload else 0,
            "pages_prefetched": offload["kv_pages_prefetched"] if offload else 0,
            "device_pages_peak": offload["kv_device_pages_peak"] if offload else 0,
            "host_ram_limit": host_limit,
        })
    return rows


def speed_table(args, tmp: str) -> list[dict]:
    cache = ROOT / "bench" / ".cache" / "qwen3-0.6b-kv-fp16"
    model = cache / "model.onnx"
    if not model.exists():
        raise RuntimeError(f"{model} missing: run bench/e2e_bench.py once to build it")
    cfg = json.load(open(cache / "config.json"))
    pkg = os.path.join(tmp, "qwen3.helmpkg")
    r = run([args.helmc, str(model), "-q", "-o", pkg, "--target=emu:rtx4060-laptop", "--force-split=15",
             "--max-context", "16384"])
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    weights = section_bytes(args.helm_rt, pkg, "gpu_weights")
    gpu_layers = cfg["num_layers"] - 14  # units 15..29: blocks 14..27 and the head
    width = cfg["num_key_value_heads"] * cfg["head_dim"]
    page = gpu_layers * 2 * PAGE * width * 4
    staging = 2 * page // gpu_layers
    # Two pages of KV on the device, 256 MiB for the stage's activations (a 512-token prefill
    # chunk); the watermark gives the KV pool exactly 2 pages of the free memory.
    free = staging + 2 * page + (256 << 20)
    vram = weights + free
    watermark = (staging + 2.5 * page) / free
    rng = np.random.default_rng(11)
    rows = []
    for context in args.contexts:
        prompt = rng.integers(0, cfg["vocab_size"], size=context - N_DECODE).tolist()
        on, err_on = generate(args.helm_rt, pkg, prompt, N_DECODE,
                              ["--kv-page", str(PAGE), "--kv-watermark", f"{watermark:.6f}",
                               "--emu-vram", str(vram)],
                              args.threads)
        # The same with every copy taking latency + bytes / bandwidth of the target's PCIe link
        # (16 GB/s, 5 us): the part of the slowdown a GPU would pay for the page traffic.
        throttled, err_thr = generate(args.helm_rt, pkg, prompt, N_DECODE,
                                      ["--kv-page", str(PAGE), "--kv-watermark", f"{watermark:.6f}",
                                       "--emu-vram", str(vram), "--emu-throttle"], args.threads)
        off, err_off = generate(args.helm_rt, pkg, prompt, N_DECODE,
                                ["--kv-page", str(PAGE), "--kv-offload", "off"], args.threads)
        if not on or not off or not throttled:
            raise RuntimeError(err_on or err_off or err_thr)
        rows.append({
            "context": context,
            "decode_tok_s_offload": on["decode_tok_s"],
            "decode_tok_s_no_offload": off["decode_tok_s"],
            "slowdown": off["decode_tok_s"] / on["decode_tok_s"],
            "decode_tok_s_offload_throttled": throttled["decode_tok_s"],
            "slowdown_throttled": off["decode_tok_s"] / throttled["decode_tok_s"],
            "pages_evicted": on["kv_pages_evicted"],
            "pages_prefetched": on["kv_pages_prefetched"],
            "link_bytes_per_step_offload": on["link_bytes_per_step"],
            "link_bytes_per_step_no_offload": off["link_bytes_per_step"],
            "prefill_tok_s_offload": on["prefill_tok_s"],
            "prefill_tok_s_no_offload": off["prefill_tok_s"],
        })
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", default=str(ROOT / "build" / "bin" / "helmc"))
    ap.add_argument("--helm-rt", default=str(ROOT / "build" / "bin" / "helm-rt"))
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="P = 1, 2 and no speed table")
    ap.add_argument("--json", help="write both tables here")
    args = ap.parse_args()
    args.contexts = [int(c) for c in args.contexts.split(",")]
    with open(LOCK, "w") as lock, tempfile.TemporaryDirectory(prefix="helm-kv-bench-") as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ctx = context_table(args, tmp)
        print("Context reached vs device KV capacity (llama-fp32, emu, pages of 512 positions)")
        print(f"{'device pages':>12} {'no offload':>11} {'refuses +1':>10} {'offload':>9} {'ratio':>6}"
              f" {'evicted':>8} {'prefetched':>11} {'peak':>5}")
        for r in ctx:
            print(f"{r['device_pages']:>12} {r['device_kv_tokens'] if r['no_offload_fits'] else 0:>11}"
                  f" {'yes' if r['no_offload_refuses_one_more'] else 'NO':>10} {r['offload_context']:>9}"
                  f" {r['ratio']:>5.0f}x {r['pages_evicted']:>8} {r['pages_prefetched']:>11}"
                  f" {r['device_pages_peak']:>5}")
            if r["offload_error"]:
                print("   offload run failed:", r["offload_error"])
            if r["no_offload_error"]:
                print("   run without offload failed:", r["no_offload_error"])
        if ctx:
            print(ctx[0]["host_ram_limit"].replace("context ", "host RAM bound (helmc --emit=plan, "
                                                   "rtx4060-laptop host): ", 1))
        speed = [] if args.quick else speed_table(args, tmp)
        if speed:
            print()
            print(f"Decode speed vs context (Qwen3-0.6B-shaped fp16, k = 15, emu, {args.threads} "
                  f"threads, {N_DECODE} decoded tokens; offload: 2 device pages of 512)")
            print(f"{'context':>8} {'no offload':>11} {'offload':>8} {'slowdown':>9} {'throttled':>10}"
                  f" {'slowdown':>9} {'link B/step on':>15} {'off':>9} {'evicted':>8}")
            for r in speed:
                print(f"{r['context']:>8} {r['decode_tok_s_no_offload']:>11.2f} {r['decode_tok_s_offload']:>8.2f}"
                      f" {r['slowdown']:>8.2f}x {r['decode_tok_s_offload_throttled']:>10.2f}"
                      f" {r['slowdown_throttled']:>8.2f}x {r['link_bytes_per_step_offload']:>15.0f}"
                      f" {r['link_bytes_per_step_no_offload']:>9.0f} {r['pages_evicted']:>8}")
            print("(decode tok/s; 'throttled': offload with --emu-throttle, copies at 16 GB/s + 5 us)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"context": ctx, "speed": speed}, f, indent=2)
    return 0 if all(r["offload_context"] for r in ctx) else 1


if __name__ == "__main__":
    sys.exit(main())
