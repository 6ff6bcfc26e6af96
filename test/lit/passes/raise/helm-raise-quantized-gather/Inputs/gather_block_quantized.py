#!/usr/bin/env python3
"""Writes a one-node model: y = com.microsoft::GatherBlockQuantized(data, ids, scales[, zero_points]).

  gather_block_quantized.py OUT.onnx [--rows R] [--cols C] [--block S] [--bits B] [--data uint8|int4|uint4]
                            [--zero-points] [--gather-axis A] [--quantize-axis A] [--tied]

The initializers are consistent with the attributes; values are arbitrary but fixed. --tied writes
ONNX Runtime GenAI's tied form instead: a MatMulNBits LM head on the gathered rows, its B [rows,
blocks, blob], scales [rows * blocks] and zero points the initializers, and the gather's data,
scales and zero points Reshapes of them.
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
ap.add_argument("--tied", action="store_true")
ap.add_argument("--data-shape", help="--tied: the data Reshape's shape input instead of [rows, cols * bits / 8]")
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
if a.tied:
    blob = a.block * a.bits // 8
    b = numpy_helper.to_array(data).reshape(a.rows, blocks, blob)
    inits = [numpy_helper.from_array(b, "head_B"),
             numpy_helper.from_array(numpy_helper.to_array(scales).reshape(-1), "head_scales"),
             numpy_helper.from_array(np.array([int(v) for v in a.data_shape.split(",")] if a.data_shape else
                                              [a.rows, a.cols * a.bits // 8], dtype=np.int64), "data_shape"),
             numpy_helper.from_array(np.array([a.rows, blocks], dtype=np.int64), "scales_shape")]
    nodes = [helper.make_node("Reshape", ["head_B", "data_shape"], ["data"], name="data_reshape"),
             helper.make_node("Reshape", ["head_scales", "scales_shape"], ["scales"], name="scales_reshape")]
    head_inputs = ["y", "head_B", "head_scales"]
    if a.zero_points:
        inits += [numpy_helper.from_array(numpy_helper.to_array(zp).reshape(-1), "head_zp"),
                  numpy_helper.from_array(np.array(list(numpy_helper.to_array(zp).shape), dtype=np.int64), "zp_shape")]
        nodes.append(helper.make_node("Reshape", ["head_zp", "zp_shape"], ["zp"], name="zp_reshape"))
        head_inputs.append("head_zp")
    inputs = ["data", "ids", "scales"] + (["zp"] if a.zero_points else [])
    nodes.append(helper.make_node("GatherBlockQuantized", inputs, ["y"], domain="com.microsoft", name="embed",
                                  block_size=a.block, bits=a.bits, gather_axis=a.gather_axis,
                                  quantize_axis=a.quantize_axis))
    nodes.append(helper.make_node("MatMulNBits", head_inputs, ["logits"], domain="com.microsoft", name="head",
                                  K=a.cols, N=a.rows, bits=a.bits, block_size=a.block))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4, a.rows])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, a.out)
    raise SystemExit(0)
inits = [data, scales] + ([zp] if a.zero_points else [])
inputs = ["data", "ids", "scales"] + (["zp"] if a.zero_points else [])
node = helper.make_node("GatherBlockQuantized", inputs, ["y"], domain="com.microsoft", name="embed",
                        block_size=a.block, bits=a.bits, gather_axis=a.gather_axis, quantize_axis=a.quantize_axis)
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, a.cols])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
onnx.save(model, a.out)
