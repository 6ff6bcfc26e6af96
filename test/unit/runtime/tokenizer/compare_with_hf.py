#!/usr/bin/env python3
"""Compares helm-tokenize (runtime/tokenizer) with the Hugging Face `tokenizers` package.

For every tokenizer.json in data/ (committed) and .cache/tokenizers/ (fetch_tokenizers.py, when
present), plus variants derived from them here (other merges format, Split pre-tokenizer with
each supported pattern, NFC, BOS template, Metaspace forms, added tokens with lstrip/normalized),
and for every line of data/sample.txt, the whole file as one string, and seeded random strings:
  - encode with add_special_tokens False and True: the ids must be equal;
  - decode HF's ids (skip_special_tokens False and True, and through StreamDecoder): the text must
    equal HF's decode.
Any mismatch prints the tokenizer, the input and the first differing position; exit code 1.
Exit code 77 (ctest: skipped) when the `tokenizers` package is not installed.
"""
import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    import tokenizers
except ImportError:
    print("compare_with_hf: the Python package `tokenizers` is not installed; skipping")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")
BYTE_LEVEL_NO_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}


def split(pattern, behavior, invert=False):
    return {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}


def byte_level_split(pattern):
    return {"type": "Sequence", "pretokenizers": [split({"Regex": pattern}, "Isolated"), BYTE_LEVEL_NO_REGEX]}


def with_string_merges(tok):
    """A copy of `tok` with its merges written as "a b" strings."""
    v = copy.deepcopy(tok)
    v["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in v["model"]["merges"]]
    return v


def with_metaspace(tok, decoder=True, **options):
    """A copy of `tok` without normalizer whose pre-tokenizer (and, if `decoder`, decoder after
    ByteFallback) is Metaspace with `options`."""
    v = copy.deepcopy(tok)
    v["normalizer"] = None
    metaspace = {"type": "Metaspace", "replacement": "\u2581", **options}
    v["pre_tokenizer"] = metaspace
    if decoder:
        v["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, dict(metaspace)]}
    return v


def variants(base):
    """Derived tokenizer.json objects: name -> dict."""
    out = {}
    if "gpt2" in base:
        g = base["gpt2"]
        v = with_string_merges(g)
        v["model"]["ignore_merges"] = True
        out["gpt2-string-merges-ignore-merges"] = v
        for name, pat in (("gpt2", GPT2_RE), ("llama3", LLAMA3_RE), ("qwen2", QWEN2_RE)):
            v = copy.deepcopy(g)
            v["pre_tokenizer"] = byte_level_split(pat)
            out[f"gpt2-split-{name}-pattern"] = v
        v = copy.deepcopy(g)
        v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            split({"String": " "}, "MergedWithNext"), split({"String": "e"}, "MergedWithPrevious"),
            split({"Regex": LLAMA3_RE}, "Contiguous"), BYTE_LEVEL_NO_REGEX]}
        out["gpt2-split-behaviors-1"] = v
        v = copy.deepcopy(g)
        v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            split({"String": " "}, "Removed"), split({"String": "a"}, "Isolated", True),
            split({"Regex": QWEN2_RE}, "MergedWithNext", True), split({"String": "o"}, "Removed", True), BYTE_LEVEL_NO_REGEX]}
        out["gpt2-split-behaviors-2"] = v
        v = copy.deepcopy(g)
        v["normalizer"] = {"type": "NFC"}
        v["pre_tokenizer"]["add_prefix_space"] = True
        v["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
             "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [50256], "tokens": ["<|endoftext|>"]}}}]}
        n = len(g["model"]["vocab"])
        v["added_tokens"] = v["added_tokens"] + [
            {"id": n, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False,
             "normalized": False, "special": True},
            {"id": n + 1, "content": "hello", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": True, "special": False},
            {"id": n + 2, "content": "[SEP]", "single_word": False, "lstrip": False, "rstrip": True,
             "normalized": False, "special": True},
            {"id": n + 3, "content": "word", "single_word": True, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False}]
        out["gpt2-nfc-prefix-space-template-added"] = v
    if "phi3" in base:
        p = base["phi3"]
        out["phi3-metaspace-first"] = with_metaspace(p, decoder=False, prepend_scheme="first", split=False)
        out["phi3-metaspace-always-split"] = with_metaspace(p, prepend_scheme="always", split=True)
        out["phi3-metaspace-legacy-add-prefix-space"] = with_metaspace(p, add_prefix_space=True)
        out["phi3-metaspace-never"] = with_metaspace(p, prepend_scheme="never", split=False)
        v = with_string_merges(p)
        v["model"]["byte_fallback"] = False
        v["model"]["unk_token"] = "<unk>"
        out["phi3-no-byte-fallback-unk"] = v
    # The settings of the Hub's tokenizer.json files that the GGUF conversion drops.
    if "llama3" in base:
        v = copy.deepcopy(base["llama3"])
        v["model"]["ignore_merges"] = True
        v["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                      "tokens": ["<|begin_of_text|>"]}}}]}
        out["llama3-hub-settings"] = v
    if "qwen2" in base:
        v = copy.deepcopy(base["qwen2"])
        v["normalizer"] = {"type": "NFC"}
        v["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
        out["qwen2-hub-settings"] = v
    return out


def random_texts(seed, pool, count=150):
    rng = random.Random(seed)
    extra = ["'s", "'T", "'re", "\r", "\t", "  ", " ", "\u00a0", "\u3000", "<|endoftext|>", "</s>", "<s>",
             "e\u0301", "\u1100\u1161", "\u017f", "0", "12345", "\U0001F600", "\u200d", "<mask>", "[SEP]",
             "hello", "word", "\u2581", "\ufffd"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.4:
                parts.append(rng.choice(extra))
            elif r < 0.8:
                parts.append(rng.choice(pool))
            else:
                cp = rng.randint(0x20, 0x2FFFF)
                if 0xD800 <= cp <= 0xDFFF:
                    cp = 0x41
                parts.append(chr(cp))
        out.append("".join(parts).replace("\n", " "))
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return r.stdout.decode("utf-8")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm-tokenize", required=True)
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--cache", default=os.path.join(HERE, ".cache", "tokenizers"))
    ap.add_argument("--max-failures", type=int, default=5)
    args = ap.parse_args()

    files = {}
    for d in (args.data, args.cache):
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".json") and f[:-5] not in files:
                    files[f[:-5]] = os.path.join(d, f)
    if len(files) < 2:
        print(f"compare_with_hf: fewer than two tokenizer files in {args.data}")
        return 1
    with open(os.path.join(args.data, "sample.txt"), encoding="utf-8", newline="") as f:
        sample = f.read()
    lines = sample.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    pool = [w for line in lines for w in line.split(" ") if w]
    texts = lines + random_texts(1234, pool)

    failures = 0
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = {}
        for name in ("gpt2", "phi3", "llama3", "qwen2"):
            if name in files:
                with open(files[name], encoding="utf-8") as f:
                    base[name] = json.load(f)
        for name, obj in variants(base).items():
            path = os.path.join(tmp, name + ".json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(obj, f, ensure_ascii=False)
            files[name] = path

        text_file = os.path.join(tmp, "texts.txt")
        with open(text_file, "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(texts) + "\n")
        whole_file = os.path.join(args.data, "sample.txt")

        for name, path in files.items():
            hf = tokenizers.Tokenizer.from_file(path)
            fails_here = 0

            def report(kind, text, want, got, vocab_of=None):
                nonlocal failures, fails_here
                failures += 1
                fails_here += 1
                if fails_here > args.max_failures:
                    return
                print(f"MISMATCH [{name}] {kind}: input {text!r}")
                if isinstance(want, list):
                    i = first_diff(want, got)
                    print(f"  first difference at id position {i} (hf {len(want)} ids, helm {len(got)} ids)")
                    print(f"  hf  : {want[max(0, i - 3):i + 5]}  {[hf.id_to_token(t) for t in want[i:i + 5]]}")
                    print(f"  helm: {got[max(0, i - 3):i + 5]}  {[hf.id_to_token(t) for t in got[i:i + 5]]}")
                else:
                    i = first_diff(want, got)
                    print(f"  first difference at character {i}: hf {want[i:i + 20]!r} helm {got[i:i + 20]!r}")

            hf_ids = {}
            for special in (False, True):
                flags = ["--special"] if special else []
                out = run([args.helm_tokenize, "encode", path, text_file] + flags).split("\n")
                whole = run([args.helm_tokenize, "encode", path, whole_file, "--whole"] + flags).split("\n")[0]
                for i, text in enumerate(texts):
                    want = hf.encode(text, add_special_tokens=special).ids
                    got = [int(x) for x in out[i].split()]
                    checked += 1
                    if want != got:
                        report(f"encode(add_special_tokens={special}) line {i + 1}", text, want, got)
                    hf_ids[(i, special)] = want
                want = hf.encode(sample, add_special_tokens=special).ids
                got = [int(x) for x in whole.split()]
                checked += 1
                if want != got:
                    report(f"encode(add_special_tokens={special}) whole sample.txt", "<sample.txt>", want, got)

            ids_file = os.path.join(tmp, "ids.txt")
            id_lists = [hf_ids[(i, True)] for i in range(len(texts))]
            id_lists.append(hf.encode(sample, add_special_tokens=True).ids)
            with open(ids_file, "w") as f:
                f.write("\n".join(" ".join(map(str, ids)) for ids in id_lists) + "\n")
            for skip in (False, True):
                want_all = [hf.decode(ids, skip_special_tokens=skip) for ids in id_lists]
                for mode in ([], ["--stream"]):
                    flags = (["--skip-special"] if skip else []) + mode
                    got_all = [json.loads(l) for l in run([args.helm_tokenize, "decode", path, ids_file] + flags).splitlines()]
                    for i, (want, got) in enumerate(zip(want_all, got_all)):
                        checked += 1
                        if want != got:
                            src = texts[i] if i < len(texts) else "<sample.txt>"
                            report(f"decode(skip_special_tokens={skip}){' stream' if mode else ''}", src, want, got)
                    if len(got_all) != len(want_all):
                        report("decode: number of outputs", "", [len(want_all)], [len(got_all)])
            status = "ok" if fails_here == 0 else f"{fails_here} mismatches"
            print(f"[{name}] {len(texts) + 1} texts x encode/decode variants: {status}")

    print(f"compare_with_hf: {len(files)} tokenizers, {checked} comparisons, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
