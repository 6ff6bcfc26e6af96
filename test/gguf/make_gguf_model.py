#!/usr/bin/env python3
"""Writes a small GGUF model with random weights, laid out as llama.cpp's converter writes one.

    make_gguf_model.py --arch llama|qwen2|qwen3|phi3|gemma|gemma2|gemma3 --out model.gguf [--type f32|f16|q8_0|q4_0|q4_1|...]
                       [--vocab ggml-vocab-X.gguf] [--hidden 256 --ffn 512 --heads 4 --kv-heads 2
                        --layers 2 --head-dim 64] [--untied] [--seed 0]
                       [--drop KEY|TENSOR] [--set KEY=VALUE] [--extra-tensor NAME] [--tensor-type NAME=TYPE]

The tensors are those of llama.cpp's LLM_ARCH_LLAMA / QWEN2 / QWEN3 / PHI3 / GEMMA / GEMMA2 /
GEMMA3 (token_embd, blk.N.attn_*, ffn_*, Gemma 2/3's post_attention_norm and post_ffw_norm,
output_norm, output): 2-D ones in --type (quantized with the gguf package's reference
quantizers, which are ggml's; random blocks of about the same size of weight for the types it has
no quantizer for: iq4_nl, iq4_xs, the lattice formats iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, and
iq1_s, a type HELM refuses), norms and biases in F32. The tokenizer metadata comes from --vocab
(one of llama.cpp's ggml-vocab-*.gguf files) or, without it, a 64-token byte-level vocabulary. The
weights are random but spread (not near-uniform logits), so that greedy decoding has clear winners
to compare. --drop, --set, --extra-tensor and --tensor-type make the broken files the import tests
refuse.
"""
import argparse
import sys

import numpy as np
import gguf


# The lattice formats HELM reads (kernels/quant/IqFormats.h): a weight is (d / k) * (2 ls + 1) * c
# with k here, ls a 4-bit code and c a signed lattice value.
IQ_LATTICE = {"iq2_xxs": 8, "iq2_xs": 8, "iq2_s": 8, "iq3_xxs": 4, "iq3_s": 1}


def lattice_mean(t):
    """The mean magnitude of the lattice values of format t (19-20 for iq2, 25 for iq3_xxs, 6.2 for iq3_s)."""
    cls = getattr(gguf.quants, t.upper())
    cls.init_grid()
    return float(np.mean(cls.grid))


def copy_tokenizer(writer, vocab_path):
    reader = gguf.GGUFReader(vocab_path)
    n = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        types = field.types
        if types[0] == gguf.GGUFValueType.ARRAY:
            sub = types[1]
            if sub == gguf.GGUFValueType.STRING:
                value = [bytes(field.parts[i]) for i in field.data]
            else:
                value = [field.parts[i][0].item() for i in field.data]
            writer.add_array(field.name, value)
            if field.name == "tokenizer.ggml.tokens":
                n = len(value)
        elif types[0] == gguf.GGUFValueType.STRING:
            writer.add_string(field.name, bytes(field.parts[-1]).decode("utf-8"))
        else:
            v = field.parts[-1][0].item()
            add = {gguf.GGUFValueType.UINT32: writer.add_uint32, gguf.GGUFValueType.INT32: writer.add_int32,
                   gguf.GGUFValueType.BOOL: writer.add_bool, gguf.GGUFValueType.FLOAT32: writer.add_float32,
                   gguf.GGUFValueType.UINT64: writer.add_uint64, gguf.GGUFValueType.UINT8: writer.add_uint8}
            add[types[0]](field.name, v)
    return n


def small_tokenizer(writer, n=64):
    # 58 byte-level tokens ('!' .. 'Z'), the two tokens the merges make, then control tokens.
    tokens = [bytes([0x21 + i]).decode() for i in range(58)] + ['!"', "#$"]
    tokens += [f"<|s{i}|>" for i in range(60, n)]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 60 + [3] * (n - 60))
    writer.add_token_merges(["! \"", "# $"])
    writer.add_bos_token_id(60)
    writer.add_eos_token_id(61)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, choices=["llama", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "mistral3"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--architecture", help="general.architecture to write instead of --arch (the keys keep "
                                            "--arch's prefix): a file of an architecture HELM refuses")
    ap.add_argument("--type", default="f32",
                    choices=["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs",
                             *IQ_LATTICE, "iq1_s"])
    ap.add_argument("--vocab")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--extra-tensor", action="append", default=[])
    ap.add_argument("--tensor-type", action="append", default=[])
    ap.add_argument("--rope-freqs", action="store_true",
                    help="add rope_freqs.weight: Llama 3.1's frequency factors (factor 8, low 1, high 4, "
                         "original context 8192), as llama.cpp's converter writes them")
    ap.add_argument("--longrope", type=int, metavar="ORIGINAL",
                    help="Phi-3's LongRoPE as the converter writes a 128k file: rope_factors_short.weight and "
                         "rope_factors_long.weight (two different tables), context_length 131072, "
                         "rope.scaling.original_context_length ORIGINAL and rope.scaling.attn_factor "
                         "sqrt(1 + ln(131072 / ORIGINAL) / ln ORIGINAL)")
    a = ap.parse_args()

    rng = np.random.default_rng(a.seed)
    hd = a.head_dim or a.hidden // a.heads
    writer = gguf.GGUFWriter(a.out, a.architecture or a.arch)
    meta = {
        f"{a.arch}.block_count": ("u32", a.layers),
        f"{a.arch}.context_length": ("u32", 4096),
        f"{a.arch}.embedding_length": ("u32", a.hidden),
        f"{a.arch}.feed_forward_length": ("u32", a.ffn),
        f"{a.arch}.attention.head_count": ("u32", a.heads),
        f"{a.arch}.attention.head_count_kv": ("u32", a.kv_heads),
        f"{a.arch}.rope.freq_base": ("f32", 10000.0 if a.arch == "llama" else 1000000.0),
        f"{a.arch}.attention.layer_norm_rms_epsilon": ("f32", 1e-6 if a.arch != "llama" else 1e-5),
    }
    if a.arch == "phi3":
        meta["phi3.rope.dimension_count"] = ("u32", hd)
    if a.longrope:
        meta[f"{a.arch}.context_length"] = ("u32", 131072)
        meta[f"{a.arch}.rope.scaling.original_context_length"] = ("u32", a.longrope)
        meta[f"{a.arch}.rope.scaling.attn_factor"] = (
            "f32", float(np.sqrt(1 + np.log(131072 / a.longrope) / np.log(a.longrope))))
    if a.arch == "gemma3":
        # As the converter writes Gemma 3: a window for the local layers (the pattern and their
        # rope base are llama.cpp's defaults unless --set), no softcapping keys.
        meta["gemma3.attention.sliding_window"] = ("u32", 512)
    if a.arch == "gemma2":
        meta["gemma2.attention.sliding_window"] = ("u32", 4096)
        meta["gemma2.attn_logit_softcapping"] = ("f32", 50.0)
        meta["gemma2.final_logit_softcapping"] = ("f32", 30.0)
    if a.head_dim:
        meta[f"{a.arch}.attention.key_length"] = ("u32", hd)
        meta[f"{a.arch}.attention.value_length"] = ("u32", hd)
    for kv in a.set:
        key, value = kv.split("=", 1)
        if value.startswith("str:"):
            meta[key] = ("str", value[4:])
        elif "." in value:
            meta[key] = ("f32", float(value))
        else:
            meta[key] = ("u32", int(value))
    writer.add_type("model")
    # llama.cpp gives a model named "...phi3..." Phi-3's special-token attributes, which need
    # Phi-3's own vocabulary: the name avoids it so that any --vocab loads.
    writer.add_name(f"helm-test-{a.arch}" if a.arch != "phi3" else "helm-test-p-3")
    for key, (kind, value) in meta.items():
        if key in a.drop:
            continue
        {"u32": writer.add_uint32, "f32": writer.add_float32, "str": writer.add_string}[kind](key, value)
    vocab = copy_tokenizer(writer, a.vocab) if a.vocab else small_tokenizer(writer)

    forced = dict(kv.split("=", 1) for kv in a.tensor_type)
    qtypes = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0,
              "q4_1": gguf.GGMLQuantizationType.Q4_1, "q5_0": gguf.GGMLQuantizationType.Q5_0,
              "q5_1": gguf.GGMLQuantizationType.Q5_1, "iq1_s": gguf.GGMLQuantizationType.IQ1_S,
              "iq4_nl": gguf.GGMLQuantizationType.IQ4_NL, "iq4_xs": gguf.GGMLQuantizationType.IQ4_XS,
              "f16": gguf.GGMLQuantizationType.F16, "bf16": gguf.GGMLQuantizationType.BF16,
              **{t: gguf.GGMLQuantizationType[t.upper()] for t in IQ_LATTICE}}

    def add(name, shape, scale, kind="matrix"):
        # shape in numpy order: [rows, row length]; GGUF lists it innermost first.
        if name in a.drop:
            return
        if kind == "norm":
            data = (1.0 + scale * rng.standard_normal(shape)).astype(np.float32)
        else:
            data = (scale * rng.standard_normal(shape)).astype(np.float32)
        t = forced.get(name, a.type if kind == "matrix" else "f32")
        if t == "f32":
            writer.add_tensor(name, data)
        elif t == "f16":
            writer.add_tensor(name, data.astype(np.float16))
        elif t in ("iq1_s", "iq4_nl", "iq4_xs", *IQ_LATTICE):
            # The gguf package has no quantizer for these: random blocks. The f16 d (at the start of
            # each block) is set so that the weights have about `scale`'s size: iq4's grid values
            # average 55 in magnitude, iq4_xs' sub-block scales 16; the lattice formats' weight is
            # (d / k) * s * c (IQ_LATTICE's k; s = 2 ls + 1 averages 16 over random 4-bit codes ls;
            # c a lattice magnitude, their mean taken from the package's grid). IQ1_S is refused,
            # and the refusal tests never read its values.
            block, size = gguf.GGML_QUANT_SIZES[qtypes[t]]
            q = rng.integers(0, 256, size=(shape[0], shape[1] // block, size), dtype=np.uint8)
            if t in IQ_LATTICE:
                d = np.float16(scale * IQ_LATTICE[t] / (16.0 * lattice_mean(t))).reshape(1).view(np.uint8)
                q[:, :, 0:2] = d
            elif t != "iq1_s":
                d = np.float16(scale / (55.0 if t == "iq4_nl" else 55.0 * 16)).reshape(1).view(np.uint8)
                q[:, :, 0:2] = d
            q = q.reshape(shape[0], -1)
            writer.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtypes[t])
        else:
            q = gguf.quants.quantize(data, qtypes[t])
            writer.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtypes[t])

    H, F, nh, nkv = a.hidden, a.ffn, a.heads, a.kv_heads
    # Gemma multiplies the rows by sqrt(hidden): smaller rows keep its hidden states (and its tied
    # head's logits) about as spread as the others'.
    add("token_embd.weight", (vocab, H), 0.25 if a.arch.startswith("gemma") else 1.0)
    for layer in range(a.layers):
        p = f"blk.{layer}."
        add(p + "attn_norm.weight", (H,), 0.1, "norm")
        if a.arch == "phi3":  # q, k and v fused (llama.cpp's LLM_TENSOR_ATTN_QKV)
            add(p + "attn_qkv.weight", ((nh + 2 * nkv) * hd, H), 1.0 / np.sqrt(H))
        else:
            add(p + "attn_q.weight", (nh * hd, H), 1.0 / np.sqrt(H))
            add(p + "attn_k.weight", (nkv * hd, H), 1.0 / np.sqrt(H))
            add(p + "attn_v.weight", (nkv * hd, H), 1.0 / np.sqrt(H))
        if a.arch == "qwen2":
            add(p + "attn_q.bias", (nh * hd,), 0.5, "bias")
            add(p + "attn_k.bias", (nkv * hd,), 0.5, "bias")
            add(p + "attn_v.bias", (nkv * hd,), 0.5, "bias")
        if a.arch in ("qwen3", "gemma3"):
            add(p + "attn_q_norm.weight", (hd,), 0.1, "norm")
            add(p + "attn_k_norm.weight", (hd,), 0.1, "norm")
        add(p + "attn_output.weight", (H, nh * hd), 4.0 / np.sqrt(nh * hd))
        if a.arch in ("gemma2", "gemma3"):
            add(p + "post_attention_norm.weight", (H,), 0.1, "norm")
        add(p + "ffn_norm.weight", (H,), 0.1, "norm")
        if a.arch == "phi3":  # gate rows then up rows in one ffn_up
            add(p + "ffn_up.weight", (2 * F, H), 1.0 / np.sqrt(H))
        else:
            add(p + "ffn_gate.weight", (F, H), 1.0 / np.sqrt(H))
            add(p + "ffn_up.weight", (F, H), 1.0 / np.sqrt(H))
        add(p + "ffn_down.weight", (H, F), 4.0 / np.sqrt(F))
        if a.arch in ("gemma2", "gemma3"):
            add(p + "post_ffw_norm.weight", (H,), 0.1, "norm")
    if a.rope_freqs:
        # Llama 3.1's rule (transformers' _compute_llama3_parameters): wavelengths below
        # original / high_freq_factor keep their frequency, those above original / low_freq_factor
        # are divided by factor, and the band between is interpolated smoothly.
        factor, low, high, original = 8.0, 1.0, 4.0, 8192
        base = 10000.0 if a.arch == "llama" else 1000000.0
        factors = []
        for i in range(0, hd, 2):
            wavelen = 2 * np.pi / (1.0 / base ** (i / hd))
            if wavelen < original / high:
                factors.append(1.0)
            elif wavelen > original / low:
                factors.append(factor)
            else:
                smooth = (original / wavelen - low) / (high - low)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        writer.add_tensor("rope_freqs.weight", np.array(factors, dtype=np.float32))
    if a.longrope:
        # Shaped as Phi-3-mini-128k's: short factors near 1 rising slowly, long ones from 1 to tens
        # (the lowest frequencies stretched most).
        pairs = np.arange(hd // 2, dtype=np.float64) / max(1, hd // 2 - 1)
        writer.add_tensor("rope_factors_short.weight", (1.0 + 0.5 * pairs ** 2).astype(np.float32))
        writer.add_tensor("rope_factors_long.weight", (1.0 + 40.0 * pairs ** 3).astype(np.float32))
    add("output_norm.weight", (H,), 0.1, "norm")
    if a.untied:
        add("output.weight", (vocab, H), 1.0 / np.sqrt(H) * 4)
    for name in a.extra_tensor:
        add(name, (H,), 0.1, "bias")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
