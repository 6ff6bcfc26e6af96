#!/usr/bin/env python3
"""End to end: quantized ONNX models (MatMulNBits, GatherBlockQuantized, DequantizeLinear) against ORT.

For each model of test/models/quantized/ (test/models/generate_quantized.py: corpus models through
onnxruntime.quantization's MatMulNBitsQuantizer, 4 and 8 bits, blocks of 32, 64 and 128, symmetric
and with zero points, f32 and f16 scales, its QOperator and QDQ formats; and int8 DequantizeLinear
weights written by the generator):
  1. helmc compiles it: each MatMulNBits, and each MatMul of a DequantizeLinear, becomes a
     helm.linear and each GatherBlockQuantized or Gather of a DequantizeLinear (the token table) a
     helm.embed whose weight the package stores in the block format that holds the same codes
     (q4_0, q4_1 or q8_0; docs/quantization.md);
  2. exact arithmetic (HELM_QUANT_EXACT=1) against a reference ONNX model in which every MatMulNBits
     is a plain MatMul, every GatherBlockQuantized a Gather and every DequantizeLinear an
     initializer, on the weights as HELM stores them,
     dequantized here in NumPy from the ONNX initializers (independent of HELM's repacking code):
     scales rounded to f16, q4_1's minimum -zero_point * scale computed in f32 and rounded to f16. Batch 1 and batch 2: the 32 greedy ids
     equal ORT's, every step's logits within 1e-4 of max |logit| (1e-2 for f16 models, whose
     reference rounds the weights to f16);
  3. against ORT on the original model (its own MatMulNBits and DequantizeLinear kernels, scales as
     stored, its fusion of DequantizeLinear + MatMul held to f32 arithmetic with the session option
     session.qdq_matmulnbits_accuracy_level = 0, as its default 4 quantizes activations): the exact
     arithmetic's first-step logits within 1e-2 (what rounding the scales to f16 costs), and the
     default arithmetic's (8-bit activations) first-step logits of a 12-token and a 1-token prompt
     within 6e-2, the bound of test/e2e/check_quantized.py. Greedy ids against the original are
     printed, not required: on these random-weight models the logits are near ties. A model whose
     MatMulNBits ask for int8 activations (accuracy_level 4, as ONNX Runtime GenAI's builder
     writes) is compared as a copy with level 0 here, and also as it is: the default arithmetic's
     two logits within 6e-2 of ORT's at level 4, both sides on 8-bit activations.
Prints one line per model, then "N passed, M failed"; exits non-zero on any failure.

  python check_onnx_quantized.py --helmc build/bin/helmc --helm-rt build/bin/helm-rt --models test/models/quantized
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_oracle  # noqa: E402
from check_quantized import N_NEW, rel_err, run_helm, same_positions  # noqa: E402
from tally import Tally  # noqa: E402


def f16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to float16 (nearest even) and back."""
    return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)


def nibbles(packed: np.ndarray, rows: int) -> np.ndarray:
    """uint8 bytes -> their 4-bit values, low nibble first, as [rows, -1]."""
    packed = np.asarray(packed, dtype=np.uint8)
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(rows, -1)


def dequantize_as_helm(q: np.ndarray, scales: np.ndarray, z: np.ndarray | None, block: int, shift: float,
                       default_zero: float) -> np.ndarray:
    """[N, K] weights as HELM stores them: q (codes as integers, [N, K]) in blocks of `block` along
    each row with scales / zero points [N, blocks]. A K that is not a multiple of 32 is stored
    dequantized: (q - z) * s in f32, rounded to f16 for f16 scales. Without zero points and with a zero point of
    `default_zero` the blocks are q4_0 / q8_0: (q - z) * f16(s), exact in f32. Otherwise q4_1: codes
    shifted by `shift` (8 for int4, stored as value + 8), q' d + m with m = f16(-(z + shift) * s)
    computed in f32 and two f32 roundings, as the kernels' dequantizer."""
    K = q.shape[1]
    per_weight = lambda per_block: np.repeat(per_block, block, axis=1)[:, :K]  # noqa: E731
    if K % 32:  # rows that are no whole blocks of 32: stored dequantized, in the scales' type
        zero = per_weight(z.astype(np.float32)) if z is not None else np.float32(default_zero)
        w = ((q.astype(np.float32) - zero) * per_weight(scales.astype(np.float32))).astype(np.float32)
        return f16(w) if scales.dtype == np.float16 else w
    scales = scales.astype(np.float32)
    d = per_weight(f16(scales))
    if z is None:
        return ((q.astype(np.float32) - np.float32(default_zero)) * d).astype(np.float32)
    m = per_weight(f16(np.float32(-1) * (z.astype(np.float32) + np.float32(shift)) * scales))
    return ((q.astype(np.float32) + np.float32(shift)) * d + m).astype(np.float32)


def helm_weights(node: onnx.NodeProto, inits: dict[str, np.ndarray], types: dict[str, int]) -> np.ndarray:
    """The [N, K] float32 weight of a MatMulNBits or GatherBlockQuantized node as HELM stores it."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inputs = list(node.input) + [""] * 4
    if node.op_type == "MatMulNBits":
        K, N, bits, block = attrs["K"], attrs["N"], attrs.get("bits", 4), attrs["block_size"]
        data_name, scales_name, zp_name = inputs[1], inputs[2], inputs[3]
    else:  # GatherBlockQuantized, gather_axis 0, quantize_axis 1
        bits, block = attrs.get("bits", 4), attrs.get("block_size", 128)
        data_name, scales_name, zp_name = inputs[0], inputs[2], inputs[3]
    data, data_type = inits[data_name], types[data_name]
    N = data.shape[0]
    blocks_of = lambda k: (k + block - 1) // block  # noqa: E731
    if data_type == TensorProto.UINT8:  # bytes: MatMulNBits [N, blocks, blob], or [N, K * bits / 8]
        q = nibbles(data, N) if bits == 4 else np.asarray(data).reshape(N, -1)
        K = K if node.op_type == "MatMulNBits" else q.shape[1]
        q, shift, default_zero = q[:, :K], 0.0, 2 ** (bits - 1)
    else:  # INT4 / UINT4: onnx's to_array unpacks them, one value per element
        q, K = np.asarray(data).reshape(N, -1).astype(np.int32), data.shape[1]
        shift, default_zero = (8.0, 0.0) if data_type == TensorProto.INT4 else (0.0, 0.0)
    blocks = blocks_of(K)
    scales = inits[scales_name].reshape(N, blocks)
    z = None
    if zp_name:
        zp, zp_type = inits[zp_name], types[zp_name]
        if zp_type == TensorProto.UINT8:  # MatMulNBits: 4-bit values two to a byte, rows padded
            z = (nibbles(zp, N)[:, :blocks] if bits == 4 else np.asarray(zp).reshape(N, blocks)).astype(np.float32)
        else:  # the codes' 4-bit type (unpacked by to_array) or the scales' type
            z = np.asarray(zp).reshape(N, blocks).astype(np.float32)
    elif data_type == TensorProto.UINT4:
        z = np.zeros((N, blocks), dtype=np.float32)  # uint4's default zero point 0: q4_1 with m = -0
    # Without zero points (q4_0 / q8_0, int4 included: (value + 8) - 8) the shift plays no part.
    return dequantize_as_helm(q, scales, z, block, shift, default_zero)


def helm_weights_dq(node: onnx.NodeProto, inits: dict[str, np.ndarray], types: dict[str, int]) -> np.ndarray:
    """The output of a block-wise DequantizeLinear (opset 21: int4, uint4 or int8 codes) as HELM
    stores it, in the node's own orientation: blocks run along `axis`, HELM's K."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis, block = attrs.get("axis", 1) % 2, attrs["block_size"]
    inputs = list(node.input) + [""] * 3
    data, data_type = np.asarray(inits[inputs[0]]).astype(np.int32), types[inputs[0]]
    scales = np.asarray(inits[inputs[1]])
    zp = np.asarray(inits[inputs[2]]).astype(np.float32) if inputs[2] else None
    if axis == 0:  # [K, N] -> rows of K
        data, scales = data.T, scales.T
        zp = zp.T if zp is not None else None
    shift = 8.0 if data_type == TensorProto.INT4 else 0.0
    if zp is None and data_type == TensorProto.UINT4:
        zp = np.zeros(scales.shape, dtype=np.float32)  # uint4's default zero point 0: q4_1 with m = -0
    w = dequantize_as_helm(data, scales, zp, block, shift, 0.0)
    return w.T if axis == 0 else w


def f32_arithmetic_copy(model_path: str, out_path: str) -> bool:
    """model_path with every MatMulNBits' accuracy_level set to 0 (ORT's f32 activations) written to
    out_path; False (nothing written) when no node asks for another level. ONNX Runtime GenAI's
    builder writes accuracy_level 4: int8 activations, the arithmetic of HELM's default path, not
    of its exact one."""
    proto = onnx.load(model_path)
    changed = False
    for node in proto.graph.node:
        if node.domain == "com.microsoft" and node.op_type == "MatMulNBits":
            for a in node.attribute:
                if a.name == "accuracy_level" and a.i != 0:
                    a.i = 0
                    changed = True
    if changed:
        onnx.save(proto, out_path)
    return changed


def reference_model(model_path: str, out_path: str) -> int:
    """model_path with every MatMulNBits replaced by MatMul and every GatherBlockQuantized by Gather
    on HELM's weights; returns how many."""
    proto = onnx.load(model_path)
    graph = proto.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    types = {i.name: i.data_type for i in graph.initializer}
    replaced, dropped, nodes = 0, set(), []
    for node in graph.node:
        if node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx") and node.input[0] in inits:
            w = helm_weights_dq(node, inits, types).astype(inits[node.input[1]].dtype)
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w), node.output[0]))
            dropped.update(i for i in node.input[:3] if i)
            replaced += 1
            continue
        if node.domain != "com.microsoft" or node.op_type not in ("MatMulNBits", "GatherBlockQuantized"):
            nodes.append(node)
            continue
        name = node.name + "_helm_weight"
        if node.op_type == "GatherBlockQuantized":
            scale_dtype = inits[node.input[2]].dtype
            table = helm_weights(node, inits, types).astype(scale_dtype)  # [vocab, hidden]
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(table), name))
            nodes.append(helper.make_node("Gather", [name, node.input[1]], [node.output[0]], name=node.name + "_gather",
                                          axis=0))
            dropped.update(i for i in (node.input[0], *node.input[2:4]) if i)
            replaced += 1
            continue
        scale_dtype = inits[node.input[2]].dtype
        w = helm_weights(node, inits, types).T.astype(scale_dtype)  # [K, N] for MatMul, in the graph's dtype
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
                # The oracle sizes a cache input with a symbolic head size from the config beside it.
                shutil.copy(os.path.join(folder, "config.json"), work)
                ref_ids, ref_logits = ort_oracle.generate(reference, prompts, N_NEW)
                # ORT fuses DequantizeLinear + MatMul into MatMulNBits with accuracy_level 4 (8-bit
                # activations) unless told otherwise; level 0 keeps f32 arithmetic, like
                # MatMulNBits nodes without the attribute.
                # A model whose MatMulNBits ask for int8 activations (accuracy_level 4) runs as it is
                # for the default arithmetic's comparison and as a level-0 copy for the exact one.
                original_f32 = os.path.join(work, "original-f32.onnx")
                level4 = f32_arithmetic_copy(model, original_f32)
                orig_ids, orig_logits = ort_oracle.generate(
                    original_f32 if level4 else model, prompts, N_NEW,
                    session_config={"session.qdq_matmulnbits_accuracy_level": "0"})
                as_is_ids, as_is_logits = (ort_oracle.generate(model, prompts, N_NEW) if level4
                                           else (orig_ids, orig_logits))
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
                notes.append(f"{replaced} quantized nodes; exact: ids = reference's, logits {worst:.1e}")
                # (3) against the original model in ORT.
                if exact_first > 1e-2:
                    problems.append(f"exact first-step logits {exact_first:.2e} from ORT's (bound 1e-2)")
                ids, logits = run_helm(args.helm_rt, package, prompts[1:], vocab, work, False)

                def default_within(ort_logits, of_what):
                    """The default arithmetic's 12-token prefill and 1-row step against ORT's (6e-2)."""
                    errs = (rel_err(logits[0][0], ort_logits[1][0]), rel_err(logits[1][0], ort_logits[2][0]))
                    for what, err in zip(("12-token prefill", "1-row step"), errs):
                        if err > 6e-2:
                            problems.append(f"{what} logits {err:.2e} from {of_what} (bound 6e-2)")
                    return errs

                prefill, one_row = default_within(orig_logits, "ORT's")
                notes.append(f"vs ORT: exact first step {exact_first:.1e}, ids {exact_ids_orig}/32; "
                             f"default 12-token prefill {prefill:.1e}, 1-row step {one_row:.1e}, "
                             f"ids {same_positions(ids[0], orig_ids[1])}/32")
                if level4:  # both sides with int8 activations: the same bound
                    prefill4, one_row4 = default_within(as_is_logits, "ORT's at accuracy_level 4")
                    notes.append(f"vs ORT at accuracy_level 4: default 12-token prefill {prefill4:.1e}, "
                                 f"1-row step {one_row4:.1e}, ids {same_positions(ids[0], as_is_ids[1])}/32")
            except Exception as e:  # noqa: BLE001 - report and go on
                problems.append(str(e))
        tally.report(not problems, f"{name}: " + "; ".join(notes), problems)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
