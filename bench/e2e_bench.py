#!/usr/bin/env python3
"""End-to-end CPU benchmark: helmc + helm-rt against ONNX Runtime on a Qwen3-0.6B-shaped fp16 model.

The model has the real Qwen3-0.6B configuration (28 layers, hidden 1024, 16/8 heads, head_dim 128,
intermediate 3072, vocab 151936, tied embeddings, rope theta 1e6) with random seeded weights, and is
exported WITH a KV cache exactly the way test/models/generate.py exports its `*-kv-*` models (its
functions are imported: build_hf_model, export_dynamo, save_external, write_config): dynamo, opset 18,
sdpa, inputs input_ids / attention_mask / position_ids / past_key_values.N.key|value, outputs logits /
present.N.key|value, fp16 weights (fp32 RoPE inv_freq), all float initializers in model.onnx.data.
It is built once (torch, a few minutes) and cached in bench/.cache/qwen3-0.6b-kv-fp16/.

Then, holding /tmp/helm-build.lock (fcntl.flock, so that no C++ build shares the cores), it measures
  1. `helmc model.onnx -o model.helmpkg`: wall time and peak RSS (/usr/bin/time -v);
  2. `helm-rt model.helmpkg --prompt-ids <32 ids> -n 32 --temperature 0 --ignore-eos -t T
     --stats-json s.json --emit-ids` for T = 1, 2: load_ms, ttft_ms, prefill_tok_s, decode_tok_s,
     peak_rss_bytes from the stats JSON;
  3. ONNX Runtime (CPU EP, default graph optimizations, intra_op_num_threads = T, inter_op 1) on the
     same model.onnx, in a subprocess (`--ort-worker`): session load, TTFT (prefill of the same 32
     tokens + argmax of the first token), prefill tok/s (32 / prefill run), decode tok/s over the
     following 31 KV-cached steps (present -> past), peak RSS (getrusage ru_maxrss);
and checks that the first 8 greedy ids of helm-rt and ONNX Runtime agree (a warning, not a failure:
fp16 random models can have near ties). Every figure is the median of --runs runs (peak RSS too).

  .venv/bin/python bench/e2e_bench.py [--helmc build/bin/helmc] [--helm-rt build/bin/helm-rt]
                                       [--runs 3] [--quick] [--json out.json]
Needs the corpus tooling once (scripts/install-deps.sh --corpus) for the export.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import pathlib
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache" / "qwen3-0.6b-kv-fp16"
LOCK = "/tmp/helm-build.lock"
N_NEW = 32
N_CHECK = 8  # greedy ids that must agree between helm-rt and ONNX Runtime
THREADS = (1, 2)
SLOW_HELMC_S = 120.0  # a first helmc run longer than this is not repeated
# 32 fixed prompt ids (numpy.random.default_rng(4).integers(0, 151936, 32), written out)
PROMPT = [
    110372, 143284, 133915, 77689, 142886, 148326, 147421, 12281, 68906, 92279, 43017, 57201, 95259,
    121837, 88260, 26517, 102705, 132432, 33373, 82644, 51385, 137078, 9199, 72496, 136372, 65407,
    21186, 119869, 146535, 149528, 141279, 56174,
]
# Qwen3-0.6B (generate.py BASES format)
BASE = dict(arch="qwen3", seed=600, layers=28, hidden=1024, heads=16, kv_heads=8, head_dim=128,
            inter=3072, vocab=151936, theta=1000000.0, eps=1e-6, tie=True)
MAX_POS = 40960  # Qwen3-0.6B's max_position_embeddings (generate.py's corpus uses 256)


def log(msg):
    print(f"[e2e-bench] {msg}", flush=True)


# --------------------------------------------------------------------------------------------------
# Model export (bench/compare_bench.py reuses these, holding /tmp/helm-build.lock around them)
# --------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _bf16_example_inputs(generate, dtype):
    """generate.example_inputs makes fp16 or fp32 past tensors (numpy has no bfloat16); a bf16
    export needs bf16 ones, so its to_torch is wrapped to cast floating tensors for that export."""
    if dtype != "bfloat16":
        yield
        return
    import torch

    orig = generate.to_torch
    generate.to_torch = lambda feeds: tuple(
        t.to(torch.bfloat16) if t.is_floating_point() else t for t in orig(feeds))
    try:
        yield
    finally:
        generate.to_torch = orig


def build_hf(base=None, dtype="float16", max_pos=MAX_POS):
    """The seeded transformers model of test/models/generate.py (build_hf_model) for the base spec,
    in fp16, fp32 or bf16 (bf16: built in fp32 and cast, the fp32 RoPE inv_freq kept as for fp16)."""
    sys.path.insert(0, str(ROOT / "test" / "models"))
    import generate  # noqa: E402  (sets OMP/MKL threads to 1, quiet transformers)
    import torch

    torch.set_num_threads(2)
    generate.MAX_POS = max_pos  # read by generate.hf_config; the dynamo export has no rotary table
    base = base or BASE
    model, cfg = generate.build_hf_model(base, attn="sdpa",
                                         dtype="float32" if dtype == "bfloat16" else dtype)
    if dtype == "bfloat16":
        inv_freq = model.model.rotary_emb.inv_freq.detach().clone()
        model = model.to(torch.bfloat16)
        model.model.rotary_emb.inv_freq = inv_freq
    return model, cfg


def export_onnx(outdir: pathlib.Path, model, cfg, base=None, dtype="float16", name="qwen3-0.6b",
                max_pos=MAX_POS):
    """Exports `model` with a KV cache the way generate.py exports its `*-kv-*` models and writes
    outdir/model.onnx (+ model.onnx.data, config.json): written to a temporary folder, then moved in
    (other files in outdir, such as a package or a GGUF, stay)."""
    sys.path.insert(0, str(ROOT / "test" / "models"))
    import generate  # noqa: E402
    import onnx

    base = base or BASE
    generate.MAX_POS = max_pos
    s = dict(name=outdir.name, base=name, kind="dynamo", opset=18, attn="sdpa", kv=True,
             dtype=dtype, post=None, rope="half", external_data=True, inputs=generate.ALL_INPUTS,
             b=base)
    t0 = time.time()
    with _bf16_example_inputs(generate, dtype):
        proto, _ = generate.export_dynamo(s, model, cfg)
    proto.producer_name = proto.producer_name or "helm-e2e-bench"
    proto.doc_string = (f"HELM benchmark model: {name}-shaped, random weights (seed {base['seed']}), "
                        f"{dtype}, KV cache (bench/e2e_bench.py)")
    log(f"exported ({time.time() - t0:.0f} s)")
    work = outdir.with_name(outdir.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "model.onnx"
    generate.save_external(proto, str(path))
    del proto
    generate.write_config(s, cfg, onnx.load(str(path), load_external_data=False), str(work),
                          {"note": f"not verified against torch ({dtype}, see bench/e2e_bench.py)"},
                          "not run")
    for f in work.iterdir():
        f.chmod(0o644)
    outdir.mkdir(parents=True, exist_ok=True)
    for f in work.iterdir():  # keep other files of outdir (a package, a GGUF)
        os.replace(f, outdir / f.name)
    work.rmdir()


def build_model(outdir: pathlib.Path):
    t0 = time.time()
    model, cfg = build_hf()
    log(f"built the torch model ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, "
        f"{time.time() - t0:.0f} s)")
    export_onnx(outdir, model, cfg)


def model_ready(d: pathlib.Path) -> bool:
    return all((d / n).is_file() for n in ("model.onnx", "model.onnx.data", "config.json"))


# --------------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------------

def run_helmc(helmc, model, package):
    out = subprocess.run(["/usr/bin/time", "-v", helmc, str(model), "-q", "-o", str(package)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"helmc failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", out.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    seconds = float(wall.group(3)) + 60 * float(wall.group(2)) + 3600 * float(wall.group(1) or 0)
    return {"wall_s": seconds, "peak_rss_bytes": int(rss.group(1)) * 1024}


def run_helm_rt(helm_rt, package, threads, workdir, lock, retries=3, prompt=None, n_new=N_NEW):
    prompt = prompt or PROMPT
    stats = os.path.join(workdir, f"helm-rt-{threads}.json")
    cmd = [helm_rt, str(package), "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n_new),
           "--temperature", "0", "--ignore-eos", "-t", str(threads), "--stats-json", stats,
           "--emit-ids"]
    for attempt in range(retries):
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode == 0:
            break
        log(f"helm-rt failed ({out.returncode}): {out.stderr.strip()[-500:]}")
        if attempt + 1 < retries:
            log("retrying in 3 minutes (a change may be in flight; the lock is released meanwhile)")
            fcntl.flock(lock, fcntl.LOCK_UN)
            time.sleep(180)
            fcntl.flock(lock, fcntl.LOCK_EX)
    else:
        sys.exit("helm-rt failed repeatedly")
    with open(stats) as f:
        s = json.load(f)
    ids = [int(x) for x in out.stdout.strip().splitlines()[-1].split(",")]
    return {"load_ms": s["load_ms"], "ttft_ms": s["ttft_ms"], "prefill_tok_s": s["prefill_tok_s"],
            "decode_tok_s": s["decode_tok_s"], "peak_rss_bytes": s["peak_rss_bytes"],
            "package_huge_page_bytes": s.get("package_huge_page_bytes"), "ids": ids}


def run_ort(model, threads, prompt=None, n_new=N_NEW, check=True):
    """ort_worker in a fresh process. check=False returns {"error": ...} instead of exiting."""
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--ort-worker", str(model),
           "--threads", str(threads), "--n-new", str(n_new)]
    if prompt:
        cmd += ["--prompt-ids", ",".join(map(str, prompt))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        if not check:
            return {"error": (out.stderr.strip().splitlines() or ["exit code %d" % out.returncode])[-1]}
        sys.exit(f"ONNX Runtime worker failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def ort_worker(model, threads, prompt=None, n_new=N_NEW):
    """One ONNX Runtime process: load, prefill, n_new - 1 decode steps. Prints one JSON line. Feeding
    the graph (mask, positions, empty past, present -> past) is test/e2e/ort_oracle.py's OrtModel."""
    import numpy as np
    import onnxruntime as ort
    sys.path.insert(0, str(ROOT / "test" / "e2e"))
    import ort_oracle

    t0 = time.perf_counter()
    sess = ort_oracle.OrtModel(model, threads=threads)
    load_ms = (time.perf_counter() - t0) * 1000

    prompt = prompt or PROMPT
    ids, rows = [], []
    t0 = time.perf_counter()
    logits, past = sess.run(prompt)
    t_prefill = time.perf_counter() - t0
    ids.append(int(np.argmax(logits[-1])))
    ttft_ms = (time.perf_counter() - t0) * 1000
    rows.append(logits[-1])
    pos = len(prompt)
    t0 = time.perf_counter()
    for _ in range(n_new - 1):
        logits, past = sess.run([ids[-1]], past, pos)
        pos += 1
        ids.append(int(np.argmax(logits[-1])))
        rows.append(logits[-1])
    t_decode = time.perf_counter() - t0
    # top-1 minus top-2 logit of every step (how close a near tie is)
    gaps = [float(np.diff(np.partition(r, -2)[-2:])[0]) for r in rows]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(json.dumps({"load_ms": load_ms, "ttft_ms": ttft_ms, "prefill_tok_s": len(prompt) / t_prefill,
                      "decode_tok_s": (n_new - 1) / t_decode, "peak_rss_bytes": rss, "ids": ids,
                      "top2_gap": gaps,
                      "onnxruntime": ort.__version__}))


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------

METRICS = ("load_ms", "ttft_ms", "prefill_tok_s", "decode_tok_s", "peak_rss_bytes")


def median_of(runs):
    return {m: statistics.median(r[m] for r in runs) for m in METRICS}


def machine():
    text = _read("/proc/cpuinfo")
    name = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    fam = re.search(r"^cpu family\s*:\s*(\d+)", text, re.M)
    mod = re.search(r"^model\s*:\s*(\d+)", text, re.M)
    mem = re.search(r"MemTotal:\s+(\d+) kB", _read("/proc/meminfo"))
    return {"cpu": name.group(1).strip() if name else "unknown",
            "cpu_family": int(fam.group(1)) if fam else None,
            "cpu_model": int(mod.group(1)) if mod else None, "cores": os.cpu_count(),
            "ram_bytes": int(mem.group(1)) * 1024 if mem else 0,
            "hypervisor": bool(re.search(r"^flags\s*:.*\bhypervisor\b", text, re.M)),
            "kernel": platform.release()}


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def machine_line(m):
    """The `cpu: ...` line of a report, from machine_info()'s dict."""
    return (f"cpu: {m['cpu']} (family {m['cpu_family']}, model {m['cpu_model']}"
            f"{', virtual machine' if m['hypervisor'] else ''}), {m['cores']} cores, "
            f"{m['ram_bytes'] / 2**30:.1f} GiB RAM")


def print_report(res):
    m = res["machine"]
    print()
    print(f"date: {res['date']}")
    print(machine_line(m))
    print(f"model: Qwen3-0.6B-shaped fp16, random weights, KV cache, {res['model_gb']:.2f} GB "
          f"(bench/.cache/{CACHE.name}); prompt {len(PROMPT)} ids, {N_NEW} new tokens, greedy")
    print(f"runs: median of {res['runs']}; onnxruntime {res['onnxruntime_version']}")
    h = res["helmc"]
    print(f"helmc model.onnx -o model.helmpkg: {h['wall_s']:.1f} s, peak RSS "
          f"{h['peak_rss_bytes'] / 2**20:.0f} MiB ({h['runs']} run{'s' if h['runs'] > 1 else ''}"
          f"{', ' + h['note'] if h.get('note') else ''})")
    print()
    hdr = (f"{'system':<14}{'threads':>8}{'load ms':>11}{'TTFT ms':>11}{'prefill tok/s':>15}"
           f"{'decode tok/s':>14}{'peak RSS MiB':>14}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for t in THREADS:
        for system in ("helm-rt", "onnxruntime"):
            rows.append((system, t, res[system][str(t)]["median"]))
    for system, t, r in rows:
        print(f"{system:<14}{t:>8}{r['load_ms']:>11.1f}{r['ttft_ms']:>11.1f}{r['prefill_tok_s']:>15.2f}"
              f"{r['decode_tok_s']:>14.2f}{r['peak_rss_bytes'] / 2**20:>14.0f}")
    print("-" * len(hdr))
    for t in THREADS:
        r = res["ratio_helm_over_ort"][str(t)]
        print(f"{'helm/ORT':<14}{t:>8}{r['load_ms']:>11.2f}{r['ttft_ms']:>11.2f}{r['prefill_tok_s']:>15.2f}"
              f"{r['decode_tok_s']:>14.2f}{r['peak_rss_bytes']:>14.2f}")
    print("(helm/ORT: quotient of the medians; > 1 is worse for load/TTFT/RSS, < 1 is worse for tok/s)")
    print()
    c = res["correctness"]
    if c["match"]:
        print(f"correctness: first {N_CHECK} greedy ids identical (helm-rt and ONNX Runtime): {c['helm'][:N_CHECK]}")
    else:
        print(f"WARNING: first {N_CHECK} greedy ids differ: helm-rt {c['helm'][:N_CHECK]} vs "
              f"ONNX Runtime {c['ort'][:N_CHECK]} (first difference at step {c['first_diff']}; "
              f"fp16 random weights can have near ties)")
    for note in c.get("notes", []):
        print(f"note: {note}")


# --------------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helmc", default=str(ROOT / "build" / "bin" / "helmc"))
    ap.add_argument("--helm-rt", default=str(ROOT / "build" / "bin" / "helm-rt"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 run of everything (to test the script)")
    ap.add_argument("--json", metavar="OUT", help="also write the numbers (every run) to OUT")
    ap.add_argument("--export-only", action="store_true", help="only build the cached model")
    ap.add_argument("--ort-worker", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--prompt-ids", help=argparse.SUPPRESS)
    ap.add_argument("--n-new", type=int, default=N_NEW, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ort_worker:
        prompt = [int(x) for x in args.prompt_ids.split(",")] if args.prompt_ids else None
        ort_worker(args.ort_worker, args.threads, prompt, args.n_new)
        return 0
    runs = 1 if args.quick else max(1, args.runs)
    for tool in (args.helmc, args.helm_rt):
        if not os.access(tool, os.X_OK):
            sys.exit(f"{tool}: not an executable (build first; this script builds nothing)")

    model = CACHE / "model.onnx"
    if not model_ready(CACHE):
        log(f"building {CACHE} (once; torch + transformers, a few minutes)")
        t = time.time()
        build_model(CACHE)
        log(f"model ready in {time.time() - t:.0f} s")
    if args.export_only:
        return 0
    model_bytes = sum(p.stat().st_size for p in CACHE.iterdir() if p.name.startswith("model.onnx"))
    package = CACHE / "model.helmpkg"

    with open(LOCK, "a" if os.access(LOCK, os.W_OK) or not os.path.exists(LOCK) else "r") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {LOCK} (a build is running)")
            fcntl.flock(lock, fcntl.LOCK_EX)
        log(f"holding {LOCK}; measuring")
        res = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
               "machine": machine(), "runs": runs, "model": str(model.relative_to(ROOT)),
               "model_gb": model_bytes / 1e9, "prompt_ids": PROMPT, "n_new": N_NEW}

        # 1. helmc
        hr = []
        note = ""
        for i in range(runs):
            hr.append(run_helmc(args.helmc, model, package))
            log(f"helmc run {i + 1}: {hr[-1]['wall_s']:.1f} s, {hr[-1]['peak_rss_bytes'] / 2**20:.0f} MiB")
            if i == 0 and runs > 1 and hr[0]["wall_s"] > SLOW_HELMC_S:
                note = f"1 run only: it took {hr[0]['wall_s']:.0f} s > {SLOW_HELMC_S:.0f} s"
                break
        res["helmc"] = {"wall_s": statistics.median(r["wall_s"] for r in hr),
                        "peak_rss_bytes": statistics.median(r["peak_rss_bytes"] for r in hr),
                        "runs": len(hr), "note": note, "all": hr,
                        "package_bytes": package.stat().st_size}

        # 2. helm-rt, 3. ONNX Runtime
        with tempfile.TemporaryDirectory(prefix="helm-e2e-bench-") as work:
            for system in ("helm-rt", "onnxruntime"):
                res[system] = {}
                for t in THREADS:
                    rr = []
                    for i in range(runs):
                        r = (run_helm_rt(args.helm_rt, package, t, work, lock) if system == "helm-rt"
                             else run_ort(str(model), t))
                        rr.append(r)
                        log(f"{system} -t {t} run {i + 1}: load {r['load_ms']:.0f} ms, TTFT "
                            f"{r['ttft_ms']:.0f} ms, prefill {r['prefill_tok_s']:.2f} tok/s, decode "
                            f"{r['decode_tok_s']:.2f} tok/s, {r['peak_rss_bytes'] / 2**20:.0f} MiB")
                    res[system][str(t)] = {"median": median_of(rr), "all": rr}
        fcntl.flock(lock, fcntl.LOCK_UN)
    log(f"released {LOCK}")

    res["onnxruntime_version"] = res["onnxruntime"]["1"]["all"][0]["onnxruntime"]
    res["ratio_helm_over_ort"] = {
        str(t): {m: res["helm-rt"][str(t)]["median"][m] / res["onnxruntime"][str(t)]["median"][m]
                 for m in METRICS} for t in THREADS}

    # Correctness: every run's first N_CHECK ids, helm-rt vs ONNX Runtime.
    helm_ids = [r["ids"] for t in THREADS for r in res["helm-rt"][str(t)]["all"]]
    ort_ids = [r["ids"] for t in THREADS for r in res["onnxruntime"][str(t)]["all"]]
    notes = []
    if any(i[:N_CHECK] != helm_ids[0][:N_CHECK] for i in helm_ids):
        notes.append("helm-rt runs disagree among themselves (thread counts / runs)")
    if any(i[:N_CHECK] != ort_ids[0][:N_CHECK] for i in ort_ids):
        notes.append("ONNX Runtime runs disagree among themselves (thread counts / runs)")
    a, b = helm_ids[0], ort_ids[0]
    diff = next((k for k in range(N_CHECK) if a[k] != b[k]), None)
    full = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), None)
    gaps = res["onnxruntime"][str(THREADS[0])]["all"][0]["top2_gap"]
    if diff is None and full is not None:
        notes.append(f"ids identical for {full} of {N_NEW} steps (the check covers the first {N_CHECK}); "
                     f"at step {full} ONNX Runtime's top-2 logit gap is {gaps[full]:.3g} "
                     f"(median gap over the steps {statistics.median(gaps):.3g})")
    elif diff is not None:
        notes.append(f"at step {diff} ONNX Runtime's top-2 logit gap is {gaps[diff]:.3g} "
                     f"(median gap over the steps {statistics.median(gaps):.3g})")
    else:
        notes.append(f"all {N_NEW} greedy ids identical")
    res["correctness"] = {"match": diff is None, "first_diff": diff, "helm": a, "ort": b, "notes": notes}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
            f.write("\n")
        log(f"wrote {args.json}")
    print_report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
