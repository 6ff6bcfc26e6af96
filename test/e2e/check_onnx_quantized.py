#!/usr/bin/env python3
"""End to end: ONNX models quantized by ONNX Runtime (com.microsoft::MatMulNBits) against ONNX Runtime.

For each model of test/models/quantized/ (test/models/generate_quantized.py: corpus models through
onnxruntime.quantization's MatMulNBitsQuantizer, 4 and 8 bits, blocks of 32, 64 and 128, symmetric
and with zero points, f32 and f16 scales):
  1. helmc compiles it: each MatMulNBits becomes a helm.linear whose weight the package stores in the
     block format that holds the same codes (q4_0, q4_1 or q8_0; docs/quantization.md);
  2. exact arithmetic (HELM_QUANT_EXACT=1) against a reference ONNX model in which every MatMulNBits
     is a plain MatMul on the weights as HELM stores them, dequantized here in NumPy from the ONNX
     initializers (independent of HELM's repacking code): scales rounded to f16, q4_1's minimum
     -zero_point * scale computed in f32 and rounded to f16. Batch 1 and batch 2: the 32 greedy ids
     equal ORT's, every step's logits within 1e-4 of max |logit| (1e-2 for f16 models, whose
     reference rounds the weights to f16);
  3. against ORT on the original model (its own MatMulNBits kernels, scales as stored): the exact
     arithmetic's first-step logits within 1e-2 (what rounding the scales to f16 costs), and the
     default arithmetic's (8-bit activations) first-step logits of a 12-token and a 1-token prompt
     within 6e-2, the bound of test/e2e/check_quantized.py. Greedy ids against the original are
     printed, not required: on these random-weight models the logits are near ties.
Prints one line per model, then "N passed, M failed"; exits non-zero on any failure.

  python check_onnx_quantized.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --models test/models/quantized
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_oracle  # noqa: E402
from check_quantized import N_NEW, rel_err, run_helm, same_positions  # noqa: E402
from tally import Tally  # noqa: E402


def f16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to float16 (nearest even) and back."""
    return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)


def helm_weights(node: onnx.NodeProto, inits: dict[str, np.ndarray]) -> np.ndarray:
    """The [N, K] float32 weight of a MatMulNBits node as HELM stores it."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    K, N, bits, block = attrs["K"], attrs["N"], attrs.get("bits", 4), attrs["block_size"]
    blocks = (K + block - 1) // block
    codes = inits[node.input[1]].reshape(N, blocks, block * bits // 8)
    if bits == 4:  # element 2i in the low nibble of byte i, 2i + 1 in the high nibble
        q = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(N, blocks * block)
    else:
        q = codes.reshape(N, blocks * block)
    q = q[:, :K].astype(np.float32)
    scales = inits[node.input[2]].reshape(N, blocks).astype(np.float32)
    per_weight = lambda per_block: np.repeat(per_block, block, axis=1)[:, :K]  # noqa: E731
    d = per_weight(f16(scales))
    zero_points = node.input[3] if len(node.input) > 3 else ""
    if not zero_points:
        return ((q - 2 ** (bits - 1)) * d).astype(np.float32)  # q4_0 / q8_0: (q - offset) * d, exact in f32
    zp = inits[zero_points]
    if zp.dtype == np.uint8:  # 4-bit values, two to a byte, low nibble first
        z = np.stack([zp & 0xF, zp >> 4], axis=-1).reshape(N, -1)[:, :blocks].astype(np.float32)
    else:
        z = zp.reshape(N, blocks).astype(np.float32)
    m = per_weight(f16(np.float32(-1) * z * scales))  # q4_1's min: -z * s in f32, then f16
    return (q * d + m).astype(np.float32)  # q d + m: two f32 roundings, as the kernels' dequantizer


def reference_model(model_path: str, out_path: str) -> int:
    """model_path with every MatMulNBits replaced by MatMul on HELM's weights; returns how many."""
    proto = onnx.load(model_path)
    graph = proto.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    replaced, dropped, nodes = 0, set(), []
    for node in graph.node:
        if node.op_type != "MatMulNBits" or node.domain != "com.microsoft":
            nodes.append(node)
            continue
        scale_dtype = inits[node.input[2]].dtype
        w = helm_weights(node, inits).T.astype(scale_dtype)  # [K, N] for MatMul, in the graph's dtype
        name = node.name + "_helm_weight"
        graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w), name))
        bias = node.input[5] if len(node.input) > 5 and node.input[5] else ""
        product = node.output[0] + "_product" if bias else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], name], [product], name=node.name + "_matmul"))
        if bias:
            nodes.append(helper.make_node("Add", [product, bias], [node.output[0]], name=node.name + "_bias"))
        dropped.update(i for i in node.input[1:4] if i)
        replaced += 1
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [i for i in graph.initializer if i.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.save(proto, out_path)
    return replaced


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", required=True)
    ap.add_argument("--helm-rt", required=True)
    ap.add_argument("--models", required=True, help="test/models/quantized")
    ap.add_argument("--only", help="comma-separated model names")
    args = ap.parse_args(argv)
    names = sorted(d for d in os.listdir(args.models) if os.path.isfile(os.path.join(args.models, d, "model.onnx")))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    if not names:
        print(f"no models in {args.models}")
        return 1
    tally = Tally()
    for seed, name in enumerate(names):
        folder = os.path.join(args.models, name)
        model = os.path.join(folder, "model.onnx")
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        vocab = int(config["vocab_size"])
        exact_bound = 1e-2 if config.get("dtype") == "float16" else 1e-4
        rng = np.random.default_rng(100 + seed)
        prompts = [rng.integers(0, vocab, size=7).tolist(), rng.integers(0, vocab, size=12).tolist(),
                   rng.integers(0, vocab, size=1).tolist()]
        problems, notes = [], []
        with tempfile.TemporaryDirectory(prefix="helm-onnxq-") as work:
            try:
                package = os.path.join(work, "model.helmpkg")
                out = subprocess.run([args.helmc, model, "-q", "-o", package], capture_output=True, text=True)
                if out.returncode != 0:
                    raise RuntimeError("helmc: " + out.stderr.strip())
                reference = os.path.join(work, "reference.onnx")
                replaced = reference_model(model, reference)
                ref_ids, ref_logits = ort_oracle.generate(reference, prompts, N_NEW)
                orig_ids, orig_logits = ort_oracle.generate(model, prompts, N_NEW)
                # (2) exact arithmetic against the reference, batch 1 and 2.
                worst = 0.0
                for label, subset in (("batch 1", [0]), ("batch 2", [0, 1])):
                    ids, logits = run_helm(args.helm_rt, package, [prompts[i] for i in subset], vocab, work, True)
                    for k, i in enumerate(subset):
                        if ids[k] != ref_ids[i]:
                            step = next(t for t, (a, b) in enumerate(zip(ids[k], ref_ids[i])) if a != b)
                            problems.append(f"exact {label}: ids differ from the reference's at step {step}")
                        worst = max(worst, max(rel_err(logits[k][t], ref_logits[i][t]) for t in range(N_NEW)))
                    if label == "batch 1":
                        exact_first = rel_err(logits[0][0], orig_logits[0][0])
                        exact_ids_orig = same_positions(ids[0], orig_ids[0])
                if worst > exact_bound:
                    problems.append(f"exact logits {worst:.2e} from the reference's (bound {exact_bound:g})")
                notes.append(f"{replaced} MatMulNBits; exact: ids = reference's, logits {worst:.1e}")
                # (3) against the original model in ORT.
                if exact_first > 1e-2:
                    problems.append(f"exact first-step logits {exact_first:.2e} from ORT's MatMulNBits (bound 1e-2)")
                ids, logits = run_helm(args.helm_rt, package, prompts[1:], vocab, work, False)
                prefill = rel_err(logits[0][0], orig_logits[1][0])
                one_row = rel_err(logits[1][0], orig_logits[2][0])
                for what, err in (("12-token prefill", prefill), ("1-row step", one_row)):
                    if err > 6e-2:
                        problems.append(f"{what} logits {err:.2e} from ORT's MatMulNBits (bound 6e-2)")
                notes.append(f"vs ORT MatMulNBits: exact first step {exact_first:.1e}, ids {exact_ids_orig}/32; "
                             f"default 12-token prefill {prefill:.1e}, 1-row step {one_row:.1e}, "
                             f"ids {same_positions(ids[0], orig_ids[1])}/32")
            except Exception as e:  # noqa: BLE001 - report and go on
                problems.append(str(e))
        tally.report(not problems, f"{name}: " + "; ".join(notes), problems)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
