#!/usr/bin/env python3
"""End to end: every corpus model compiled by helmc and run by helm-rt against ONNX Runtime.

For each model (test/models/*/model.onnx) the script
  1. compiles it with `helmc model.onnx -o model.helmpkg` (the CPU stage for this machine);
  2. runs `helm-rt --prompt-ids ... -n 32 --temperature 0 --ignore-eos --emit-ids --logits-out`,
     once with one prompt (batch 1) and once with two prompts of different lengths (batch 2);
  3. runs test/e2e/ort_oracle.py's greedy generation on the same .onnx and prompt ids (each prompt at
     batch 1, so the batched run must equal independent runs);
and requires the 32 generated ids to be identical and every step's logits to agree within the
issue's bound: max |ours - ort| / max |ort| <= 1e-4 for fp32 models, 1e-2 for fp16/bf16 models.

The oracle is independent of HELM (onnxruntime executes the original graph), so a wrong kernel, a
wrong lowering or a wrong KV position shows up as a mismatch. Prints one line per model and run,
then "N passed, M failed" and exits non-zero on any failure.

  python check_generation.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --models test/models
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_oracle  # noqa: E402
from tally import Tally  # noqa: E402

N_NEW = 32


def prompts_for(vocab: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=7).tolist(), rng.integers(0, vocab, size=4).tolist()]


def run_helm(helm_rt: str, package: str, prompts: list[list[int]], vocab: int, workdir: str):
    logits_path = os.path.join(workdir, "logits.f32")
    cmd = [helm_rt, package, "-n", str(N_NEW), "--temperature", "0", "--ignore-eos", "--emit-ids",
           "-t", "2", "--logits-out", logits_path]
    for p in prompts:
        cmd += ["--prompt-ids", ",".join(map(str, p))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"helm-rt failed: {out.stderr.strip()}")
    lines = out.stdout.strip().splitlines()[-len(prompts):]
    ids = [[int(x) for x in line.split(",")] for line in lines]
    raw = np.fromfile(logits_path, dtype=np.float32)
    n = len(prompts)
    rows = raw.reshape(-1, vocab)
    if rows.shape[0] != n * N_NEW:
        raise RuntimeError(f"expected {n * N_NEW} logit rows, got {rows.shape[0]}")
    # Prefill rows come first (one per prompt), then one row per prompt for every decode step.
    per_seq = [np.stack([rows[i]] + [rows[n + (t - 1) * n + i] for t in range(1, N_NEW)])
               for i in range(n)]
    return ids, per_seq


def compare(ours_ids, ours_logits, ref_ids, ref_logits, tol) -> tuple[bool, str]:
    worst = 0.0
    for i, (a, b) in enumerate(zip(ours_ids, ref_ids)):
        if a != b:
            # The first differing step (or the shorter length when one is a prefix of the other).
            first = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return False, f"sequence {i}: ids differ at step {first}: helm {a[first:first+4]} ort {b[first:first+4]}"
    for a, b in zip(ours_logits, ref_logits):
        b = np.asarray(b, dtype=np.float32)
        for t in range(b.shape[0]):
            err = float(np.max(np.abs(a[t] - b[t])) / max(1e-30, float(np.max(np.abs(b[t])))))
            worst = max(worst, err)
    if worst > tol:
        return False, f"logits rel. error {worst:.2e} > {tol:.0e}"
    return True, f"ids identical, logits rel. error {worst:.2e} (bound {tol:.0e})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--only", help="comma-separated model names")
    args = ap.parse_args(argv)
    names = sorted(d for d in os.listdir(args.models)
                   if os.path.isfile(os.path.join(args.models, d, "model.onnx")))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    tally = Tally()
    for seed, name in enumerate(names):
        model = os.path.join(args.models, name, "model.onnx")
        with open(os.path.join(args.models, name, "config.json")) as f:
            config = json.load(f)
        vocab = int(config["vocab_size"])
        tol = 1e-4 if config.get("dtype", "float32") in ("float32", "fp32") else 1e-2
        with tempfile.TemporaryDirectory(prefix="helm-e2e-") as work:
            package = os.path.join(work, "model.helmpkg")
            out = subprocess.run([args.helmc, model, "-q", "-o", package], capture_output=True, text=True)
            if out.returncode != 0:
                tally.report(False, f"{name}: helmc: {out.stderr.strip()}")
                continue
            prompts = prompts_for(vocab, seed)
            ref_ids, ref_logits = ort_oracle.generate(model, prompts, N_NEW)
            for label, subset in (("batch 1", [0]), ("batch 2", [0, 1])):
                ps = [prompts[i] for i in subset]
                try:
                    ids, logits = run_helm(args.helm_rt, package, ps, vocab, work)
                    ok, msg = compare(ids, logits, [ref_ids[i] for i in subset],
                                      [ref_logits[i] for i in subset], tol)
                except Exception as e:  # noqa: BLE001 - report and go on with the next model
                    ok, msg = False, str(e)
                tally.report(ok, f"{name} ({label}, prompts {[len(p) for p in ps]}): {msg}")
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
