#!/usr/bin/env python3
"""Writes a small model: y = MatMul(x, DequantizeLinear(W, scales[, zero_points])) (opset 21), or with
--gather a token table: y = Gather(DequantizeLinear(T, ...), ids).

  dequantizelinear.py OUT.onnx [--type int4|uint4|int8|uint8|int16] [--k K] [--n N] [--block S]
                      [--axis A] [--transposed] [--zero-points] [--gather] [--scales-shape R,C]
                      [--output-dtype D] [--activation]

The MatMul weight is [K, N] with blocks along --axis (default 0, K); --transposed stores the codes
as [N, K] (blocks along axis 1 by default) behind a Transpose. The Gather table is [N, K] (rows of
K). --block 0 writes no block_size (per-axis scales). --scales-shape gives scales a wrong shape;
--activation makes the dequantized data a graph input rather than an initializer. Values are
arbitrary but fixed.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--type", default="int4")
ap.add_argument("--k", type=int, default=64)
ap.add_argument("--n", type=int, default=8)
ap.add_argument("--block", type=int, default=32)
ap.add_argument("--axis", type=int)
ap.add_argument("--transposed", action="store_true")
ap.add_argument("--zero-points", action="store_true")
ap.add_argument("--gather", action="store_true")
ap.add_argument("--scales-shape")
ap.add_argument("--output-dtype", type=int)
ap.add_argument("--activation", action="store_true")
a = ap.parse_args()

onnx_type = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int8": TensorProto.INT8,
             "uint8": TensorProto.UINT8, "int16": TensorProto.INT16}[a.type]
lo, hi = {"int4": (-8, 8), "uint4": (0, 16), "int8": (-128, 128), "uint8": (0, 256), "int16": (-9, 9)}[a.type]
k_major = not a.gather and not a.transposed
shape = [a.k, a.n] if k_major else [a.n, a.k]
axis = a.axis if a.axis is not None else (0 if k_major else 1)
rng = np.random.default_rng(0)
codes = rng.integers(lo, hi, size=shape)
scale_shape = list(shape)
if a.block:
    scale_shape[axis] = (shape[axis] + a.block - 1) // a.block
else:
    scale_shape = [shape[axis]]  # per-axis scales
if a.scales_shape:
    scale_shape = [int(d) for d in a.scales_shape.split(",")]
scales = rng.uniform(0.01, 0.1, size=scale_shape).astype(np.float32)


def tensor(name, values, dtype, dims):
    values = np.asarray(values).reshape(-1)
    if dtype in (TensorProto.INT4, TensorProto.UINT4):
        nib = (values.astype(np.int64) & 0xF).astype(np.uint8)
        if nib.size % 2:
            nib = np.append(nib, 0)
        return helper.make_tensor(name, dtype, dims, (nib[0::2] | (nib[1::2] << 4)).tobytes(), raw=True)
    return helper.make_tensor(name, dtype, dims, values.tolist())


inits = [numpy_helper.from_array(scales, "scales")]
graph_inputs = []
if a.activation:
    graph_inputs.append(helper.make_tensor_value_info("W", onnx_type, shape))
else:
    inits.append(tensor("W", codes, onnx_type, shape))
dq_inputs = ["W", "scales"]
if a.zero_points:
    zp = rng.integers(lo, hi, size=scale_shape)
    inits.append(tensor("zero_points", zp, onnx_type, scale_shape))
    dq_inputs.append("zero_points")
attrs = {"axis": axis}
if a.block:
    attrs["block_size"] = a.block
if a.output_dtype is not None:
    attrs["output_dtype"] = a.output_dtype
nodes = [helper.make_node("DequantizeLinear", dq_inputs, ["Wf"], name="dq", **attrs)]
if a.gather:
    nodes.append(helper.make_node("Gather", ["Wf", "ids"], ["y"], name="embed", axis=0))
    graph_inputs.append(helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4]))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, a.k])
else:
    weight = "Wf"
    if a.transposed:
        nodes.append(helper.make_node("Transpose", ["Wf"], ["Wt"], name="transpose", perm=[1, 0]))
        weight = "Wt"
    nodes.append(helper.make_node("MatMul", ["x", weight], ["y"], name="proj"))
    graph_inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, a.k]))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, a.n])
graph = helper.make_graph(nodes, "g", graph_inputs, [out], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
model.ir_version = 10
onnx.save(model, a.out)
