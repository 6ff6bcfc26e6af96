#!/usr/bin/env python3
"""Writes a copy of a GGUF file whose tensors are all F32: every block-quantized, F16 or BF16
tensor dequantized by the gguf package's reference code (ggml's dequantization), metadata copied
as it is (general.file_type set to ALL_F32).

    dequantize_gguf.py IN.gguf OUT.gguf

The perplexity test uses it to get an fp32 model out of the default model's Q4_1 file: the f32
values are exactly the weights the Q4_1 / Q8_0 file encodes, so `helmc OUT.gguf` is the fp32
baseline and `helmc OUT.gguf --quantize=...` quantizes those same weights again.
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


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: dequantize_gguf.py IN.gguf OUT.gguf", file=sys.stderr)
        return 2
    reader = gguf.GGUFReader(argv[1])
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(argv[2], arch)
    copy_fields(reader, writer)
    tensors = []
    for tensor in reader.tensors:
        # dequantize returns the logical shape, outermost dimension first (numpy order).
        data = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
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
