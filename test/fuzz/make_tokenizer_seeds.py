#!/usr/bin/env python3
"""Writes small tokenizer.json seeds for helm-tokenizer-fuzzer into test/fuzz/tokenizer-corpus/.

Each seed is a real tokenizer (test/unit/runtime/tokenizer/data: GPT-2's byte-level BPE and Phi-3's
SentencePiece-style BPE) cut to its first vocabulary entries and the merges among them, so every
normalizer, pre-tokenizer, decoder and post-processor the real file has is kept while a fuzzer
mutation parses in microseconds. The full files are seeds too (the seed test and scripts/test.sh
read that folder directly).

  .venv/bin/python test/fuzz/make_tokenizer_seeds.py
"""
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "unit" / "runtime" / "tokenizer" / "data"
OUT = HERE / "tokenizer-corpus"


def shrink(doc, keep):
    model = doc["model"]
    vocab = model["vocab"]
    kept = {tok: i for tok, i in vocab.items() if i < keep}
    merges = []
    for merge in model.get("merges", []):
        parts = merge.split(" ") if isinstance(merge, str) else list(merge)
        if len(parts) == 2 and all(p in kept for p in parts) and "".join(parts) in kept:
            merges.append(merge)
    model["vocab"] = kept
    model["merges"] = merges
    return doc


def main():
    OUT.mkdir(exist_ok=True)
    for name, keep in (("gpt2", 400), ("phi3", 400)):
        doc = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
        small = shrink(doc, keep)
        (OUT / f"{name}-small.json").write_text(json.dumps(small, ensure_ascii=False), encoding="utf-8")
        print(f"{name}-small.json: {len(small['model']['vocab'])} tokens, {len(small['model']['merges'])} merges")


if __name__ == "__main__":
    main()
