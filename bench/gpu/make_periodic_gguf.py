#!/usr/bin/env python3
"""Realistic-size F16 GGUF files whose bytes repeat, for GPU speed runs that must travel small.

A GPU's decode speed does not depend on the weights' values, only on their shapes and on every byte
being there. Each matrix here is one random block of PERIOD rows repeated down its height (written
from a broadcast view: no memory is spent on the repeats), one block per row width. helmc compiles
such a file like any other (`--quantize=q4_k_m` too) and the package keeps the repetition, so
`zstd --long=30` shrinks a 16 GB package to a few MB (xz cannot: its matches are at most 273 bytes).
The tokens such a model generates are meaningless; only its timing is.

    .venv/bin/python bench/gpu/make_periodic_gguf.py --preset llama-8b --out l8b.gguf

Presets: llama-8b (Llama-3-8B's shape: hidden 4096, 32 layers, 32/8 heads of 128, FFN 14336,
vocabulary 128256, untied head), qwen3-0.6b (Qwen3-0.6B's: hidden 1024, 28 layers, 16/8 heads of
128, FFN 3072, vocabulary 151936, q/k norms, tied head), tiny (for tests). The vocabulary is
SentencePiece-style byte tokens plus placeholders.
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("make_periodic_gguf.py: needs the gguf package (pip install gguf, or the project's .venv)")

PRESETS = {
    "llama-8b": dict(arch="llama", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                     vocab=128256, eps=1e-5, theta=5e5, qk_norm=False, tied=False),
    "qwen3-0.6b": dict(arch="qwen3", hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072,
                       vocab=151936, eps=1e-6, theta=1e6, qk_norm=True, tied=True),
    "tiny": dict(arch="llama", hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64, ffn=512,
                 vocab=512, eps=1e-5, theta=1e4, qk_norm=False, tied=False),
}
PERIOD = 8  # rows of the repeated block: a multiple of the GPU kernels' row tiles


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--context", type=int, default=8192, help="the file's context length")
    args = ap.parse_args()
    p = PRESETS[args.preset]
    start = time.time()
    rng = np.random.default_rng(1)
    tmp = args.out + ".part"
    w = gguf.GGUFWriter(tmp, p["arch"])
    w.add_name(f"periodic {args.preset} f16 (timing only)")
    w.add_context_length(args.context)
    w.add_embedding_length(p["hidden"])
    w.add_block_count(p["layers"])
    w.add_feed_forward_length(p["ffn"])
    w.add_head_count(p["heads"])
    w.add_head_count_kv(p["kv_heads"])
    w.add_key_length(p["head_dim"])
    w.add_value_length(p["head_dim"])
    w.add_rope_dimension_count(p["head_dim"])
    w.add_rope_freq_base(p["theta"])
    w.add_layer_norm_rms_eps(p["eps"])
    w.add_vocab_size(p["vocab"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    vocab = p["vocab"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581w{i}" for i in range(vocab - len(tokens))]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(vocab - 259)])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab - 259))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    blocks: dict[int, np.ndarray] = {}
    matrix_bytes = 0

    def matrix(name: str, rows: int, cols: int) -> None:
        nonlocal matrix_bytes
        if cols not in blocks:
            blocks[cols] = (rng.standard_normal((PERIOD, cols), dtype=np.float32) * 0.02).astype(np.float16)
        view = np.broadcast_to(blocks[cols], (rows // PERIOD, PERIOD, cols))
        w.add_tensor(name, view, raw_shape=(rows, cols), raw_dtype=gguf.GGMLQuantizationType.F16)
        matrix_bytes += rows * cols * 2

    def norm(name: str, width: int) -> None:
        w.add_tensor(name, np.ones(width, dtype=np.float32))

    hidden, heads, kv, dim, ffn = p["hidden"], p["heads"], p["kv_heads"], p["head_dim"], p["ffn"]
    matrix("token_embd.weight", vocab, hidden)
    norm("output_norm.weight", hidden)
    if not p["tied"]:
        matrix("output.weight", vocab, hidden)
    for i in range(p["layers"]):
        b = f"blk.{i}."
        norm(b + "attn_norm.weight", hidden)
        matrix(b + "attn_q.weight", heads * dim, hidden)
        matrix(b + "attn_k.weight", kv * dim, hidden)
        matrix(b + "attn_v.weight", kv * dim, hidden)
        matrix(b + "attn_output.weight", hidden, heads * dim)
        if p["qk_norm"]:
            norm(b + "attn_q_norm.weight", dim)
            norm(b + "attn_k_norm.weight", dim)
        norm(b + "ffn_norm.weight", hidden)
        matrix(b + "ffn_gate.weight", ffn, hidden)
        matrix(b + "ffn_up.weight", ffn, hidden)
        matrix(b + "ffn_down.weight", hidden, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, args.out)
    print(f"make_periodic_gguf: wrote {args.out}: {os.path.getsize(args.out) / 2**30:.2f} GiB "
          f"({matrix_bytes / 2**30:.2f} GiB of matrices) in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
