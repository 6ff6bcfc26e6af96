#!/usr/bin/env python3
"""Writes GGUF files of a real model's shape with random weights, for bench/gguf_bench.py.

  llama32-1b    Llama-3.2-1B's shape: 16 layers, hidden 2048, FFN 8192, 32 heads of 64, 8 KV heads,
                the 128,256-token llama-bpe vocabulary, a tied head, and Llama 3.1's rope_freqs.weight
                (test/gguf/make_gguf_model.py --rope-freqs: the same rope scaling form as 3.2's)

Each is written in F16 by test/gguf/make_gguf_model.py, then quantized by llama.cpp's
llama-quantize to each of TYPES (bench/build-llama-cpp.sh builds it) into
bench/.cache/shapes/<name>-<TYPE>.gguf; the F16 file is deleted. The IQ2/IQ3 mixes need an
importance matrix: they get a uniform one (test/e2e/check_gguf.py's write_uniform_imatrix), as
random weights have no data to weigh. About 6 GB of disk while it runs, 10-15 minutes on two
cores (the lattice searches of IQ2_XXS and IQ3_S take most of it).

  .venv/bin/python bench/make_shaped_gguf.py [--types Q4_K_M,Q3_K_M,...]
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test" / "e2e"))
from check_gguf import write_uniform_imatrix  # noqa: E402
LLAMA = ROOT / "bench" / ".cache" / "llama.cpp"
OUT = ROOT / "bench" / ".cache" / "shapes"
# llama.cpp's mixes that bench/gguf_bench.py runs by default: the common k-quant mixes, the
# decoded formats (IQ4_XS, Q5_0) and two lattice mixes.
TYPES = ("Q4_K_M", "Q3_K_M", "Q2_K", "IQ4_XS", "Q5_0", "IQ3_S", "IQ2_XXS")
SHAPES = {
    "llama32-1b": ["--arch", "llama", "--hidden", "2048", "--ffn", "8192", "--heads", "32", "--kv-heads", "8",
                   "--layers", "16", "--rope-freqs", "--vocab",
                   str(LLAMA / "src" / "vendor" / "llama.cpp" / "models" / "ggml-vocab-llama-bpe.gguf")],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default=",".join(TYPES))
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
        imatrix = OUT / f"{name}-uniform.imatrix.gguf"
        try:
            for qtype in a.types.split(","):
                out = OUT / f"{name}-{qtype}.gguf"
                print(f"[make-shaped] {out.name}", file=sys.stderr, flush=True)
                extra = []
                if qtype.startswith(("IQ2", "IQ3", "IQ1")):
                    if not imatrix.exists():
                        write_uniform_imatrix(f16, imatrix)
                    extra = ["--imatrix", str(imatrix)]
                partial = out.with_suffix(".partial")
                try:
                    subprocess.run([str(quantize), *extra, str(f16), str(partial), qtype], env=env, check=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    partial.rename(out)
                finally:  # a failed or interrupted quantization leaves no partial file behind
                    partial.unlink(missing_ok=True)
        finally:
            f16.unlink()
            imatrix.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
