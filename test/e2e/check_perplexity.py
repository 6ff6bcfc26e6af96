#!/usr/bin/env python3
"""Perplexity of the default model (a trained model) with quantized weights against fp32.

Needs the ONNX export of the default model (scripts/fetch-default-model.py, with the --corpus venv: models/default: SmolLM2-135M-Instruct, fp32,
with its tokenizer); without it the test reports itself skipped (exit 77). `helm-rt --perplexity
test/data/text/public-domain.txt` (about 1,100 tokens, windows of 512) on the fp32 package and on
`helmc --quantize=` q8_0, q4_0 and q4_k_m packages: q8_0 must be within 1% of fp32 (8-bit weights
and 8-bit activations must not change what the model predicts) and the q4_k_m recipe within 10%;
q4_0 is printed for comparison (no bound: plain 4-bit blocks with one scale are the format the
k-quants improve on). The perplexity computation itself is checked against ONNX Runtime in
test/lit/runtime/perplexity.test.

  python check_perplexity.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --root .
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def perplexity(helm_rt, package, text, work):
    stats = os.path.join(work, "ppl.json")
    subprocess.run([helm_rt, package, "--perplexity", text, "--stats-json", stats], check=True,
                   capture_output=True)
    with open(stats) as f:
        return json.load(f)["perplexity"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--root", required=True, help="the repository root")
    args = ap.parse_args()
    model = os.path.join(args.root, "models", "default", "model.onnx")
    tokenizer = os.path.join(args.root, "models", "default", "tokenizer.json")
    text = os.path.join(args.root, "test", "data", "text", "public-domain.txt")
    if not os.path.isfile(model):
        print("skipped: the default model is not fetched (scripts/install-deps.sh --corpus && .venv/bin/python scripts/fetch-default-model.py exports it into models/default)")
        return 77
    results = {}
    with tempfile.TemporaryDirectory(prefix="helm-ppl-") as work:
        for fmt in ("none", "q8_0", "q4_0", "q4_k_m"):
            package = os.path.join(work, fmt + ".helmpkg")
            subprocess.run([args.helmc, model, "-q", "--tokenizer", tokenizer, "--quantize=" + fmt, "-o", package],
                           check=True, capture_output=True)
            results[fmt] = perplexity(args.helm_rt, package, text, work)
            print(f"{'fp32' if fmt == 'none' else fmt}: perplexity {results[fmt]:.4f}", flush=True)
    failed = 0
    for fmt, bound in (("q8_0", 0.01), ("q4_0", None), ("q4_k_m", 0.10)):
        change = results[fmt] / results["none"] - 1
        verdict = "(no bound)" if bound is None else f"(bound {100 * bound:.0f}%)"
        print(f"{fmt} vs fp32: {100 * change:+.2f}% {verdict}")
        if bound is not None and abs(change) > bound:
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
