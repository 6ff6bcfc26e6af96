#!/usr/bin/env python3
"""Importer conformance: `helmc --emit=config` against the generator's config.json for every corpus model.

The expectation (config.json) is written by test/models/generate.py from the Hugging Face config the
model was built from, so it is independent of HELM. Models HELM does not import yet are listed in
test/models/expected-failures.txt with the reason; such a model must fail (an unexpected pass is
reported so the list stays true).
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys

KEYS = ["architecture", "num_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
        "head_dim", "intermediate_size", "vocab_size", "rope_theta", "rms_norm_eps",
        "tie_word_embeddings", "dtype", "num_units"]


def load_xfail(path):
    xfail = {}
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                xfail[name] = reason.strip()
    return xfail


def compare(expected, got):
    problems = []
    for key in KEYS:
        if key not in got:
            problems.append(f"{key}: missing")
            continue
        e, g = expected[key], got[key]
        if isinstance(e, float) or isinstance(g, float):
            if not math.isclose(float(e), float(g), rel_tol=1e-4):
                problems.append(f"{key}: expected {e}, got {g}")
        elif e != g:
            problems.append(f"{key}: expected {e!r}, got {g!r}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    models = pathlib.Path(args.models)
    xfail = load_xfail(models / "expected-failures.txt")
    passed = failed = xfailed = 0
    for cfg in sorted(models.glob("*/config.json")):
        name = cfg.parent.name
        expected = json.loads(cfg.read_text())
        run = subprocess.run([args.helmc, str(cfg.parent / "model.onnx"), "--emit=config"],
                             capture_output=True, text=True, timeout=300)
        problems = []
        if run.returncode != 0:
            problems.append(run.stderr.strip() or f"exit code {run.returncode}")
        else:
            try:
                problems = compare(expected, json.loads(run.stdout))
            except json.JSONDecodeError as e:
                problems.append(f"stdout is not JSON: {e}")
        if name in xfail:
            if problems:
                xfailed += 1
                print(f"XFAIL {name}: {xfail[name]}")
            else:
                failed += 1
                print(f"FAIL  {name}: passes but is listed in expected-failures.txt; remove it")
        elif problems:
            failed += 1
            print(f"FAIL  {name}: " + "; ".join(problems))
        else:
            passed += 1
            print(f"PASS  {name}")
    print(f"config conformance: {passed} passed, {failed} failed, {xfailed} expected failures")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
