#!/usr/bin/env python3
"""Writes small fuzzing seeds from the model corpus: each model's graph with every initializer over
64 elements moved to (absent) external data, and without value_info, doc strings, metadata or node
names, so that most seeds fit the fuzzer's max_len (64 KiB) whole and reach the raising passes.

  .venv/bin/python test/fuzz/make_seeds.py      (writes test/fuzz/corpus/seed-*.onnx)
"""
import pathlib

import onnx

ROOT = pathlib.Path(__file__).resolve().parent
MODELS = ROOT.parent / "models"

for model_path in sorted(MODELS.glob("*/model.onnx")) + sorted(MODELS.glob("quantized/*/model.onnx")):
    m = onnx.load(str(model_path), load_external_data=False)
    for t in m.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if n <= 64:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                onnx.external_data_helper.load_external_data_for_tensor(t, str(model_path.parent))
                t.data_location = onnx.TensorProto.DEFAULT
                del t.external_data[:]
            continue
        if t.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4):
            size = (n + 1) // 2  # two 4-bit values a byte
        else:
            size = n * {1: 4, 2: 1, 3: 1, 10: 2, 16: 2, 7: 8, 6: 4}.get(t.data_type, 4)
        t.ClearField("raw_data")
        for field in ("float_data", "int32_data", "int64_data", "double_data"):
            t.ClearField(field)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(size))):
            e = t.external_data.add()
            e.key, e.value = key, value
    # Graph-level extras the importer does not need: they only make seeds bigger.
    m.ClearField("metadata_props")
    m.graph.ClearField("value_info")
    m.doc_string = ""
    for node in m.graph.node:
        node.doc_string = ""
        node.ClearField("metadata_props")
        node.name = ""
    data = m.SerializeToString()
    out = ROOT / "corpus" / f"seed-{model_path.parent.name}.onnx"
    out.write_bytes(data)
    print(f"{out.name}: {len(data) / 1024:.0f} KiB")
