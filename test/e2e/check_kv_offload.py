#!/usr/bin/env python3
"""Paged KV cache with host offload, end to end on the emulated GPU.

The GPU stage's KV cache is paged (docs/kv-cache.md). This script compiles llama-fp32 (2 layers,
KV rows of 2 heads x 16) with its blocks and head on the GPU (--force-split=1) for a target given
as a profile JSON whose VRAM holds the GPU stage's weights plus room for exactly two KV pages of
512 positions (at the default --kv-watermark 0.8) and nothing near a third, then:

  1. generates 4100 greedy tokens from an 8-token prompt (positions up to 4107: 9 pages) and
     requires the ids to be identical to the same package run on an uncapped emulated GPU with
     --kv-offload=off (no page ever leaves the device);
  2. checks the paging counters against the page arithmetic of the design (not against a previous
     run): with 2 device pages the oldest full page is evicted whenever a new one is needed, so
     after position p the pages 0 .. floor(p/512) - 2 are on the host. Each decode step at
     position p streams those pages back once per layer:
         kv_pages_evicted    = floor(4106 / 512) - 1                        = 7
         kv_pages_prefetched = 2 * sum over decode positions p of max(0, floor(p/512) - 1)
         kv_device_pages_peak = 2
     and the uncapped run evicts and prefetches nothing;
     and at batch 2 (prompts of 8 and 5 tokens, 2100 tokens each) on the same two device pages,
     one per sequence: every page but each sequence's tail is evicted, so
         kv_pages_evicted    = sum over sequences of floor(last position / 512)
         kv_pages_prefetched = 2 * sum over sequences and decode positions p of floor(p / 512)
     with the ids of both sequences identical to the uncapped run without offload;
  3. the capped target with --kv-offload=off fails before generating, in one line naming the
     pages needed and the pages the device holds;
  4. a context whose KV cannot fit host RAM (a package compiled for a 2^31-token context, asked
     for 2^31 - 9 tokens with the GPU holding two pages) fails before generating, in one line
     naming the bytes needed and available, with no output.

Prints one line per check, then "N passed, M failed".

  python check_kv_offload.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --models test/models
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_profile import write_profile  # noqa: E402

PAGE = 512
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
N_NEW = 4100


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def generate(helm_rt: str, pkg: str, stats: str, extra: list[str]) -> list[int]:
    r = run([helm_rt, pkg, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", str(N_NEW),
             "--temperature", "0", "--ignore-eos", "--emit-ids", "-q", "-t", "1",
             "--stats-json", stats] + extra)
    if r.returncode != 0:
        raise RuntimeError(f"helm-rt {' '.join(extra)} failed: {r.stderr.strip()}")
    return [int(x) for x in r.stdout.strip().splitlines()[-1].split(",")]


def generate_batch(helm_rt: str, pkg: str, prompts: list[list[int]], n: int, stats: str,
                   extra: list[str]) -> list[list[int]]:
    cmd = [helm_rt, pkg, "-n", str(n), "--temperature", "0", "--ignore-eos", "--emit-ids", "-q",
           "-t", "1", "--stats-json", stats] + extra
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    r = run(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"helm-rt {' '.join(extra)} failed: {r.stderr.strip()}")
    lines = r.stdout.strip().splitlines()[-len(prompts):]
    return [[int(x) for x in line.split(",")] for line in lines]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    model = os.path.join(args.models, "llama-fp32", "model.onnx")
    with open(os.path.join(args.models, "llama-fp32", "config.json")) as f:
        cfg = json.load(f)
    layers = cfg["num_layers"]
    width = cfg["num_key_value_heads"] * cfg["head_dim"]
    page_bytes = layers * 2 * PAGE * width * 4  # all layers' K and V of 512 positions, f32
    staging = 2 * page_bytes // layers          # two buffers of one layer's K and V of a page
    results: list[tuple[bool, str]] = []

    with tempfile.TemporaryDirectory(prefix="helm-kv-offload-") as tmp:
        # The GPU stage's weights, from an uncapped compile.
        probe = os.path.join(tmp, "probe.helmpkg")
        r = run([args.helmc, model, "-q", "-o", probe, "--target=emu:rtx4060-laptop", "--force-split=1",
                 "--max-context", "8192"])
        if r.returncode != 0:
            print(f"FAIL helmc: {r.stderr.strip()}")
            return 1
        info = run([args.helm_rt, probe, "--info"]).stdout
        gpu_weights = next(int(line.split()[2]) for line in info.splitlines()
                           if line.startswith("section") and line.split()[1] == "gpu_weights")
        # VRAM: the weights, then free memory F with 0.8 F - staging between 2 and 2.5 pages (room
        # for 2 pages, not 3), plus the stage's own buffers in the other 20%.
        free = int((staging + 2.25 * page_bytes) / 0.8)
        profile_path = write_profile(tmp, "two-kv-pages", gpu_weights + free)
        capped = os.path.join(tmp, "capped.helmpkg")
        r = run([args.helmc, model, "-q", "-o", capped, f"--target=emu:{profile_path}", "--force-split=1",
                 "--max-context", "8192"])
        if r.returncode != 0:
            print(f"FAIL helmc for the capped profile: {r.stderr.strip()}")
            return 1
        stats_capped = os.path.join(tmp, "capped.json")
        stats_free = os.path.join(tmp, "free.json")

        # 1. Tokens with offload on the capped device == no offload on an uncapped one.
        try:
            got = generate(args.helm_rt, capped, stats_capped, ["--kv-page", str(PAGE)])
            want = generate(args.helm_rt, capped, stats_free,
                            ["--kv-page", str(PAGE), "--kv-offload", "off", "--emu-vram", "1GiB"])
            same = got == want and len(got) == N_NEW
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
            results.append((same, f"{N_NEW} tokens with 2 device KV pages and offload: "
                                  f"{'identical to' if same else f'differ at {first} from'} the "
                                  f"uncapped run without offload"))
            with open(stats_capped) as f:
                sc = json.load(f)
            with open(stats_free) as f:
                sf = json.load(f)
            # 2. Counters from the page arithmetic.
            last = len(PROMPT) + N_NEW - 2  # position of the last decode step's token
            decode_positions = range(len(PROMPT), last + 1)
            want_prefetched = layers * sum(max(0, p // PAGE - 1) for p in decode_positions)
            want_evicted = last // PAGE - 1
            checks = {
                "kv_page_tokens": (sc.get("kv_page_tokens"), PAGE),
                "kv_device_pages_peak": (sc.get("kv_device_pages_peak"), 2),
                "kv_pages_evicted": (sc.get("kv_pages_evicted"), want_evicted),
                "kv_pages_prefetched": (sc.get("kv_pages_prefetched"), want_prefetched),
                "uncapped kv_pages_evicted": (sf.get("kv_pages_evicted"), 0),
                "uncapped kv_pages_prefetched": (sf.get("kv_pages_prefetched"), 0),
                "uncapped kv_device_pages_peak": (sf.get("kv_device_pages_peak"), (last // PAGE) + 1),
            }
            bad = {k: v for k, v in checks.items() if v[0] != v[1]}
            results.append((not bad, "paging counters " + (
                f"match the page arithmetic ({want_evicted} evicted, {want_prefetched} page-layers "
                f"prefetched, 2 pages on the device)" if not bad else f"differ: {bad}")))
            # The streamed pages are link traffic: one layer's K and V of a page per prefetch.
            slice_bytes = page_bytes // layers
            base = sf["link_bytes_per_step"] * sf["decode_steps"]
            extra = sc["link_bytes_per_step"] * sc["decode_steps"] - base
            # Every eviction happens in a decode step (the prompt fills less than a page), and
            # crosses the link device -> host as a whole page.
            evicted_in_decode = want_evicted * page_bytes
            ok = abs(extra - (want_prefetched * slice_bytes + evicted_in_decode)) < 1
            results.append((ok, f"link bytes of paging: {extra:.0f} = {want_prefetched} x {slice_bytes} "
                                f"(prefetches) + {want_evicted} x {page_bytes} (evictions)"
                                if ok else f"link bytes of paging {extra:.0f}, expected "
                                f"{want_prefetched * slice_bytes + evicted_in_decode}"))
        except RuntimeError as e:
            results.append((False, str(e)))

        # 2b. Batch 2 on the same two device pages: one tail page per sequence.
        try:
            prompts = [PROMPT, [9, 10, 11, 12, 13]]
            n2 = 2100
            got = generate_batch(args.helm_rt, capped, prompts, n2, stats_capped, ["--kv-page", str(PAGE)])
            want = generate_batch(args.helm_rt, capped, prompts, n2, stats_free,
                                  ["--kv-page", str(PAGE), "--kv-offload", "off", "--emu-vram", "1GiB"])
            with open(stats_capped) as f:
                sc = json.load(f)
            lasts = [len(p) + n2 - 2 for p in prompts]
            want_evicted = sum(last // PAGE for last in lasts)
            want_prefetched = layers * sum(sum(p // PAGE for p in range(len(pr), last + 1))
                                           for pr, last in zip(prompts, lasts))
            ok = (got == want and sc.get("kv_pages_evicted") == want_evicted
                  and sc.get("kv_pages_prefetched") == want_prefetched
                  and sc.get("kv_device_pages_peak") == 2)
            results.append((ok, f"batch 2 on 2 device pages: ids {'identical' if got == want else 'differ'}, "
                                f"evicted {sc.get('kv_pages_evicted')} (expected {want_evicted}), "
                                f"prefetched {sc.get('kv_pages_prefetched')} (expected {want_prefetched}), "
                                f"peak {sc.get('kv_device_pages_peak')}"))
        except RuntimeError as e:
            results.append((False, f"batch 2: {e}"))

        # 3. Offload off on the capped device: refused before generation, one line.
        r = run([args.helm_rt, capped, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", str(N_NEW),
                 "--kv-page", str(PAGE), "--kv-offload", "off", "-q"])
        lines = r.stderr.strip().splitlines()
        ok = (r.returncode == 1 and len(lines) == 1 and "need 9 KV pages of 512 tokens on the device, "
              "which holds 2" in lines[0] and "--kv-offload=on" in lines[0] and r.stdout == "")
        results.append((ok, f"offload off on 2 device pages: {'one-line refusal' if ok else 'unexpected'}: "
                            f"rc {r.returncode}: {r.stderr.strip()}"))

        # 4. Beyond host RAM: refused before generation.
        huge = os.path.join(tmp, "huge.helmpkg")
        r = run([args.helmc, model, "-q", "-o", huge, f"--target=emu:{profile_path}", "--force-split=1",
                 "--max-context", str(1 << 31)])
        if r.returncode != 0:
            results.append((False, f"helmc --max-context 2^31: {r.stderr.strip()}"))
        else:
            r = run([args.helm_rt, huge, "--prompt-ids", ",".join(map(str, PROMPT)),
                     "-n", str((1 << 31) - len(PROMPT) - 1), "--kv-page", str(PAGE), "-q"])
            lines = r.stderr.strip().splitlines()
            ok = (r.returncode == 1 and len(lines) == 1 and "of KV cache in host RAM" in lines[0]
                  and "is available" in lines[0] and r.stdout == "")
            results.append((ok, f"context beyond host RAM: {'one-line refusal' if ok else 'unexpected'}: "
                                f"rc {r.returncode}: {r.stderr.strip()}"))

    for ok, line in results:
        print(("PASS " if ok else "FAIL ") + line, flush=True)
    failed = sum(1 for ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
