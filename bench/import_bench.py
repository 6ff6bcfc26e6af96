#!/usr/bin/env python3
"""Import benchmark: helmc on a Qwen3-0.6B-shaped fp16 model with external data.

Builds the model once (random weights, real Qwen3-0.6B configuration: 28 layers, hidden 1024, 16/8
heads, head_dim 128, vocab 151936, tied) with transformers + torch.onnx.export, caches it under
bench/.cache/, then times `helmc --emit=config` (import + raise + config) and reads its peak RSS from
/usr/bin/time. As a peer in the same run it times `onnx.load(..., load_external_data=False)`, the
protobuf parse every ONNX tool does first. Goals of the front end: <= 5 s per GB of weights, peak RSS <= 300 MB.

  .venv/bin/python bench/import_bench.py [--helmc build/bin/helmc] [--runs 3]
Needs the corpus tooling once: scripts/install-deps.sh --corpus
"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache" / "qwen3-0.6b-fp16"


def build_model(path):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.Qwen3Config(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                         num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                         vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=40960,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, use_sliding_window=False)
    cfg._attn_implementation = "sdpa"
    model = tf.Qwen3ForCausalLM(cfg).eval().to(torch.float16)

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, position_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          position_ids=position_ids, use_cache=False).logits

    ids = torch.zeros(1, 8, dtype=torch.int64)
    mask = torch.ones(1, 8, dtype=torch.int64)
    pos = torch.arange(8).unsqueeze(0)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    path.parent.mkdir(parents=True, exist_ok=True)
    prog = torch.onnx.export(Logits(model), (ids, mask, pos), dynamo=True, opset_version=18,
                             input_names=["input_ids", "attention_mask", "position_ids"],
                             output_names=["logits"],
                             dynamic_shapes={"input_ids": {0: batch, 1: seq},
                                             "attention_mask": {0: batch, 1: seq},
                                             "position_ids": {0: batch, 1: seq}})
    prog.save(str(path), external_data=True)


def time_helmc(helmc, model):
    out = subprocess.run(["/usr/bin/time", "-v", helmc, str(model), "--emit=config"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"helmc failed: {out.stderr.strip()}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+(?:\.\d+)?)", out.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    seconds = float(wall.group(2)) + 60 * float(wall.group(1) or 0)
    return seconds, int(rss.group(1)) * 1024


def time_peer(model):
    code = ("import onnx,sys,time;t=time.perf_counter();"
            "onnx.load(sys.argv[1], load_external_data=False);print(time.perf_counter()-t)")
    out = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helmc", default=str(ROOT / "build" / "bin" / "helmc"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    model = CACHE / "model.onnx"
    if not model.exists():
        print(f"[bench] building {model} (once; needs torch + transformers)", flush=True)
        t = time.perf_counter()
        build_model(model)
        print(f"[bench] built in {time.perf_counter() - t:.0f} s", flush=True)
    weight_bytes = sum(p.stat().st_size for p in CACHE.iterdir() if p.name != "model.onnx")
    proto_bytes = model.stat().st_size
    gb = (weight_bytes + proto_bytes) / 1e9
    helmc_runs = [time_helmc(args.helmc, model) for _ in range(args.runs)]
    peer_runs = [time_peer(model) for _ in range(args.runs)]
    wall = statistics.median(r[0] for r in helmc_runs)
    rss = max(r[1] for r in helmc_runs)
    peer = statistics.median(peer_runs)
    print()
    print(f"model: Qwen3-0.6B-shaped fp16, {gb:.2f} GB ({proto_bytes / 1e6:.1f} MB graph + external data)")
    print(f"{'measure':<44}{'value':>12}{'goal':>12}")
    print(f"{'helmc --emit=config wall time (median)':<44}{wall:>11.2f}s{'':>12}")
    print(f"{'  per GB of model':<44}{wall / gb:>11.2f}s{'<= 5.00s':>12}")
    print(f"{'helmc peak RSS (max)':<44}{rss / 2**20:>10.0f}MB{'<= 300MB':>12}")
    print(f"{'peer: onnx.load(load_external_data=False)':<44}{peer:>11.2f}s{'':>12}")
    print(f"{'ratio helmc / peer':<44}{wall / peer:>12.2f}{'':>12}")


if __name__ == "__main__":
    main()
