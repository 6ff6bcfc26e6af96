#!/usr/bin/env python3
"""Runs helm-rt with --emit-ids (greedy) and compares the ids on its last stdout line(s) with the
ONNX Runtime oracle (test/e2e/ort_oracle.py) on the original .onnx: an independent reference.

  check_emit_ids.py --runtime HELM_RT --package P.helmpkg --model M.onnx --oracle ort_oracle.py \
      -n 8 --prompt-ids 1,2,3 [--prompt-ids 4,5] [-- extra helm-rt flags]

Prints "ids match: ..." per prompt and exits 0, or explains the mismatch and exits 1.
"""
import argparse
import importlib.util
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--package", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--oracle", required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--prompt-ids", action="append", required=True)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()

    cmd = [a.runtime, a.package, "-n", str(a.n), "--temperature", "0", "--ignore-eos", "--emit-ids",
           "-t", "2"] + a.extra
    for p in a.prompt_ids:
        cmd += ["--prompt-ids", p]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"helm-rt failed ({run.returncode}): {run.stderr.strip()}")
        return 1
    lines = run.stdout.rstrip("\n").split("\n")
    if len(lines) < len(a.prompt_ids):
        print(f"expected {len(a.prompt_ids)} id lines, stdout was {run.stdout!r}")
        return 1
    ours = []
    for line in lines[-len(a.prompt_ids):]:
        try:
            ours.append([int(x) for x in line.split(",")])
        except ValueError:
            print(f"not a comma-separated id line: {line!r}")
            return 1

    spec = importlib.util.spec_from_file_location("ort_oracle", a.oracle)
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    prompts = [[int(x) for x in p.split(",")] for p in a.prompt_ids]
    ref, _ = oracle.generate(a.model, prompts, a.n)

    ok = True
    for i, (o, r) in enumerate(zip(ours, ref)):
        if o != r:
            print(f"prompt {i}: helm-rt {o} != onnxruntime {r}")
            ok = False
        else:
            print(f"ids match: prompt {i}: {','.join(map(str, o))}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
