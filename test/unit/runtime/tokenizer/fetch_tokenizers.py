#!/usr/bin/env python3
"""Produces real Hugging Face tokenizer.json files for the tokenizer tests, from PyPI only.

    .venv/bin/python test/unit/runtime/tokenizer/fetch_tokenizers.py [--commit]

Source: the sdist of llama-cpp-python (pinned below) vendors llama.cpp's vocab-only GGUF files
(vendor/llama.cpp/models/ggml-vocab-*.gguf). `transformers` converts a GGUF's tokenizer to a fast
tokenizer (AutoTokenizer.from_pretrained(dir, gguf_file=...)), and save_pretrained writes the
tokenizer.json. Each is re-serialised compactly (same content) to
test/unit/runtime/tokenizer/.cache/tokenizers/<name>.json.

Idempotent: the sdist, the extracted GGUFs and the converted files are cached in
test/unit/runtime/tokenizer/.cache/ (git-ignored); nothing is fetched twice. `--commit` also copies the
small, permissively licensed ones (COMMITTED below) to test/unit/runtime/tokenizer/data/.
Needs `transformers` and `gguf` (scripts/requirements-corpus.txt); a missing `gguf` is installed
into the cache with pip --target.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, ".cache")
OUT = os.path.join(CACHE, "tokenizers")
DATA = os.path.join(HERE, "data")
SDIST_PKG = "llama-cpp-python==0.3.36"
SDIST_FILE = "llama_cpp_python-0.3.36.tar.gz"
GGUF_PKG = "gguf==0.19.0"

# name -> GGUF in vendor/llama.cpp/models
VOCABS = {
    "gpt2": "ggml-vocab-gpt-2.gguf",          # byte-level BPE, ByteLevel(use_regex) pre-tokenizer
    "qwen2": "ggml-vocab-qwen2.gguf",         # byte-level BPE, Split(Qwen2 pattern) + ByteLevel
    "llama3": "ggml-vocab-llama-bpe.gguf",    # byte-level BPE, Split(Llama 3 pattern) + ByteLevel
    "llama2-spm": "ggml-vocab-llama-spm.gguf",  # SentencePiece BPE, byte fallback, Metaspace
    "phi3": "ggml-vocab-phi-3.gguf",          # SentencePiece BPE, byte fallback, Prepend+Replace
}
# Small (< 5 MB compact) and MIT-licensed models: committed under data/.
COMMITTED = ["gpt2", "phi3"]


def pip(*args):
    subprocess.check_call([sys.executable, "-m", "pip", "--disable-pip-version-check", *args])


def sdist_path():
    path = os.path.join(CACHE, SDIST_FILE)
    if not os.path.exists(path):
        os.makedirs(CACHE, exist_ok=True)
        pip("download", "--no-binary", ":all:", "--no-deps", SDIST_PKG, "-d", CACHE)
    return path


def extract_ggufs():
    dest = os.path.join(CACHE, "gguf")
    missing = [g for g in VOCABS.values() if not os.path.exists(os.path.join(dest, g))]
    if not missing:
        return dest
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(sdist_path()) as tar:
        for member in tar.getmembers():
            base = os.path.basename(member.name)
            if base in missing and "/vendor/llama.cpp/models/" in member.name and member.isfile():
                with tar.extractfile(member) as src, open(os.path.join(dest, base), "wb") as dst:
                    shutil.copyfileobj(src, dst)
    still = [g for g in VOCABS.values() if not os.path.exists(os.path.join(dest, g))]
    if still:
        sys.exit(f"fetch_tokenizers: {SDIST_FILE} has no {', '.join(still)}")
    return dest


def ensure_gguf():
    try:
        import gguf  # noqa: F401
        return
    except ImportError:
        pass
    target = os.path.join(CACHE, "pylib")
    if not os.path.isdir(os.path.join(target, "gguf")):
        pip("install", "--no-deps", "--target", target, GGUF_PKG)
    sys.path.insert(0, target)


def convert(name, gguf_dir):
    out = os.path.join(OUT, name + ".json")
    if os.path.exists(out):
        return out
    ensure_gguf()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=VOCABS[name])
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        with open(os.path.join(tmp, "tokenizer.json"), encoding="utf-8") as f:
            data = json.load(f)
    os.makedirs(OUT, exist_ok=True)
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
    os.replace(out + ".tmp", out)
    print(f"fetch_tokenizers: wrote {out}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commit", action="store_true", help="copy the committed ones into data/")
    ap.add_argument("names", nargs="*", default=list(VOCABS), help="subset of " + ", ".join(VOCABS))
    args = ap.parse_args()
    for n in args.names:
        if n not in VOCABS:
            sys.exit(f"fetch_tokenizers: unknown name '{n}'")
    gguf_dir = extract_ggufs()
    for n in args.names:
        path = convert(n, gguf_dir)
        if args.commit and n in COMMITTED:
            shutil.copyfile(path, os.path.join(DATA, n + ".json"))
    print("fetch_tokenizers: " + ", ".join(os.path.join(OUT, n + ".json") for n in args.names))


if __name__ == "__main__":
    main()
