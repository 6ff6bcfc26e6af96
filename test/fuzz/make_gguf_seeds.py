#!/usr/bin/env python3
"""Writes the GGUF reader's fuzzing seeds (test/fuzz/gguf-corpus/), small files written by the
`gguf` package's GGUFWriter:

  synthetic-v3.gguf, synthetic-a64.gguf   every metadata value type and array, tensors of eight ggml
                                          types (test/gguf/check_gguf_reader.py's file), alignment 32
                                          and 64
  llama-tiny.gguf                         a llama-shaped model: the architecture keys, a 64-token
                                          gpt2-style tokenizer (tokens, token_type, merges, scores,
                                          special ids, chat template) and one block of Q8_0 / Q4_1 /
                                          Q4_K / F32 tensors
  no-tensors.gguf                         metadata only (like llama.cpp's vocabulary files)
  llama-q5-iq4.gguf                       a whole one-block llama model (test/gguf/make_gguf_model.py)
                                          in Q5_0, with Q5_1, IQ4_NL and IQ4_XS tensors
  llama-iq.gguf                           a whole one-block llama model 256 wide in Q5_0 with a
                                          tensor of each lattice type: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS
                                          and IQ3_S (rows of whole 256-weight blocks)
  phi3-q8.gguf                            a one-block phi3 model in Q8_0 (fused attn_qkv and ffn_up,
                                          a sliding window)
  llama31-rope-freqs.gguf                 a one-block llama model in Q4_0 with Llama 3.1's
                                          rope_freqs.weight
  gemma3-q8.gguf                          a two-block gemma3 model in Q8_0 (post-norms, q/k norms, a
                                          sliding-window pattern of 2, linear rope scaling, a soft cap)
  gemma2-q4.gguf                          a two-block gemma2 model in Q4_0 (soft-capped attention and
                                          logits, the default window and pattern)
  phi3-longrope.gguf                      a one-block phi3 model in Q8_0 with LongRoPE's two tables
                                          and attention factor (the fuzz target's context, 8192,
                                          takes the long one)
  mistral3-yarn.gguf                      a one-block mistral3 model in Q4_0 with yarn's tuning keys
                                          and an attention temperature

  .venv/bin/python test/fuzz/make_gguf_seeds.py
"""
import os
import pathlib
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ROOT = pathlib.Path(__file__).resolve().parent
OUT = ROOT / "gguf-corpus"
sys.path.insert(0, str(ROOT.parent / "gguf"))
import check_gguf_reader  # noqa: E402


def llama_tiny(path, tensors=True):
    rng = np.random.default_rng(3)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(256)
    w.add_feed_forward_length(512)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    tokens = [f"t{i}" for i in range(60)] + ["<s>", "</s>", "Ġa", "Ġb"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([1] * 60 + [3, 3, 1, 1])
    w.add_token_scores([float(-i) for i in range(64)])
    w.add_token_merges(["Ġ a", "Ġ b", "t 1"])
    w.add_bos_token_id(60)
    w.add_eos_token_id(61)
    w.add_add_bos_token(True)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    if tensors:
        def add(name, ttype, shape):
            x = rng.standard_normal(shape).astype(np.float32)
            if ttype == T.F32:
                w.add_tensor(name, x)
            elif ttype == T.Q4_K:  # gguf-py has no k-quant quantizer: random blocks
                block, size = gguf.GGML_QUANT_SIZES[ttype]
                raw = rng.integers(0, 256, size=(shape[0], shape[1] // block * size), dtype=np.uint8)
                w.add_tensor(name, raw, raw_dtype=ttype)
            else:
                w.add_tensor(name, gguf.quants.quantize(x, ttype), raw_dtype=ttype)
        add("token_embd.weight", T.Q8_0, (64, 256))
        add("blk.0.attn_norm.weight", T.F32, (256,))
        add("blk.0.attn_q.weight", T.Q4_1, (256, 256))
        add("blk.0.ffn_down.weight", T.Q4_K, (32, 512))
        add("output_norm.weight", T.F32, (256,))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    OUT.mkdir(exist_ok=True)
    check_gguf_reader.write_synthetic(str(OUT / "synthetic-v3.gguf"), None)
    check_gguf_reader.write_synthetic(str(OUT / "synthetic-a64.gguf"), 64)
    llama_tiny(OUT / "llama-tiny.gguf")
    llama_tiny(OUT / "no-tensors.gguf", tensors=False)
    import subprocess
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "llama",
                    "--out", str(OUT / "llama-q5-iq4.gguf"), "--type", "q5_0", "--hidden", "64", "--ffn", "256",
                    "--heads", "2", "--kv-heads", "1", "--layers", "1",
                    "--tensor-type", "blk.0.attn_k.weight=q5_1", "--tensor-type", "blk.0.attn_v.weight=iq4_nl",
                    "--tensor-type", "blk.0.ffn_down.weight=iq4_xs"], check=True)
    # The lattice types' rows are whole super-blocks of 256: the projections that read the 256-wide
    # hidden state (q, k, v, gate, up); attn_output, ffn_down (rows of 64) and the table stay Q5_0.
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "llama",
                    "--out", str(OUT / "llama-iq.gguf"), "--type", "q5_0", "--hidden", "256", "--ffn", "64",
                    "--heads", "2", "--kv-heads", "1", "--head-dim", "32", "--layers", "1",
                    "--tensor-type", "blk.0.attn_q.weight=iq2_xxs", "--tensor-type", "blk.0.attn_k.weight=iq2_xs",
                    "--tensor-type", "blk.0.attn_v.weight=iq2_s", "--tensor-type", "blk.0.ffn_gate.weight=iq3_xxs",
                    "--tensor-type", "blk.0.ffn_up.weight=iq3_s"], check=True)
    small = ["--hidden", "64", "--ffn", "128", "--heads", "2", "--kv-heads", "1", "--layers", "1"]
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "phi3",
                    "--out", str(OUT / "phi3-q8.gguf"), "--type", "q8_0", *small,
                    "--set", "phi3.attention.sliding_window=2047"], check=True)
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "llama",
                    "--out", str(OUT / "llama31-rope-freqs.gguf"), "--type", "q4_0", *small, "--rope-freqs"],
                   check=True)
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "gemma3",
                    "--out", str(OUT / "gemma3-q8.gguf"), "--type", "q8_0", *small[:-2], "--layers", "2",
                    "--head-dim", "32", "--set", "gemma3.attention.sliding_window=8",
                    "--set", "gemma3.attention.sliding_window_pattern=2",
                    "--set", "gemma3.rope.scaling.type=str:linear", "--set", "gemma3.rope.scaling.factor=8.0",
                    "--set", "gemma3.final_logit_softcapping=30.0"], check=True)
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "gemma2",
                    "--out", str(OUT / "gemma2-q4.gguf"), "--type", "q4_0", *small[:-2], "--layers", "2"], check=True)
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "phi3",
                    "--out", str(OUT / "phi3-longrope.gguf"), "--type", "q8_0", *small, "--longrope", "4096"],
                   check=True)
    subprocess.run([sys.executable, str(ROOT.parent / "gguf" / "make_gguf_model.py"), "--arch", "mistral3",
                    "--out", str(OUT / "mistral3-yarn.gguf"), "--type", "q4_0", *small,
                    "--set", "mistral3.rope.scaling.type=str:yarn", "--set", "mistral3.rope.scaling.factor=16.0",
                    "--set", "mistral3.rope.scaling.original_context_length=8192",
                    "--set", "mistral3.rope.scaling.yarn_beta_fast=16.0",
                    "--set", "mistral3.rope.scaling.yarn_log_multiplier=0.5",
                    "--set", "mistral3.attention.temperature_scale=0.1"], check=True)
    for f in sorted(OUT.iterdir()):
        print(f"{f.name}: {f.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
