#!/usr/bin/env python3
"""Perplexity of the default model (a trained model) with quantized weights against fp32.

The default model's GGUF file (SmolLM2-135M-Instruct, Q4_1 blocks and a Q8_0 embedding table;
scripts/test.sh fetches it) is dequantized to an all-F32 GGUF (test/gguf/dequantize_gguf.py, the
gguf package's reference dequantization) with every weight moved uniformly within its Q4_1 / Q8_0
cell (--dither 1): those f32 weights are the fp32 model. Undithered, the weights lie on the Q4_1
grid, which q4_1 reproduces exactly and every other format re-snaps, so the comparison would favour
q4_1 by construction (the q4_k_m recipe with q4_1 fallbacks: +2.2% undithered, +27% dithered; with
llama.cpp's q5_0 fallbacks, which HELM uses: +12% and +14%). `helmc` compiles it as it is and with
`--quantize=` q8_0, q4_0 and q4_k_m, and `helm-rt --perplexity test/data/text/public-domain.txt`
(about 1,100 tokens, windows of 512) scores each package: q8_0 must be within 1% of fp32 (8-bit
weights and 8-bit activations must not change what the model predicts), the q4_k_m recipe within
20% (its q4_1-fallback form, +27%, fails) and better than q4_0 (plain 4-bit blocks with one scale,
the format the k-quants improve on; printed without a bound of its own). The perplexity
computation itself is checked against ONNX Runtime in test/lit/runtime/perplexity.test.

  python check_perplexity.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --root .
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"check_perplexity: {' '.join(cmd)} exited with {done.returncode}")


def perplexity(helm_rt, package, text, work):
    stats = os.path.join(work, "ppl.json")
    run([helm_rt, package, "--perplexity", text, "--stats-json", stats])
    with open(stats) as f:
        return json.load(f)["perplexity"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--root", required=True, help="the repository root")
    args = ap.parse_args()
    source = os.path.join(args.root, "models", ".cache", "gguf", "SmolLM2-135M-Instruct.Q4_1.gguf")
    text = os.path.join(args.root, "test", "data", "text", "public-domain.txt")
    if not os.path.isfile(source):
        print(f"check_perplexity: {source} is missing (scripts/fetch-default-model.py --gguf-only; "
              "scripts/test.sh runs it)", file=sys.stderr)
        return 1
    results = {}
    with tempfile.TemporaryDirectory(prefix="helm-ppl-") as work:
        model = os.path.join(work, "model-f32.gguf")
        run([sys.executable, os.path.join(HERE, "..", "gguf", "dequantize_gguf.py"), source, model, "--dither", "1"])
        for fmt in ("none", "q8_0", "q4_0", "q4_k_m"):
            package = os.path.join(work, fmt + ".helmpkg")
            run([args.helmc, model, "-q", "--quantize=" + fmt, "-o", package])
            results[fmt] = perplexity(args.helm_rt, package, text, work)
            os.remove(package)
            print(f"{'fp32' if fmt == 'none' else fmt}: perplexity {results[fmt]:.4f}", flush=True)
    failed = 0
    for fmt, bound in (("q8_0", 0.01), ("q4_0", None), ("q4_k_m", 0.20)):
        change = results[fmt] / results["none"] - 1
        verdict = "(no bound)" if bound is None else f"(bound {100 * bound:.0f}%)"
        print(f"{fmt} vs fp32: {100 * change:+.2f}% {verdict}")
        if bound is not None and abs(change) > bound:
            failed += 1
    if not results["q4_k_m"] < results["q4_0"]:
        print(f"q4_k_m ({results['q4_k_m']:.4f}) is not better than q4_0 ({results['q4_0']:.4f})")
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
