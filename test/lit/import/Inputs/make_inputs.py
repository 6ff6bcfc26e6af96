#!/usr/bin/env python3
"""Writes the small hand-made ONNX files the importer's bad-input lit tests read.

Run from this folder with the project venv: ../../../../.venv/bin/python make_inputs.py
The outputs are committed; tests never need to run this.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def io(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def save(model, path):
    onnx.save(model, path)


# A valid graph with no transformer block: one MatMul with a weight.
w = numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096, "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], "no_blocks",
                      [io("x", ["batch", "seq", 64])], [io("y", ["batch", "seq", 64])], [w])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "no_blocks.onnx")

# An op no HELM pattern covers.
g = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"], name="odd_activation")], "tanh",
                      [io("x", ["batch", 8])], [io("y", ["batch", 8])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "unsupported_op.onnx")

# An opset older than 13.
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "old",
                      [io("x", [4])], [io("y", [4])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), "opset11.onnx")

# A node in a domain HELM does not know.
g = helper.make_graph([helper.make_node("Frob", ["x"], ["y"], name="frob", domain="com.example")],
                      "custom", [io("x", [4])], [io("y", [4])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                         helper.make_opsetid("com.example", 1)]), "custom_domain.onnx")

# An initializer whose raw bytes do not match its shape.
bad = onnx.TensorProto()
bad.name, bad.data_type, bad.raw_data = "w", TensorProto.FLOAT, b"\0" * 100
bad.dims.extend([64, 64])
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], "short_raw",
                      [io("x", [2, 64])], [io("y", [2, 64])], [bad])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "short_raw_data.onnx")

# 4-bit tensors: packed two to a byte. One with 31 raw bytes for 64 values (needs 32), one whose
# values sit in int32_data (HELM reads 4-bit tensors from raw or external data only).
short4 = onnx.TensorProto()
short4.name, short4.data_type = "codes", TensorProto.INT4
short4.dims.extend([8, 8])
short4.raw_data = bytes(31)
typed4 = onnx.TensorProto()
typed4.name, typed4.data_type = "codes", TensorProto.UINT4
typed4.dims.extend([8, 8])
typed4.int32_data.extend([0x21] * 32)
for name, tensor in (("short_int4.onnx", short4), ("typed_uint4.onnx", typed4)):
    g = helper.make_graph([helper.make_node("Identity", ["codes"], ["y"], name="id")], "int4", [],
                          [helper.make_tensor_value_info("y", tensor.data_type, [8, 8])], [tensor])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), name)

# External data: the initializer lives in ext.bin; tests copy or truncate that file.
ext = onnx.TensorProto()
ext.name, ext.data_type = "w", TensorProto.FLOAT
ext.dims.extend([64, 64])
ext.data_location = TensorProto.EXTERNAL
for k, v in (("location", "ext.bin"), ("offset", "0"), ("length", str(64 * 64 * 4))):
    e = ext.external_data.add()
    e.key, e.value = k, v
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], "ext",
                      [io("x", [2, 64])], [io("y", [2, 64])], [ext])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "external.onnx")
with open("ext.bin", "wb") as f:
    f.write(np.ones(64 * 64, dtype=np.float32).tobytes())

# An external location that escapes the model's folder.
esc = onnx.TensorProto()
esc.CopyFrom(ext)
esc.external_data[0].value = "../../etc/passwd"
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], "escape",
                      [io("x", [2, 64])], [io("y", [2, 64])], [esc])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "escape_location.onnx")

# Deterministic garbage.
rng = np.random.default_rng(7)
with open("random.bin", "wb") as f:
    f.write(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())

# A node with the wrong number of inputs (MatMul takes two).
g = helper.make_graph([helper.make_node("MatMul", ["x"], ["y"], name="lonely")], "arity",
                      [io("x", [2, 64])], [io("y", [2, 64])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "bad_arity.onnx")
