#!/usr/bin/env python3
"""Writes GGUF files of a real model's shape with random weights, for bench/gguf_bench.py.

  llama32-1b    Llama-3.2-1B's shape: 16 layers, hidden 2048, FFN 8192, 32 heads of 64, 8 KV heads,
                the 128,256-token llama-bpe vocabulary, a tied head, and Llama 3.1's rope_freqs.weight
                (test/gguf/make_gguf_model.py --rope-freqs: the same rope scaling form as 3.2's)

Each is written in F16 by test/gguf/make_gguf_model.py, then quantized by llama.cpp's
llama-quantize to Q4_K_M, Q3_K_M and IQ4_XS (bench/build-llama-cpp.sh builds it), into
bench/.cache/shapes/<name>-<TYPE>.gguf; the F16 file is deleted. About 2.5 GB of disk while it
runs, a few minutes on two cores.

  .venv/bin/python bench/make_shaped_gguf.py [--types Q4_K_M,Q3_K_M,IQ4_XS]
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "bench" / ".cache" / "llama.cpp"
OUT = ROOT / "bench" / ".cache" / "shapes"
SHAPES = {
    "llama32-1b": ["--arch", "llama", "--hidden", "2048", "--ffn", "8192", "--heads", "32", "--kv-heads", "8",
                   "--layers", "16", "--rope-freqs", "--vocab",
                   str(LLAMA / "src" / "vendor" / "llama.cpp" / "models" / "ggml-vocab-llama-bpe.gguf")],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="Q4_K_M,Q3_K_M,IQ4_XS")
    a = ap.parse_args()
    quantize = LLAMA / "build" / "bin" / "llama-quantize"
    if not quantize.exists():
        print(f"make_shaped_gguf: {quantize} is missing (bench/build-llama-cpp.sh builds it)", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(LLAMA / "build" / "bin"))
    for name, args in SHAPES.items():
        f16 = OUT / f"{name}-F16.gguf"
        print(f"[make-shaped] {f16.name}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, str(ROOT / "test" / "gguf" / "make_gguf_model.py"), "--out", str(f16),
                        "--type", "f16", "--seed", "1", *args], check=True)
        try:
            for qtype in a.types.split(","):
                out = OUT / f"{name}-{qtype}.gguf"
                print(f"[make-shaped] {out.name}", file=sys.stderr, flush=True)
                subprocess.run([str(quantize), str(f16), str(out), qtype], env=env, check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            f16.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
