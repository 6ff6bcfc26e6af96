#!/usr/bin/env python3
"""A/B: two builds of HELM on the same model, interleaved, to show that a change moved no speed.

  bench/ab_bench.py --a OLD_BUILD_DIR --b NEW_BUILD_DIR --model model.onnx [--runs 5] [--threads 1,2]

Each build's helmc compiles the model once (--target=host; compile wall time recorded); then for each
thread count the two packages run alternately, A B A B ..., --runs times each, a fresh helm-rt process
per run: `helm-rt pkg --prompt-ids <P ids> -n N --temperature 0 --ignore-eos -t T --stats-json`.
Interleaving matters here: this machine's memory bandwidth swings up to 2x between minutes, so a block
of A runs followed by a block of B runs measures the machine, not the change.

Printed: per thread count, decode and prefill tok/s of A and B as median [min..max], and B/A of the
medians. The greedy ids of A and B are compared too (identical code should give identical ids).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def compile_package(build, model, tokenizer, out):
    cmd = [os.path.join(build, "bin", "helmc"), model, "--target=host", "-o", out]
    if tokenizer:
        cmd += ["--tokenizer", tokenizer]
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def run_once(build, package, prompt_ids, tokens, threads, stats_path):
    cmd = [os.path.join(build, "bin", "helm-rt"), package, "--prompt-ids", ",".join(map(str, prompt_ids)),
           "-n", str(tokens), "--temperature", "0", "--ignore-eos", "-t", str(threads),
           "--stats-json", stats_path, "--emit-ids"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    with open(stats_path) as f:
        stats = json.load(f)
    return stats, out.split()


def summary(values):
    return "%7.1f [%6.1f..%6.1f]" % (statistics.median(values), min(values), max(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="build directory of the baseline (with bin/helmc, bin/helm-rt)")
    ap.add_argument("--b", required=True, help="build directory of the change")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=128, help="prompt length in token ids")
    ap.add_argument("-n", "--tokens", type=int, default=128)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        packages, compile_s = {}, {}
        for side in ("a", "b"):
            packages[side] = os.path.join(tmp, side + ".helmpkg")
            compile_s[side] = compile_package(getattr(args, side), args.model, args.tokenizer, packages[side])
        print("compile (helmc --target=host): A %.1f s, B %.1f s" % (compile_s["a"], compile_s["b"]))
        prompt_ids = [(i * 7919) % 1000 + 10 for i in range(args.prompt)]
        print("%-3s %-26s %-26s %-6s %-26s %-26s %-6s %s" % ("T", "decode A tok/s", "decode B tok/s", "B/A",
                                                         "prefill A tok/s", "prefill B tok/s", "B/A", "ids"))
        for threads in [int(t) for t in args.threads.split(",")]:
            results = {"a": {"decode": [], "prefill": [], "ids": None}, "b": {"decode": [], "prefill": [], "ids": None}}
            for _ in range(args.runs):
                for side in ("a", "b"):
                    stats, ids = run_once(getattr(args, side), packages[side], prompt_ids, args.tokens, threads,
                                          os.path.join(tmp, "stats.json"))
                    results[side]["decode"].append(stats["decode_tok_s"])
                    results[side]["prefill"].append(stats["prefill_tok_s"])
                    results[side]["ids"] = ids
            a, b = results["a"], results["b"]
            same = "same" if a["ids"] == b["ids"] else "DIFFER"
            print("%-3d %-26s %-26s %-6.3f %-26s %-26s %-6.3f %s" % (
                threads, summary(a["decode"]), summary(b["decode"]),
                statistics.median(b["decode"]) / statistics.median(a["decode"]),
                summary(a["prefill"]), summary(b["prefill"]),
                statistics.median(b["prefill"]) / statistics.median(a["prefill"]), same))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
