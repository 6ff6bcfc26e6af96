#!/usr/bin/env python3
"""Writes a one-node model: y = com.microsoft::MatMulNBits(x, B, scales[, zero_points][, g_idx]).

  matmulnbits.py OUT.onnx [--bits B] [--block S] [--k K] [--n N] [--zero-points] [--g-idx]
                 [--scales-count C] [--codes-bytes L] [--attr-n N]

The initializers are consistent with the attributes unless --scales-count or --codes-bytes asks for
a wrong size (the malformed inputs the raising must refuse). Values are arbitrary but fixed.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--bits", type=int, default=4)
ap.add_argument("--block", type=int, default=32)
ap.add_argument("--k", type=int, default=64)
ap.add_argument("--n", type=int, default=8)
ap.add_argument("--zero-points", action="store_true")
ap.add_argument("--g-idx", action="store_true")
ap.add_argument("--scales-count", type=int)
ap.add_argument("--codes-bytes", type=int)
ap.add_argument("--attr-n", type=int, help="the N attribute, if not --n (a size the data does not have)")
a = ap.parse_args()

blocks = (a.k + a.block - 1) // a.block
blob = a.block * a.bits // 8
rng = np.random.default_rng(0)
codes = rng.integers(0, 256, size=(a.n, blocks, blob), dtype=np.uint8)
if a.codes_bytes is not None:
    codes = codes.reshape(-1)[: a.codes_bytes]
scales = rng.uniform(0.01, 0.1, size=a.scales_count if a.scales_count is not None else a.n * blocks)
inits = [numpy_helper.from_array(codes, "B"), numpy_helper.from_array(scales.astype(np.float32), "scales")]
inputs = ["x", "B", "scales"]
if a.zero_points or a.g_idx:
    if a.zero_points:
        zp = rng.integers(0, 256, size=(a.n, (blocks * a.bits + 7) // 8), dtype=np.uint8)
        inits.append(numpy_helper.from_array(zp, "zero_points"))
        inputs.append("zero_points")
    else:
        inputs.append("")
if a.g_idx:
    inits.append(numpy_helper.from_array(np.arange(a.k, dtype=np.int32) // a.block, "g_idx"))
    inputs.append("g_idx")
node = helper.make_node("MatMulNBits", inputs, ["y"], domain="com.microsoft", name="proj", K=a.k,
                        N=a.n if a.attr_n is None else a.attr_n,
                        bits=a.bits, block_size=a.block)
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, a.k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, a.n])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
onnx.save(model, a.out)
