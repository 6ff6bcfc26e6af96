#!/usr/bin/env python3
"""Writes a byte-level BPE tokenizer.json with exactly 256 tokens (one per byte, GPT-2's byte-to-
unicode map, no merges), so a corpus model with a 256-token vocabulary can carry a tokenizer and
helm-rt streams text for it.

  byte_tokenizer.py OUT.json
"""
import json
import sys


def bytes_to_unicode():
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) +
                 list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, codes)))


def main():
    chars = bytes_to_unicode()
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0", "added_tokens": [], "normalizer": None, "post_processor": None,
        "pre_tokenizer": dict(type="ByteLevel", **byte_level),
        "decoder": dict(type="ByteLevel", **byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": {chars[b]: b for b in range(256)}, "merges": []},
    }
    with open(sys.argv[1], "w") as f:
        json.dump(tokenizer, f)


if __name__ == "__main__":
    main()
