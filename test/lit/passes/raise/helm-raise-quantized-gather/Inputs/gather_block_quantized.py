#!/usr/bin/env python3
"""Writes a one-node model: y = com.microsoft::GatherBlockQuantized(data, ids, scales[, zero_points]).

  gather_block_quantized.py OUT.onnx [--rows R] [--cols C] [--block S] [--bits B] [--data uint8|int4|uint4]
                            [--zero-points] [--gather-axis A] [--quantize-axis A]

The initializers are consistent with the attributes; values are arbitrary but fixed.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--rows", type=int, default=16)
ap.add_argument("--cols", type=int, default=64)
ap.add_argument("--block", type=int, default=32)
ap.add_argument("--bits", type=int, default=4)
ap.add_argument("--data", default="uint8", choices=("uint8", "int4", "uint4"))
ap.add_argument("--zero-points", action="store_true")
ap.add_argument("--gather-axis", type=int, default=0)
ap.add_argument("--quantize-axis", type=int, default=1)
a = ap.parse_args()

rng = np.random.default_rng(0)
blocks = a.cols // a.block
if a.data == "uint8":
    data = numpy_helper.from_array(rng.integers(0, 256, size=(a.rows, a.cols * a.bits // 8), dtype=np.uint8), "data")
    zp = numpy_helper.from_array(rng.integers(0, 256, size=(a.rows, (blocks * a.bits + 7) // 8), dtype=np.uint8), "zp")
else:
    dtype = TensorProto.INT4 if a.data == "int4" else TensorProto.UINT4
    low, high = (-8, 8) if a.data == "int4" else (0, 16)
    data = helper.make_tensor("data", dtype, [a.rows, a.cols], rng.integers(low, high, size=a.rows * a.cols).tolist())
    zp = helper.make_tensor("zp", dtype, [a.rows, blocks], rng.integers(low, high, size=a.rows * blocks).tolist())
scales = numpy_helper.from_array(rng.uniform(0.01, 0.1, size=(a.rows, blocks)).astype(np.float32), "scales")
inits = [data, scales] + ([zp] if a.zero_points else [])
inputs = ["data", "ids", "scales"] + (["zp"] if a.zero_points else [])
node = helper.make_node("GatherBlockQuantized", inputs, ["y"], domain="com.microsoft", name="embed",
                        block_size=a.block, bits=a.bits, gather_axis=a.gather_axis, quantize_axis=a.quantize_axis)
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, a.cols])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
onnx.save(model, a.out)
