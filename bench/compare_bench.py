#!/usr/bin/env python3
"""helm-rt vs llama.cpp vs ONNX Runtime on the same weights, against the memory-bandwidth roofline.

One run measures, on this machine:

  1. a STREAM-style triad and helm_k_linear GEMV rates for 8-64 MB matrices on 1 and 2 threads
     (`build/bin/helm-gemv-bench --json`), GEMV given as % of the triad of the same thread count;
  2. end to end, batch 1, a fixed prompt of 128 token ids then 128 greedy tokens, on 1 and 2 threads,
     median of --runs rounds, for each model x dtype; the systems take turns within a cell (round 1
     of each system, then round 2 of each, ...), so that a change of the memory's speed in the
     middle of a cell, which this machine's shows every few minutes, falls on every system alike:
       helm-rt      `helm-rt model.helmpkg --prompt-ids <128 ids> -n 128 --temperature 0 --ignore-eos
                    -t T --stats-json s.json --emit-ids`, a fresh process per run; decode tok/s =
                    127 tokens / time of the 127 decode steps, prefill tok/s = 128 / prefill time;
       llama.cpp    `llama-bench -m model.gguf -t T -p 128 -n 0 -r 1 -o json` (prefill) and
                    `llama-bench -m model.gguf -t T -p 0 -n 128 -d 128 -r 1 -o json` (128 decode steps
                    after a 128-token context), one process per round; the median over the rounds;
       ONNX Runtime CPU EP, default graph optimizations, intra_op_num_threads = T, the same model.onnx
                    (bench/e2e_bench.py's ORT worker: a fresh process per run, present -> past).
  3. the roofline of each model: triad GB/s (same thread count) / bytes of weights read per decode
     token (every linear weight of the blocks + the output head, in the model's dtype; norms, the
     embedding gather and the KV cache, ~1% here, are left out), and each system's decode tok/s as a
     % of it.

Models (random seeded weights, test/models/generate.py's build_hf_model, KV-cache ONNX export as in
bench/e2e_bench.py):
  qwen3-0.6b   Qwen3-0.6B's configuration (28 layers, hidden 1024, 16/8 heads, vocab 151936, tied)
  llama-1b     Llama-3.2-1B's configuration (16 layers, hidden 2048, 32/8 heads, head_dim 64,
               intermediate 8192, vocab 128256, tied) without its llama3 RoPE scaling, which helmc
               refuses
dtypes: fp16, fp32, bf16 (bf16: the fp32 model cast to bf16; rows a system cannot run say n/a + why);
        q8_0, q4_0, q4_k_m: the model quantized by each system's own tool (QUANT below:
        helmc --quantize and llama-quantize [--pure] on the fp16 model, ONNX Runtime's
        MatMulNBitsQuantizer on the fp32 one), their roofline from the quantized bytes (the
        package's weights).

The same weights reach llama.cpp this way: the seeded transformers model, in the row's dtype, is
written with save_pretrained together with a tokenizer made from llama.cpp's own vocabulary file of the
matching family (models/ggml-vocab-qwen2.gguf or ggml-vocab-llama-bpe.gguf in the llama.cpp tree, same
vocabulary size; the benchmark never tokenizes text, but the converter and llama-bench need a vocab),
and converted by the llama.cpp tree's convert_hf_to_gguf.py --outtype f16|f32|bf16 (it applies
llama's q/k row permutation; norm weights stay f32 in GGUF). A greedy run of bench/llama_greedy.c
(libllama, the same prompt ids) is compared with helm-rt's ids: the count of identical leading ids is
printed (a warning, not a failure: random fp16 weights have near ties).

Everything is cached in bench/.cache/ (<model>-kv-<dtype>/: model.onnx + .data, model.helmpkg,
model.gguf). The package is rebuilt when helmc is newer than it. Each measurement cell (and every
export, conversion and helmc run) holds /tmp/helm-build.lock so that no build shares the cores.
llama.cpp comes from scripts/install-deps.sh --bench (bench/build-llama-cpp.sh).

  .venv/bin/python bench/compare_bench.py                       # everything (hours on 2 cores)
  .venv/bin/python bench/compare_bench.py --models qwen3-0.6b --dtypes fp16 --runs 5
  .venv/bin/python bench/compare_bench.py --quick               # 1 run, qwen3-0.6b fp16, short GEMV
  ... --systems helm,llama.cpp,ort --threads 1,2 --json out.json --no-gemv
  ... --llama-2mib      llama.cpp also on its GGUF rewritten in 2 MiB pieces (helm-rt's packages are
                        written and mapped so the kernel gives them 2 MiB pages; this measures what
                        the same does for llama.cpp). The notes say how much of each file was on
                        2 MiB pages.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import e2e_bench as e2e  # noqa: E402

CACHE = ROOT / "bench" / ".cache"
LLAMA_DIR = CACHE / "llama.cpp"
LLAMA_TREE = LLAMA_DIR / "src" / "vendor" / "llama.cpp"
LLAMA_BENCH = LLAMA_DIR / "build" / "bin" / "llama-bench"
LLAMA_GREEDY = LLAMA_DIR / "bin" / "llama-greedy"
LOCK = e2e.LOCK

MODELS = {
    "qwen3-0.6b": dict(desc="Qwen3-0.6B-shaped", base=e2e.BASE, max_pos=e2e.MAX_POS, vocab_file="qwen2"),
    "llama-1b": dict(desc="Llama-3.2-1B-shaped (no RoPE scaling)", max_pos=131072, vocab_file="llama-bpe",
                     base=dict(arch="llama", seed=1000, layers=16, hidden=2048, heads=32, kv_heads=8,
                               head_dim=64, inter=8192, vocab=128256, theta=500000.0, eps=1e-5,
                               tie=True)),
}
DTYPES = {"fp16": ("float16", "f16", 2), "fp32": ("float32", "f32", 4), "bf16": ("bfloat16", "bf16", 2)}
# Quantized rows, all from the fp16 model: helmc --quantize=<name> on its ONNX; llama-quantize on its
# f16 GGUF (type, and --pure for the single-format rows: every tensor, the tied table included, in
# that format, as helmc does; Q4_K_M keeps llama.cpp's own mix, which helmc's q4_k_m follows); ONNX
# Runtime's MatMulNBitsQuantizer on the fp32 model's ONNX (bits, block, symmetric: 4-bit with zero
# points stands in for q4_k_m, which ONNX has no form of; fp32 because ORT's MatMulNBits with f16
# activations take a slow path).
QUANT = {"q8_0": dict(llama_type="Q8_0", pure=True, ort=(8, 32, True)),
         "q4_0": dict(llama_type="Q4_0", pure=True, ort=(4, 32, True)),
         "q4_k_m": dict(llama_type="Q4_K_M", pure=False, ort=(4, 32, False))}
ALL_DTYPES = list(DTYPES) + list(QUANT)
LLAMA_QUANTIZE = LLAMA_DIR / "build" / "bin" / "llama-quantize"
SYSTEMS = ("helm", "llama.cpp", "ort")
SYSTEM_NAMES = {"helm": "helm-rt", "llama.cpp": "llama.cpp", "ort": "ONNX Runtime"}


def log(msg):
    print(f"[compare-bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------------
# The build lock
# --------------------------------------------------------------------------------------------------

class Lock:
    """/tmp/helm-build.lock (fcntl.flock), held around every heavy step; `held()` nests."""

    def __init__(self, path=LOCK):
        self.f = open(path, "a")
        self.depth = 0

    @contextlib.contextmanager
    def held(self, what):
        if self.depth == 0:
            try:
                fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log(f"waiting for {LOCK} ({what})")
                fcntl.flock(self.f, fcntl.LOCK_EX)
        self.depth += 1
        try:
            yield self.f
        finally:
            self.depth -= 1
            if self.depth == 0:
                fcntl.flock(self.f, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------------
# Models: ONNX (e2e_bench's export), helm package, GGUF
# --------------------------------------------------------------------------------------------------

def model_dir(model, dtype):
    return CACHE / f"{model}-kv-{dtype}"


def weight_bytes_per_token(base, elem):
    """Bytes of weights one decode token reads: every block's linear weights plus the output head."""
    h, hd, inter = base["hidden"], base["head_dim"], base["inter"]
    q, kv = base["heads"] * hd, base["kv_heads"] * hd
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * inter
    return (base["layers"] * per_layer + base["vocab"] * h) * elem


def prompt_ids(vocab, n):
    """n fixed prompt ids (a seeded generator; the same for every system)."""
    import numpy as np

    return [int(x) for x in np.random.default_rng(4).integers(0, vocab, n)]


def tokenizer_dir(vocab_file, vocab_size):
    """An HF tokenizer (tokenizer.json + config) made once from the llama.cpp tree's
    models/ggml-vocab-<vocab_file>.gguf: convert_hf_to_gguf.py needs one to write the GGUF vocab, and
    it recognises these (its pre-tokenizer hash check). Added tokens past vocab_size are dropped
    (transformers' GGUF reader appends an <|endoftext|> to the llama-bpe vocabulary)."""
    out = CACHE / "tokenizers" / vocab_file
    if (out / "tokenizer.json").is_file():
        return out
    from transformers import AutoTokenizer

    log(f"making a tokenizer from ggml-vocab-{vocab_file}.gguf (once, ~1 min)")
    tok = AutoTokenizer.from_pretrained(str(LLAMA_TREE / "models"), gguf_file=f"ggml-vocab-{vocab_file}.gguf")
    work = out.with_name(out.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    tok.save_pretrained(str(work))
    tj = json.loads((work / "tokenizer.json").read_text())
    tj["added_tokens"] = [a for a in tj.get("added_tokens", []) if a["id"] < vocab_size]
    vocab = tj.get("model", {}).get("vocab")
    if isinstance(vocab, dict):
        tj["model"]["vocab"] = {k: v for k, v in vocab.items() if v < vocab_size}
    (work / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
    cfg_path = work / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    if isinstance(cfg.get("added_tokens_decoder"), dict):
        cfg["added_tokens_decoder"] = {k: v for k, v in cfg["added_tokens_decoder"].items()
                                       if int(k) < vocab_size}
    for key in ("pad_token", "unk_token"):
        if cfg.get(key) and cfg[key] not in {a["content"] for a in tj["added_tokens"]} \
                and not (isinstance(vocab, dict) and cfg[key] in tj["model"]["vocab"]):
            cfg[key] = None
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False))
    check = AutoTokenizer.from_pretrained(str(work))
    if max(check.get_vocab().values()) >= vocab_size:
        sys.exit(f"tokenizer from ggml-vocab-{vocab_file}.gguf has ids >= {vocab_size}")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(work, out)
    return out


def prepare_worker(model, dtype, want_onnx, want_gguf):
    """In a subprocess (torch memory is returned when it exits): build the seeded model once, then
    write whatever is missing: the GGUF (save_pretrained + convert_hf_to_gguf.py) and/or the ONNX."""
    spec = MODELS[model]
    torch_dtype, outtype, _ = DTYPES[dtype]
    d = model_dir(model, dtype)
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    net, cfg = e2e.build_hf(spec["base"], torch_dtype, spec["max_pos"])
    log(f"{model} {dtype}: built the torch model ({sum(p.numel() for p in net.parameters()) / 1e6:.0f}M "
        f"parameters, {time.time() - t0:.0f} s)")
    if want_gguf:
        tok = tokenizer_dir(spec["vocab_file"], spec["base"]["vocab"])
        hf = d / "hf.tmp"
        shutil.rmtree(hf, ignore_errors=True)
        net.save_pretrained(str(hf))
        for f in tok.iterdir():
            shutil.copy(f, hf / f.name)
        out = d / "model.gguf"
        tmp = d / "model.gguf.tmp"
        cmd = [sys.executable, str(LLAMA_TREE / "convert_hf_to_gguf.py"), str(hf), "--outtype", outtype,
               "--outfile", str(tmp), "--model-name", f"helm-bench-{model}-{dtype}"]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        shutil.rmtree(hf, ignore_errors=True)
        if r.returncode != 0:
            sys.exit(f"convert_hf_to_gguf.py failed: {r.stderr.strip()[-3000:]}")
        os.replace(tmp, out)
        log(f"{model} {dtype}: wrote {out.relative_to(ROOT)} ({out.stat().st_size / 1e9:.2f} GB, "
            f"{time.time() - t0:.0f} s)")
    if want_onnx:
        e2e.export_onnx(d, net, cfg, spec["base"], torch_dtype, model, spec["max_pos"])
        log(f"{model} {dtype}: wrote {(d / 'model.onnx').relative_to(ROOT)}")


def package_ok(helm_rt, pkg):
    return subprocess.run([helm_rt, str(pkg), "--info"], capture_output=True).returncode == 0


def package_weight_bytes(helm_rt, pkg):
    """The bytes of weights in a package (`helm-rt --info`: "weights: N tensors, B bytes, ...")."""
    r = subprocess.run([helm_rt, str(pkg), "--info"], capture_output=True, text=True)
    m = re.search(r"^weights:\s+\d+ tensors, (\d+) bytes", r.stdout, re.M)
    return int(m.group(1)) if m else None


def ensure_package(what, onnx_path, pkg, extra, helmc, helm_rt, lock, rebuild):
    """`pkg` compiled from `onnx_path` (helmc --target=host plus `extra`) unless it is there and newer
    than helmc and helm-rt --info reads it; returns (the package path or "n/a (helmc: why)", helmc's
    wall time or None)."""
    stale = pkg.is_file() and (pkg.stat().st_mtime < pathlib.Path(helmc).stat().st_mtime
                               or not package_ok(helm_rt, pkg))
    if not rebuild and pkg.is_file() and not stale:
        return pkg, None
    log(f"{what}: helmc {onnx_path.name} {' '.join(extra + ['--target=host'])} -o {pkg.name}"
        f"{' (helmc is newer than the package, or helm-rt --info refuses it)' if stale else ''}")
    with lock.held(f"{what} helmc"):
        t0 = time.time()
        # helmc writes the package only on success (temporary file + rename)
        r = subprocess.run([helmc, str(onnx_path), *extra, "--target=host", "--emit=package", "-q", "-o", str(pkg)],
                           capture_output=True, text=True)
        secs = time.time() - t0
    if r.returncode != 0:
        na = "n/a (helmc: " + (r.stderr.strip().splitlines() or ["?"])[-1][:160] + ")"
        log(f"{what}: {na}")
        return na, None
    log(f"{what}: package {pkg.stat().st_size / 1e9:.2f} GB in {secs:.0f} s")
    return pkg, {"wall_s": secs}


def ensure_quantized(model, quant, systems, helmc, helm_rt, lock, rebuild):
    """The quantized row's artifacts, made from the fp16 model's (ensure_model(..., "fp16")):
    model-<quant>.helmpkg (helmc --quantize), model-<quant>.gguf (llama-quantize) and
    model-<quant>.onnx (MatMulNBitsQuantizer)."""
    spec = QUANT[quant]
    base = ensure_model(model, "fp16", [s for s in systems if s != "helm"] + (["onnx"] if "helm" in systems else []),
                        helmc, helm_rt, lock, rebuild)
    d = model_dir(model, "fp16")
    res = {"onnx": None, "gguf": None, "package": None, "helmc": None, "weight_bytes": None}
    if "helm" in systems:
        pkg = d / f"model-{quant}.helmpkg"
        res["package"], res["helmc"] = ensure_package(f"{model} {quant}", d / "model.onnx", pkg, [f"--quantize={quant}"],
                                                      helmc, helm_rt, lock, rebuild)
        if not isinstance(res["package"], str):
            res["weight_bytes"] = package_weight_bytes(helm_rt, pkg)
    if "llama.cpp" in systems and base["gguf"]:
        gguf = d / f"model-{quant}.gguf"
        if not gguf.is_file():
            tmp = d / f"model-{quant}.gguf.tmp"
            cmd = [str(LLAMA_QUANTIZE)] + (["--pure"] if spec["pure"] else []) + [
                str(base["gguf"]), str(tmp), spec["llama_type"]]
            log(f"{model} {quant}: " + " ".join(os.path.basename(c) for c in cmd))
            with lock.held(f"{model} {quant} llama-quantize"):
                r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"llama-quantize failed: {r.stderr.strip()[-2000:]}")
            os.replace(tmp, gguf)
        res["gguf"] = gguf
    if "ort" in systems:
        # From the fp32 model: ONNX Runtime's MatMulNBits with f16 activations take a slow path
        # (0.6-0.8 tok/s decode on this model), which would measure that path, not its int4 kernels.
        base32 = ensure_model(model, "fp32", ["onnx"], helmc, helm_rt, lock, rebuild)
        d32 = model_dir(model, "fp32")
        onnx_q = d32 / f"model-{quant}.onnx"
        if base32["onnx"] and not onnx_q.is_file():
            log(f"{model} {quant}: ONNX Runtime MatMulNBitsQuantizer {spec['ort']} on the fp32 model.onnx")
            with lock.held(f"{model} {quant} MatMulNBits"):
                r = subprocess.run([sys.executable, __file__, "--ort-quantize-worker", str(d32 / "model.onnx"),
                                    str(onnx_q), ",".join(map(str, spec["ort"]))])
            if r.returncode != 0:
                sys.exit(f"{model} {quant}: the MatMulNBits quantization failed")
        res["onnx"] = onnx_q if onnx_q.is_file() else None
    return res


def ort_quantize_worker(src, out, settings):
    """In a subprocess: src (ONNX) with every MatMul weight as com.microsoft::MatMulNBits."""
    import logging

    import onnx
    from onnxruntime.quantization import matmul_nbits_quantizer as mnb
    from onnxruntime.quantization import quant_utils

    bits, block, symmetric = settings.split(",")
    logging.disable(logging.INFO)
    config = mnb.DefaultWeightOnlyQuantConfig(block_size=int(block), is_symmetric=symmetric == "True",
                                              bits=int(bits), quant_format=quant_utils.QuantFormat.QOperator,
                                              op_types_to_quantize=("MatMul",), quant_axes=(("MatMul", 0),))
    quantizer = mnb.MatMulNBitsQuantizer(onnx.load(src), algo_config=config)
    quantizer.process()
    tmp = out + ".tmp"
    onnx.save(quantizer.model.model, tmp, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(out) + ".data")
    os.replace(tmp, out)


def ensure_model(model, dtype, systems, helmc, helm_rt, lock, rebuild):
    """Creates what the selected systems need; returns {onnx, package, gguf, helmc_s} (paths or None).
    A system "onnx" asks for the ONNX export alone (the quantized rows' source)."""
    if dtype in QUANT:
        return ensure_quantized(model, dtype, systems, helmc, helm_rt, lock, rebuild)
    d = model_dir(model, dtype)
    onnx_path, pkg, gguf = d / "model.onnx", d / "model.helmpkg", d / "model.gguf"
    need_onnx = ("helm" in systems or "ort" in systems or "onnx" in systems) and not e2e.model_ready(d)
    need_gguf = "llama.cpp" in systems and not gguf.is_file()
    if need_onnx or need_gguf:
        what = " and ".join(x for x, w in (("the ONNX export", need_onnx), ("the GGUF", need_gguf)) if w)
        log(f"{model} {dtype}: building {what} (torch; minutes)")
        with lock.held(f"{model} {dtype} export"):
            r = subprocess.run([sys.executable, __file__, "--prepare-worker", model, dtype,
                                "--want", ",".join(x for x, w in (("onnx", need_onnx), ("gguf", need_gguf)) if w)])
        if r.returncode != 0:
            sys.exit(f"{model} {dtype}: preparing the model failed")
    res = {"onnx": onnx_path if onnx_path.is_file() else None, "gguf": gguf if gguf.is_file() else None,
           "package": None, "helmc": None}
    if "helm" in systems:
        res["package"], res["helmc"] = ensure_package(f"{model} {dtype}", onnx_path, pkg, [], helmc, helm_rt, lock,
                                                      rebuild)
    return res


# --------------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------------

def gemv_bench(binary, threads, quick, lock):
    cmd = [binary, "--threads", ",".join(map(str, threads)), "--json"]
    if quick:
        cmd += ["--sizes", "8,64", "--min-time", "0.3"]
    log("GEMV + triad: " + " ".join(os.path.relpath(c, ROOT) if c == binary else c for c in cmd))
    with lock.held("helm-gemv-bench"):
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"helm-gemv-bench failed: {r.stderr.strip()[-1000:]}")
    return json.loads(r.stdout)


def median_or_none(xs):
    return statistics.median(xs) if xs else None


def measure_helm(helm_rt, pkg, t, runs, prompt, n_new, lock, workdir):
    rr = []
    for i in range(runs):
        r = e2e.run_helm_rt(helm_rt, pkg, t, workdir, lock.f, prompt=prompt, n_new=n_new)
        rr.append(r)
        log(f"  helm-rt -t {t} run {i + 1}/{runs}: prefill {r['prefill_tok_s']:.2f} tok/s, decode "
            f"{r['decode_tok_s']:.2f} tok/s, load {r['load_ms']:.0f} ms")
    return {"decode": median_or_none([r["decode_tok_s"] for r in rr]),
            "prefill": median_or_none([r["prefill_tok_s"] for r in rr]), "ids": rr[0]["ids"], "all": rr}


def measure_ort(onnx_path, t, runs, prompt, n_new):
    rr = []
    for i in range(runs):
        r = e2e.run_ort(str(onnx_path), t, prompt=prompt, n_new=n_new, check=False)
        if "error" in r:
            # "...NOT_IMPLEMENTED : Could not find an implementation for Mul(14) node with name ..."
            err = re.sub(r"^.*?\[ONNXRuntimeError\] : \d+ : ", "", r["error"])
            err = re.sub(r" node with name.*$", "", err)
            return {"na": f"n/a (ONNX Runtime: {err[:120]})", "error": r["error"]}
        rr.append(r)
        log(f"  onnxruntime -t {t} run {i + 1}/{runs}: prefill {r['prefill_tok_s']:.2f} tok/s, decode "
            f"{r['decode_tok_s']:.2f} tok/s, load {r['load_ms']:.0f} ms")
    return {"decode": median_or_none([r["decode_tok_s"] for r in rr]),
            "prefill": median_or_none([r["prefill_tok_s"] for r in rr]), "ids": rr[0]["ids"],
            "top2_gap": rr[0]["top2_gap"], "all": rr, "version": rr[0]["onnxruntime"]}


def llama_bench(gguf, t, runs, p, n, depth):
    cmd = [str(LLAMA_BENCH), "-m", str(gguf), "-t", str(t), "-p", str(p), "-n", str(n), "-r", str(runs),
           "-o", "json"]
    if depth:
        cmd += ["-d", str(depth)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, "llama-bench: " + (r.stderr.strip().splitlines() or ["?"])[-1][:160]
    tests = json.loads(r.stdout)
    return tests[0], None


def measure_llama(gguf, t, runs, prompt_len, n_new):
    pre, err = llama_bench(gguf, t, runs, prompt_len, 0, 0)
    if err:
        return {"na": f"n/a ({err})"}
    log(f"  llama-bench -t {t} -p {prompt_len}: samples {', '.join(f'{x:.2f}' for x in pre['samples_ts'])} tok/s")
    dec, err = llama_bench(gguf, t, runs, 0, n_new, prompt_len)
    if err:
        return {"na": f"n/a ({err})"}
    log(f"  llama-bench -t {t} -n {n_new} -d {prompt_len}: samples "
        f"{', '.join(f'{x:.2f}' for x in dec['samples_ts'])} tok/s")
    return {"decode": statistics.median(dec["samples_ts"]), "prefill": statistics.median(pre["samples_ts"]),
            "bench": {"prefill": pre, "decode": dec}}


def merge_rounds(system, rounds):
    """One system's result over the rounds of a cell: each round is measure_*(runs=1)'s result. The
    first round that failed (n/a) stands for the whole cell."""
    for r in rounds:
        if "na" in r:
            return r
    merged = dict(rounds[0])
    merged["decode"] = statistics.median([r["decode"] for r in rounds])
    merged["prefill"] = statistics.median([r["prefill"] for r in rounds])
    merged["rounds"] = {"decode": [r["decode"] for r in rounds], "prefill": [r["prefill"] for r in rounds]}
    if system in ("helm", "ort"):
        merged["all"] = [x for r in rounds for x in r["all"]]
    return merged


def copy_in_2mib_pieces(src, dst):
    """dst = src written by one write() per 2 MiB-aligned 2 MiB piece: Linux's page cache then holds
    the copy in 2 MiB folios, which any mapping of it on a 2 MiB boundary gets as 2 MiB pages
    (docs/package-format.md, "Mapping"); llama.cpp's own files are written in smaller pieces."""
    piece = 2 << 20
    tmp = pathlib.Path(str(dst) + ".tmp")
    with open(src, "rb", buffering=0) as fin:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while True:
                b = fin.read(piece)
                if not b:
                    break
                view = memoryview(b)
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    os.replace(tmp, dst)


def huge_folio_bytes(path):
    """Bytes of `path` this process gets on 2 MiB pages when it maps and reads the file (without
    asking for them: what a reader that does not madvise sees, as llama.cpp maps its GGUF)."""
    import mmap
    real = os.path.realpath(path)
    with open(real, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        try:
            for at in range(0, len(mm), 4096):
                mm[at]
            total, inside = 0, False
            with open("/proc/self/smaps") as sm:
                for line in sm:
                    head = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
                    if head:
                        inside = head.group(1).strip() == real
                    elif inside and line.startswith("FilePmdMapped:"):
                        total += int(line.split()[1]) * 1024
            return total
        finally:
            mm.close()


def llama_greedy(gguf, prompt, n_new, t):
    r = subprocess.run([str(LLAMA_GREEDY), str(gguf), ",".join(map(str, prompt)), str(n_new), str(t)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-300:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def leading_agreement(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------

def fmt(v, spec=".2f"):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return format(v, spec)


def cell(res, system, key):
    r = res.get(system)
    if r is None:
        return None
    if "na" in r:
        na = re.sub(r"onnxruntime\.capi\.\S+: \[ONNXRuntimeError\] : \d+ : ", "", r["na"])
        return re.sub(r" node with na.*$", ")", na)
    return r.get(key)


def ratio(a, b, spec=".2f"):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return format(a / b, spec)
    return "-"


def pct(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return f"{100 * a / b:.0f}%"
    return "-"


def report(res):
    m = res["machine"]
    print()
    print(f"date: {res['date']}")
    print(f"{e2e.machine_line(m)}; kernel {m['kernel']}")
    v = res["versions"]
    print(f"versions: helm {v.get('helm')}, llama.cpp {v.get('llama.cpp')} (llama-cpp-python "
          f"{v.get('llama-cpp-python')} sdist), onnxruntime {v.get('onnxruntime') or '? (no run succeeded)'}")
    print(f"workload: batch 1, prompt {res['prompt_len']} ids, {res['n_new']} greedy tokens, "
          f"median of {res['runs']} runs")
    g = res.get("gemv")
    if g:
        print()
        print(f"STREAM-style triad (24 B/element) and helm_k_linear GEMV, M = 1, K = 2048, isa {g['isa']}:")
        for t in g["threads"]:
            tr = g["triad"][str(t)]
            print(f"  {t} thread{'s' if t > 1 else ''}: triad {tr['triad_gbs']:.1f} GB/s, read-only stream "
                  f"{tr['read_gbs']:.1f} GB/s")
        sizes = sorted({r["mb"] for r in g["rows"]})
        print()
        print("| weights | layout | threads | " + " | ".join(f"{s} MB GB/s (% triad)" for s in sizes) + " |")
        print("|---|---|---:|" + "---:|" * len(sizes))
        keys = []
        for r in g["rows"]:
            k = (r["weights"], r["layout"], r["threads"])
            if k not in keys:
                keys.append(k)
        for k in keys:
            vals = []
            for s in sizes:
                r = next((r for r in g["rows"] if (r["weights"], r["layout"], r["threads"]) == k
                          and r["mb"] == s), None)
                vals.append(f"{r['dram_gbs']:.1f} ({r['pct_triad']:.0f}%)" if r else "-")
            print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(vals) + " |")
    rows = res["rows"]
    if not rows:
        return
    print()
    print(f"Decode tok/s ({res['n_new']} tokens after the {res['prompt_len']}-token prompt); roofline = "
          "triad GB/s / weight bytes per token:")
    print()
    # llama.cpp on its GGUF copied in 2 MiB pieces (--llama-2mib): two more columns where measured
    has2m = any("on_2mib" in (r.get("llama.cpp") or {}) for r in rows)

    def on2m(r, key):
        return (r.get("llama.cpp") or {}).get("on_2mib", {}).get(key)

    extra_head = " llama.cpp, 2 MiB pages | helm/that |" if has2m else ""
    print("| model | dtype | threads | GB/token | triad GB/s | roofline tok/s | helm-rt | llama.cpp "
          "| ONNX Runtime | helm/llama.cpp | helm/ORT | helm % roof | llama.cpp % roof | ORT % roof |" + extra_head)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if has2m else ""))
    for r in rows:
        h, l, o = (cell(r, s, "decode") for s in SYSTEMS)
        roof = r.get("roofline_tok_s")
        triad = roof * r["gb_per_token"] if roof else None
        extra = f" {fmt(on2m(r, 'decode'))} | {ratio(h, on2m(r, 'decode'))} |" if has2m else ""
        print(f"| {r['model']} | {r['dtype']} | {r['threads']} | {r['gb_per_token']:.2f} | {fmt(triad, '.1f')} "
              f"| {fmt(roof, '.1f')} "
              f"| {fmt(h)} | {fmt(l)} | {fmt(o)} | {ratio(h, l)} | {ratio(h, o)} | {pct(h, roof)} "
              f"| {pct(l, roof)} | {pct(o, roof)} |" + extra)
    print()
    print(f"Prefill tok/s ({res['prompt_len']}-token prompt, batch 1):")
    print()
    print("| model | dtype | threads | helm-rt | llama.cpp | ONNX Runtime | helm/llama.cpp | helm/ORT |" + extra_head)
    print("|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if has2m else ""))
    for r in rows:
        h, l, o = (cell(r, s, "prefill") for s in SYSTEMS)
        extra = f" {fmt(on2m(r, 'prefill'))} | {ratio(h, on2m(r, 'prefill'))} |" if has2m else ""
        print(f"| {r['model']} | {r['dtype']} | {r['threads']} | {fmt(h)} | {fmt(l)} | {fmt(o)} "
              f"| {ratio(h, l)} | {ratio(h, o)} |" + extra)
    print()
    print("(tok/s: median of the runs; helm/x: quotient of the medians, > 1 means helm-rt is faster; "
          "% roof: decode tok/s / roofline tok/s, both at that thread count; the triad counts 24 B per "
          "element as STREAM does, so a system reading near the read-only stream rate can exceed 100%; "
          "'-': not measured)")
    for note in res["notes"]:
        print(f"note: {note}")


# --------------------------------------------------------------------------------------------------

def helm_version():
    r = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def llama_version():
    r = subprocess.run(["git", "-C", str(LLAMA_TREE), "log", "-1", "--format=%h"], capture_output=True,
                       text=True)
    return r.stdout.strip() or "?"


def parse_list(s, allowed, what):
    items = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        sys.exit(f"--{what}: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(allowed)}")
    return items


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    ap.add_argument("--dtypes", default="fp16,fp32,bf16",
                    help="comma-separated: fp16, fp32, bf16, q8_0, q4_0, q4_k_m (the quantized rows are made "
                         "from the fp16 model)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--systems", default="helm,llama.cpp,ort", help="comma-separated: helm, llama.cpp, ort")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--n-new", type=int, default=128)
    ap.add_argument("--quick", action="store_true",
                    help="1 run, qwen3-0.6b fp16 unless --models/--dtypes say otherwise, short GEMV")
    ap.add_argument("--no-gemv", action="store_true", help="skip the triad/GEMV part (and the roofline)")
    ap.add_argument("--rebuild-packages", action="store_true", help="run helmc even if the package is fresh")
    ap.add_argument("--llama-2mib", action="store_true",
                    help="also run llama.cpp on a copy of its GGUF written in 2 MiB pieces (cached in 2 MiB "
                         "folios, so mapped with 2 MiB pages as helm-rt's packages are): how much of the "
                         "difference is the page size")
    ap.add_argument("--prepare-only", action="store_true",
                    help="make the models, packages and GGUF files the run needs, then stop (no measurement)")
    ap.add_argument("--helmc", default=str(ROOT / "build" / "bin" / "helmc"))
    ap.add_argument("--helm-rt", default=str(ROOT / "build" / "bin" / "helm-rt"))
    ap.add_argument("--gemv-bench", default=str(ROOT / "build" / "bin" / "helm-gemv-bench"))
    ap.add_argument("--json", metavar="OUT", help="also write every number (all runs) to OUT")
    ap.add_argument("--report", nargs="+", metavar="JSON",
                    help="only print the tables of earlier --json files (rows and notes merged, the "
                         "first file's GEMV part and header)")
    ap.add_argument("--prepare-worker", nargs=2, metavar=("MODEL", "DTYPE"), help=argparse.SUPPRESS)
    ap.add_argument("--want", default="", help=argparse.SUPPRESS)
    ap.add_argument("--ort-quantize-worker", nargs=3, metavar=("SRC", "OUT", "SETTINGS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ort_quantize_worker:
        ort_quantize_worker(*args.ort_quantize_worker)
        return 0
    if args.prepare_worker:
        want = args.want.split(",")
        prepare_worker(*args.prepare_worker, "onnx" in want, "gguf" in want)
        return 0

    if args.report:
        merged = None
        for path in args.report:
            with open(path) as f:
                r = json.load(f)
            if merged is None:
                merged = r
                continue
            # a later file's row for the same model/dtype/threads replaces the systems it measured
            # (e.g. a --systems helm rerun); other rows are appended
            for row in r["rows"]:
                key = (row["model"], row["dtype"], row["threads"])
                old = next((o for o in merged["rows"] if (o["model"], o["dtype"], o["threads"]) == key), None)
                if old is None:
                    merged["rows"].append(row)
                else:
                    old.update({k: v for k, v in row.items() if k in SYSTEMS or k not in old})
                    for k in ("helm_commit", "helm_rt_mtime"):
                        if k in row and "helm" in row:
                            old[k] = row[k]
            merged["notes"] += [n for n in r["notes"] if n not in merged["notes"]]
            merged["versions"].update({k: v for k, v in r["versions"].items() if v})
        report(merged)
        return 0

    given = set(a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]))
    if args.quick:
        args.runs = 1
        if "--models" not in given:
            args.models = "qwen3-0.6b"
        if "--dtypes" not in given:
            args.dtypes = "fp16"
    models = parse_list(args.models, MODELS, "models")
    dtypes = parse_list(args.dtypes, ALL_DTYPES, "dtypes")
    systems = parse_list(args.systems, SYSTEMS, "systems")
    threads = [int(x) for x in parse_list(args.threads, [str(i) for i in range(1, 1025)], "threads")]
    runs = max(1, args.runs)
    tools = []
    if "helm" in systems:
        tools += [args.helmc, args.helm_rt]
    if not args.no_gemv:
        tools.append(args.gemv_bench)
    if "llama.cpp" in systems:
        tools += [str(LLAMA_BENCH), str(LLAMA_GREEDY)]
        if any(d in QUANT for d in dtypes):
            tools.append(str(LLAMA_QUANTIZE))
    for tool in tools:
        if not os.access(tool, os.X_OK):
            hint = ("scripts/install-deps.sh --bench" if "llama.cpp" in tool
                    else "build HELM first (ninja -C build)")
            sys.exit(f"{tool}: not an executable ({hint})")

    lock = Lock()
    res = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "machine": e2e.machine(), "runs": runs, "prompt_len": args.prompt_len, "n_new": args.n_new,
           "threads": threads, "versions": {"helm": helm_version()}, "rows": [], "notes": []}
    if "llama.cpp" in systems:
        res["versions"]["llama.cpp"] = llama_version()
        sd = sorted(LLAMA_DIR.glob("llama_cpp_python-*.tar.gz"))
        res["versions"]["llama-cpp-python"] = sd[-1].name[len("llama_cpp_python-"):-len(".tar.gz")] if sd else "?"

    if not args.no_gemv and not args.prepare_only:
        res["gemv"] = gemv_bench(args.gemv_bench, threads, args.quick, lock)
        for t in threads:
            log(f"triad {t} thread(s): {res['gemv']['triad'][str(t)]['triad_gbs']:.1f} GB/s")

    if args.prepare_only:
        for model in models:
            for dtype in dtypes:
                art = ensure_model(model, dtype, systems, args.helmc, args.helm_rt, lock, args.rebuild_packages)
                log(f"{model} {dtype}: ready: " + ", ".join(f"{k} {v}" for k, v in art.items() if v))
        return 0

    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="helm-compare-bench-") as work:
        for model in models:
            spec = MODELS[model]
            prompt = prompt_ids(spec["base"]["vocab"], args.prompt_len)
            for dtype in dtypes:
                art = ensure_model(model, dtype, systems, args.helmc, args.helm_rt, lock, args.rebuild_packages)
                if dtype in QUANT:
                    # The quantized bytes one token reads: the package's weights (every linear and
                    # the tied table, which is the head), or the GGUF's size without the package.
                    wb = art.get("weight_bytes") or (art["gguf"].stat().st_size if art["gguf"] else None)
                    gbt = wb / 1e9 if wb else weight_bytes_per_token(spec["base"], 0.5) / 1e9
                else:
                    gbt = weight_bytes_per_token(spec["base"], DTYPES[dtype][2]) / 1e9
                ids = {}
                gguf_2mib = None
                if args.llama_2mib and "llama.cpp" in systems and art["gguf"]:
                    gguf_2mib = pathlib.Path(work) / (art["gguf"].stem + ".2mib.gguf")
                    with lock.held("copy the GGUF in 2 MiB pieces"):
                        copy_in_2mib_pieces(art["gguf"], gguf_2mib)
                for t in threads:
                    # helm-rt may be rebuilt between cells on a shared machine: record which one ran
                    row = {"model": model, "dtype": dtype, "threads": t, "gb_per_token": gbt,
                           "helm_commit": helm_version(),
                           "helm_rt_mtime": time.ctime(os.path.getmtime(args.helm_rt))}
                    if "gemv" in res:
                        row["roofline_tok_s"] = res["gemv"]["triad"][str(t)]["triad_gbs"] / gbt
                        row["read_roofline_tok_s"] = res["gemv"]["triad"][str(t)]["read_gbs"] / gbt
                    log(f"{model} {dtype} -t {t}" + (f" (roofline {row['roofline_tok_s']:.1f} tok/s)"
                                                    if "roofline_tok_s" in row else ""))
                    # The systems take turns: round k of every system before round k + 1 of any.
                    rounds = {system: [] for system in systems}
                    rounds_2mib = []
                    for k in range(runs):
                        if runs > 1:
                            log(f"  round {k + 1}/{runs}")
                        for system in systems:
                            done = rounds[system]
                            if done and "na" in done[-1]:
                                continue  # it cannot run this cell
                            with lock.held(f"{system} {model} {dtype} -t {t}"):
                                if system == "helm":
                                    p = art["package"]
                                    done.append({"na": p} if isinstance(p, str) else
                                                measure_helm(args.helm_rt, p, t, 1, prompt, args.n_new,
                                                             lock, work))
                                elif system == "ort":
                                    done.append(measure_ort(art["onnx"], t, 1, prompt, args.n_new))
                                    if "version" in done[-1]:
                                        res["versions"]["onnxruntime"] = done[-1]["version"]
                                else:
                                    done.append(measure_llama(art["gguf"], t, 1, args.prompt_len, args.n_new))
                                    if gguf_2mib and "na" not in done[-1]:
                                        log("  the same on the GGUF written in 2 MiB pieces:")
                                        rounds_2mib.append(measure_llama(gguf_2mib, t, 1, args.prompt_len,
                                                                         args.n_new))
                    for system in systems:
                        row[system] = merge_rounds(system, rounds[system])
                        if system == "llama.cpp" and rounds_2mib and "na" not in row[system]:
                            row[system]["on_2mib"] = merge_rounds(system, rounds_2mib)
                        if "ids" in row[system]:
                            ids.setdefault(system, row[system]["ids"])
                    res["rows"].append(row)
                    if args.json:
                        _write_json(args.json, res)
                # How much of each system's file the kernel maps with 2 MiB pages (docs/package-format.md).
                pages = []
                hr = next((r["helm"] for r in res["rows"][-len(threads):] if "all" in r.get("helm", {})), None)
                if hr and hr["all"][0].get("package_huge_page_bytes") is not None:
                    size = art["package"].stat().st_size
                    pages.append(f"helm-rt's package {100 * hr['all'][0]['package_huge_page_bytes'] / size:.0f}%")
                if "llama.cpp" in systems and art["gguf"]:
                    for what, path in (("llama.cpp's GGUF", art["gguf"]), ("its 2 MiB-piece copy", gguf_2mib)):
                        if path:
                            pages.append(f"{what} {100 * huge_folio_bytes(path) / path.stat().st_size:.0f}%")
                if pages:
                    res["notes"].append(f"{model} {dtype}: on 2 MiB pages: " + ", ".join(pages))
                if gguf_2mib:
                    gguf_2mib.unlink()
                # Same weights? greedy ids of llama.cpp (libllama) and ONNX Runtime against helm-rt's.
                if "llama.cpp" in systems and art["gguf"]:
                    with lock.held("llama-greedy"):
                        g = llama_greedy(art["gguf"], prompt, args.n_new, threads[-1])
                    if "error" in g:
                        res["notes"].append(f"{model} {dtype}: llama-greedy failed: {g['error']}")
                    else:
                        ids["llama.cpp"] = g["ids"]
                        res.setdefault("greedy", {})[f"{model}-{dtype}"] = g
                ref = "helm" if "helm" in ids else next(iter(ids), None)
                for other in ids:
                    if other == ref:
                        continue
                    n = leading_agreement(ids[ref], ids[other])
                    same = sum(a == b for a, b in zip(ids[ref], ids[other]))
                    msg = (f"{model} {dtype}: greedy ids {SYSTEM_NAMES[ref]} vs {SYSTEM_NAMES[other]}: first "
                           f"{n} of {args.n_new} identical ({same} equal positions)")
                    if n < args.n_new:
                        gaps = (res.get("greedy", {}).get(f"{model}-{dtype}", {}).get("top2_gap")
                                if other == "llama.cpp" else row.get("ort", {}).get("top2_gap"))
                        if gaps and n < len(gaps):
                            msg += (f"; at step {n} the top-2 logit gap is {gaps[n]:.3g} (median "
                                    f"{statistics.median(gaps):.3g})")
                        if dtype == "bf16" and other == "llama.cpp":
                            msg += (" (bf16: llama.cpp keeps f32 activations and rounds only matmul "
                                    "inputs to bf16, the ONNX graph computes in bf16: ids need not match)")
                        elif n < 8:
                            msg = "WARNING: " + msg + " (random weights can have near ties; check the GGUF)"
                    log(msg)
                    res["notes"].append(msg)
    log(f"measured in {(time.time() - t_start) / 60:.1f} min")
    if args.json:
        _write_json(args.json, res)
        log(f"wrote {args.json}")
    report(res)
    return 0


def _write_json(path, res):
    with open(path, "w") as f:
        json.dump(res, f, indent=1, default=str)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
