#!/usr/bin/env python3
"""Perplexity of an ONNX model on a text, by ONNX Runtime: the reference for helm-rt --perplexity.

  ort_perplexity.py MODEL.onnx TEXT WINDOW STATS.json

The text's token ids are its UTF-8 bytes (the 256-token byte-level tokenizer of byte_tokenizer.py
maps byte b to id b), cut into windows of WINDOW ids like helm-rt does (the last may be shorter, a
last window of one id is dropped). Each window runs through the graph once, whole (no KV cache),
and every position's logits give -log softmax[next id] in float64. Compares exp(mean NLL) with
helm-rt's "perplexity" in STATS.json: prints "perplexity ok" when they agree within 1e-4 relative
(the fp32 logits bound of the end-to-end tests) and the token counts are equal; else the numbers.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "e2e"))
import ort_oracle  # noqa: E402


def main():
    model_path, text_path, window, stats_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    ids = list(open(text_path, "rb").read())
    windows = [ids[at:at + window] for at in range(0, len(ids) - 1, window)]
    if len(windows) > 1 and len(windows[-1]) < 2:
        windows.pop()
    model = ort_oracle.OrtModel(model_path)
    nll, count = 0.0, 0
    for w in windows:
        logits, _ = model.run(w)
        logits = np.asarray(logits, dtype=np.float64)
        peak = logits.max(axis=1, keepdims=True)
        logz = np.log(np.exp(logits - peak).sum(axis=1)) + peak[:, 0]
        for t in range(len(w) - 1):
            nll += logz[t] - logits[t, w[t + 1]]
            count += 1
    ours = json.load(open(stats_path))
    ref = float(np.exp(nll / count))
    rel = abs(ours["perplexity"] - ref) / ref
    if ours["scored_tokens"] != count or rel > 1e-4:
        sys.exit("perplexity: helm-rt %r over %d tokens, ONNX Runtime %r over %d (rel. %.2e)" %
                 (ours["perplexity"], ours["scored_tokens"], ref, count, rel))
    print("perplexity ok")


if __name__ == "__main__":
    main()
