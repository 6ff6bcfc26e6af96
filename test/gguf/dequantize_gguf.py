#!/usr/bin/env python3
"""Writes a copy of a GGUF file whose tensors are all F32: every block-quantized, F16 or BF16
tensor dequantized by the gguf package's reference code (ggml's dequantization), metadata copied
as it is (general.file_type set to ALL_F32).

    dequantize_gguf.py IN.gguf OUT.gguf [--dither SEED]

The perplexity test uses it to get an fp32 model out of the default model's Q4_1 file. Without
--dither the f32 values are exactly the weights the file encodes. Those lie on the Q4_1 / Q8_0
grids, so a format whose grid holds them (q4_1, q8_0) quantizes them again without error and any
other one re-snaps them: a comparison that favours q4_1 by construction. --dither SEED moves every
weight of a 32-weight block with an f16 scale d at its start (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
uniformly within its quantization cell, by up to d/2 either way (seeded, reproducible): the cells
filled as a trained model's weights fill them, the file's weights still their nearest grid points.
"""
import sys

import numpy as np
import gguf


def copy_fields(reader, writer):
    for field in reader.fields.values():
        # The writer writes the architecture and the GGUF.* header fields itself.
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == gguf.Keys.General.FILE_TYPE:
            value = int(gguf.LlamaFileType.ALL_F32)
        writer.add_key_value(field.name, value, value_type, sub_type=sub_type)


DITHERED = {gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q5_0,
            gguf.GGMLQuantizationType.Q5_1, gguf.GGMLQuantizationType.Q8_0}


def dither(data, tensor, rng):
    """data moved uniformly within each weight's cell: +-d/2 with d the block's f16 scale."""
    block, size = gguf.GGML_QUANT_SIZES[tensor.tensor_type]
    blocks = np.asarray(tensor.data, dtype=np.uint8).reshape(-1, size)
    d = np.abs(blocks[:, 0:2].copy().view("<f2").astype(np.float32))  # (n_blocks, 1)
    flat = data.reshape(-1, block)
    flat += (rng.random(flat.shape, dtype=np.float32) - np.float32(0.5)) * d
    return flat.reshape(data.shape)


def main(argv):
    seed = None
    if len(argv) == 5 and argv[3] == "--dither":
        seed = int(argv[4])
        argv = argv[:3]
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: dequantize_gguf.py IN.gguf OUT.gguf [--dither SEED]", file=sys.stderr)
        return 2
    rng = np.random.default_rng(seed)
    reader = gguf.GGUFReader(argv[1])
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(argv[2], arch)
    copy_fields(reader, writer)
    tensors = []
    for tensor in reader.tensors:
        # dequantize returns the logical shape, outermost dimension first (numpy order).
        data = np.array(gguf.quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if seed is not None and tensor.tensor_type in DITHERED:
            data = dither(data, tensor, rng)
        tensors.append((tensor.name, np.ascontiguousarray(data)))
    for name, data in tensors:
        writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, gguf.GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data in tensors:
        writer.write_tensor_data(data)
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
