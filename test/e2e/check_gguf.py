#!/usr/bin/env python3
"""GGUF files through helmc and helm-rt against llama.cpp on the very same files.

The reference is llama.cpp itself (bench/build-llama-cpp.sh builds it from the llama-cpp-python sdist
on PyPI; scripts/test.sh runs that first):

1. Tokenizer: the tokenizer.json helmc builds from a GGUF file's metadata (helm-gguf-dump
   --tokenizer-json), run by HELM's tokenizer (helm-tokenize), gives the ids llama.cpp's vocabulary
   tests expect (its models/ggml-vocab-*.gguf with their .inp texts and .out ids) for a SentencePiece
   vocabulary (llama-spm) and three byte-level BPE ones (gpt-2, llama-bpe, qwen2).
2. Models: llama, qwen2, qwen3 and phi3 (F32, F16, Q8_0, Q4_K_M) files with random weights written by test/gguf/make_gguf_model.py
   (llama.cpp's tensor names and layout, written by its gguf package) in F32, and from it F16, Q8_0,
   Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q4_K_M, Q3_K_M and Q2_K made by llama.cpp's llama-quantize; for llama
   also llama-quantize's lattice mixes IQ2_XXS, IQ2_XS, IQ2_M, IQ3_XXS and IQ3_S (each must hold its
   type: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S; its "IQ2_S" mix is IQ2_XS tensors, so IQ2_M stands for
   IQ2_S), made with an importance matrix the test writes in llama-imatrix's GGUF form, every column
   weighted alike (llama-quantize refuses the iq2 types without one; llama-imatrix is not built, and
   the matrix only steers which blocks llama-quantize picks, not how they are read); a Q4_K_M
   file of a model 320 wide (its rows of 320 are not whole 256-weight blocks: llama-quantize falls
   back to Q5_0 and Q8_0 for them, as in most Q4_K_M files people hold), F32 files with Llama 3.1's
   rope_freqs.weight (all-CPU, and split on the emulated GPU in both code forms), with linear
   rope scaling and with yarn (qwen2 all-CPU and split, qwen3 with rope.scaling.attn_factor), a
   tied Q8_0 table, and the default
   model's GGUF file (SmolLM2-135M Q4_1, which scripts/test.sh fetches). Both run with an f32 KV
   cache (llama-greedy's f32-kv, without flash attention; helm-rt --kv-type f32): their default f16
   caches round K and V, and llama.cpp's also rounds each query to f16 for the f16 dot products,
   which HELM does not, so only f32 caches compute the same operations. For each file: first-step logits within TOLERANCE of llama.cpp's (max
   |difference| over the largest |logit|) at every step, and greedy ids identical to llama.cpp's
   for 32 tokens, or up to a step where the two part at a near-tie: helm's id must then be ranked
   by llama.cpp within twice the logits' measured difference at that step of its best (two sets of
   logits that close may rank the pair either way).
   F32 files compute the same operations (only summation order differs): 1e-5. Q8_0, Q4_0, Q4_1,
   Q5_0, Q5_1 and IQ4_NL files also do (HELM quantizes activations exactly as llama.cpp's q8_0 / q8_1 blocks), but a
   last-bit difference that moves an activation across a rounding boundary changes its 8-bit code,
   and random-weight models amplify that: 6e-2, the bound the ONNX tests use for 8-bit activations.
   Q4_K_M, Q3_K_M, Q2_K and IQ4_XS: llama.cpp quantizes activations in blocks of 256 for them
   (q8_K), HELM in 32s: 6e-2.
   The lattice mixes (IQ2_XXS, IQ2_XS, IQ2_M, IQ3_XXS, IQ3_S): likewise q8_K against HELM's 32s:
   6e-2. Measured (seeds 1-3) 2.5-3.8% on the first step and 4.6% at worst; each system's 8-bit
   activations alone move the first logits by about 2% of the largest (2.1-2.5% for llama.cpp,
   1.8-2.1% for HELM, against llama.cpp on the same weights in F32), in other blocks, so the two
   differ by up to twice that. Their ids agree for 0-28 steps before a near-tie (Q2_K's for 7-13).
   The lattice decoding itself is held exactly: a file with random blocks of all five types
   (make_gguf_model.py) under HELM_QUANT_EXACT=1 (f32 activations, every block weight dequantized)
   against llama.cpp on its weights dequantized to F32 by the gguf package: 1e-5, as F32 files
   (measured 1e-6 and 2.4e-6 at worst, 32 ids identical).
   F16: llama.cpp rounds activations to f16 for F16 weights, HELM keeps f32: 1e-2.
   Gemma (GELU-gated MLP) in F32: llama.cpp's CPU GELU reads a table of f16 values (its input and
   output rounded to f16, ~5e-4 relative), HELM computes the tanh form in f32: 2e-4.
4. Gemma, Gemma 2 and Gemma 3: files written as llama.cpp's converter writes them (a sliding-window
   pattern of 2 with a window of 6 tokens, so that both layer kinds and the window act within the
   prompt and the 32 tokens; Gemma 3 with linear rope scaling, which applies to its global layers
   only, and 128-wide heads; Gemma 2 with its attention scores soft-capped at 5 and its logits at
   30), F32 all-CPU and split on emu in both code forms (Gemma 2, 3), Q8_0, and Q4_K_M (Gemma 3);
   and a real, trained file:
   Gemma 3 270M in Q4_K_M from PyPI (scripts/fetch-gguf.py; 81 of its tensors are Q5_0 fallbacks),
   as it is (8e-2: llama.cpp's q8_K activations of Gemma's large hidden states) and dequantized to
   F32 (1e-3: 18 layers of the f16 GELU table), its text prompt and a whole text tokenized as
   llama.cpp does.
3. The package stores every quantized tensor's bytes exactly as the file holds them.
5. helmc's mixed recipes (--quantize=q2_k, q3_k_m, q4_k_m, q5_k_m) give every tensor of an F32 file
   the type llama-quantize's Q2_K, Q3_K_M, Q4_K_M and Q5_K_M give it (a 16-layer llama, so that the
   recipes' layer patterns show, with 8 query heads on 2 KV heads: Q2_K's rule for 4 or more).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import gguf

HERE = Path(__file__).resolve().parent
TOKENS = 32
# Relative first-step logit tolerance per weight type (why: the docstring, 2.).
TOLERANCE = {"F32": 1e-5, "GELU_F32": 2e-4, "F16": 1e-2, "Q8_0": 6e-2, "Q4_0": 6e-2, "Q4_1": 6e-2, "Q5_0": 6e-2, "Q5_1": 6e-2,
             "IQ4_NL": 6e-2, "IQ4_XS": 6e-2, "Q4_K_M": 6e-2, "Q3_K_M": 6e-2, "Q2_K": 6e-2, "IQ2_XXS": 6e-2,
             "IQ2_XS": 6e-2, "IQ2_M": 6e-2, "IQ3_XXS": 6e-2, "IQ3_S": 6e-2, "default": 6e-2}
# llama-quantize's lattice mixes (docstring, 2.) and the tensor type each must hold: its "IQ2_S" mix
# is IQ2_XS tensors, IQ2_M's are IQ2_S.
LATTICE_MIXES = {"IQ2_XXS": "IQ2_XXS", "IQ2_XS": "IQ2_XS", "IQ2_M": "IQ2_S", "IQ3_XXS": "IQ3_XXS", "IQ3_S": "IQ3_S"}


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    return r.stdout


def check_tokenizers(a, vocab_dir, failures):
    for name in ["llama-spm", "gpt-2", "llama-bpe", "qwen2"]:
        base = vocab_dir / f"ggml-vocab-{name}.gguf"
        texts = (base.parent / (base.name + ".inp")).read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
        expected = (base.parent / (base.name + ".out")).read_text(encoding="utf-8").split("\n")
        with tempfile.TemporaryDirectory() as tmp:
            tok = Path(tmp) / "tokenizer.json"
            tok.write_text(run([a.helm_gguf_dump, base, "--tokenizer-json"]), encoding="utf-8")
            sep = "\n__ggml_vocab_test__\n"
            inp = Path(tmp) / "texts"
            inp.write_bytes(sep.join(texts).encode("utf-8"))
            got = run([a.helm_tokenize, "encode", tok, inp, "--separator", sep]).split("\n")
        n = min(len(texts), len(expected))
        bad = [i for i in range(n) if got[i].split() != expected[i].split()]
        print(f"tokenizer {name}: {n - len(bad)}/{n} texts give llama.cpp's ids")
        for i in bad[:3]:
            failures.append(f"tokenizer {name}: text {i} {texts[i][:40]!r}: llama.cpp {expected[i][:80]}, helm {got[i][:80]}")


def check_file_tokenizer(a, label, path, text_path, failures):
    """A real file's tokenizer on a whole text: HELM's ids (helm-tokenize on the tokenizer.json
    helmc makes from the metadata) against llama-tokenize's, without BOS."""
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "tokenizer.json"
        tok.write_text(run([a.helm_gguf_dump, path, "--tokenizer-json"]), encoding="utf-8")
        got = [int(x) for x in run([a.helm_tokenize, "encode", tok, text_path, "--whole"]).split()]
    env = dict(os.environ, LD_LIBRARY_PATH=str(a.llama_dir / "build" / "bin"))
    out = run([a.llama_dir / "build" / "bin" / "llama-tokenize", "-m", path, "-f", text_path, "--ids", "--no-bos",
               "--log-disable"], env=env)
    want = json.loads(out.strip().splitlines()[-1])
    first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None)
    if got != want:
        failures.append(f"{label}: the tokenizer gives {len(got)} ids for {Path(text_path).name}, llama.cpp "
                        f"{len(want)}; first difference at {first}")
    print(f"{label}: {Path(text_path).name} tokenizes to llama.cpp's {len(want)} ids: {got == want}")


def read_package_tensors(path):
    """(manifest, {source name: bytes}) of a .helmpkg (docs/package-format.md)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"HELMPKG\0", "not a HELM package"
    count, _, table = struct.unpack_from("<IIQ", data, 16)
    sections = {}
    for i in range(count):
        kind, _, name, offset, size, _ = struct.unpack_from("<II32sQQQ", data, table + 64 * i)
        sections[name.rstrip(b"\0").decode()] = (offset, size)
    off, size = sections["manifest"]
    manifest = json.loads(data[off:off + size])
    tensors = {}
    for t in manifest["tensors"]:
        base = sections[t["section"]][0]
        tensors[t["onnx_name"]] = (t["dtype"], data[base + t["offset"]: base + t["offset"] + t["bytes"]])
    return manifest, tensors


def check_bytes(label, gguf_path, package, failures):
    reader = gguf.GGUFReader(gguf_path)
    _, tensors = read_package_tensors(package)
    checked = 0
    for t in reader.tensors:
        if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            continue
        dtype, stored = tensors.get(t.name, (None, None))
        if stored is None:
            # A fused tensor the importer split (Phi-3's attn_qkv, ffn_up): its rows' parts, in order.
            parts = [tensors[t.name + "#" + part] for part in ("q", "k", "v", "gate", "up")
                     if t.name + "#" + part in tensors]
            if parts:
                dtype, stored = parts[0][0], b"".join(bytes_ for _, bytes_ in parts)
        if stored is None:
            failures.append(f"{label}: tensor {t.name} is not in the package")
        elif stored != bytes(t.data.tobytes()):
            failures.append(f"{label}: the package's bytes of {t.name} ({dtype}) differ from the file's")
        checked += 1
    return checked


def check_recipes(a, tmp, quantize, env, vocab, failures):
    """helmc --quantize=q2_k / q3_k_m / q4_k_m / q5_k_m picks, tensor by tensor, the type
    llama-quantize's Q2_K / Q3_K_M / Q4_K_M / Q5_K_M gives the same F32 file: a 16-layer llama (the
    recipes' layer patterns need that many: more bits in the first and last eighth and every third
    block between, the first sixteenth, the first two V projections), untied, with 8 query heads on
    2 KV heads (Q2_K gives the V projections q4_k from 4 query heads a KV head on)."""
    f32 = tmp / "llama-16-f32.gguf"
    run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "llama", "--out", f32,
         "--vocab", vocab, "--untied", "--seed", "5", "--layers", "16", "--heads", "8", "--kv-heads", "2"])
    for recipe in ("Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M"):
        q, package = tmp / f"llama-16-{recipe}.gguf", tmp / f"llama-16-{recipe}.helmpkg"
        run([quantize, f32, q, recipe], env=env)
        run([a.helmc, f32, "-q", f"--quantize={recipe.lower()}", "-o", package])
        want = {t.name: gguf.GGMLQuantizationType(t.tensor_type).name.lower() for t in gguf.GGUFReader(q).tensors}
        _, tensors = read_package_tensors(package)
        got = {name: dtype for name, (dtype, _) in tensors.items()}
        differ = sorted(name for name in want if got.get(name) != want[name])
        counts = {}
        for dtype in want.values():
            counts[dtype] = counts.get(dtype, 0) + 1
        print(f"llama 16 layers --quantize={recipe.lower()}: {len(want) - len(differ)}/{len(want)} tensors "
              f"of llama-quantize's types ({', '.join(f'{n} {t}' for t, n in sorted(counts.items()))})")
        for name in differ[:5]:
            failures.append(f"--quantize={recipe.lower()}: {name} is {got.get(name)}, llama-quantize's {recipe} "
                            f"makes it {want[name]}")
        q.unlink()
        package.unlink()
    f32.unlink()


def write_uniform_imatrix(model, path):
    """An importance matrix for model's 2-D tensors (but the token table, which llama-quantize
    quantizes without one), in llama-imatrix's GGUF form (.in_sum2 and .counts tensors, the
    imatrix.* keys), that weights every column alike: each mean square 1."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_type("imatrix")
    writer.add_array("imatrix.datasets", ["uniform"])
    writer.add_uint32("imatrix.chunk_count", 1)
    writer.add_uint32("imatrix.chunk_size", 512)
    for t in gguf.GGUFReader(model).tensors:
        if len(t.shape) == 2 and t.name != "token_embd.weight":
            writer.add_tensor(t.name + ".in_sum2", np.ones((1, int(t.shape[0])), dtype=np.float32))
            writer.add_tensor(t.name + ".counts", np.ones((1, 1), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def check_lattice_mixes(a, tmp, quantize, env, f32, vocab, prompt, failures):
    """llama-quantize's IQ2_XXS, IQ2_XS, IQ2_M, IQ3_XXS and IQ3_S files of f32, made with a uniform
    importance matrix (llama-quantize requires one for every mix that holds iq2 tensors, IQ3_XXS's
    included): each must hold its lattice type (LATTICE_MIXES), then compare."""
    imatrix = tmp / "uniform.imatrix.gguf"
    write_uniform_imatrix(f32, imatrix)
    for mix, lattice in LATTICE_MIXES.items():
        q = tmp / f"llama-{mix}.gguf"
        run([quantize, "--imatrix", imatrix, f32, q, mix], env=env)
        types = sorted({gguf.GGMLQuantizationType(t.tensor_type).name for t in gguf.GGUFReader(q).tensors} - {"F32"})
        if lattice not in types:
            failures.append(f"llama {mix}: expected {lattice} tensors, the file has {types}")
        compare(a, f"llama {mix} ({', '.join(types)})", q, prompt, TOLERANCE[mix], failures)
        q.unlink()
    imatrix.unlink()
    # Exact arithmetic: a file with random blocks of every lattice type (make_gguf_model.py), helm-rt
    # with HELM_QUANT_EXACT=1 (f32 activations, every block weight dequantized) against llama.cpp on
    # the same weights dequantized to F32 by the gguf package (test/gguf/dequantize_gguf.py).
    lattice, dequantized = tmp / "llama-lattice.gguf", tmp / "llama-lattice-f32.gguf"
    forced = {"attn_q": "iq2_xxs", "attn_k": "iq2_xs", "attn_v": "iq2_s", "attn_output": "iq3_xxs", "ffn_gate": "iq3_s",
              "ffn_up": "iq2_xxs", "ffn_down": "iq2_s"}
    run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "llama", "--out", lattice,
         "--vocab", vocab, "--untied", "--seed", "11", "--type", "iq3_s",
         *[arg for name, t in forced.items() for arg in ("--tensor-type", f"blk.1.{name}.weight={t}")]])
    run([sys.executable, HERE.parent / "gguf" / "dequantize_gguf.py", lattice, dequantized])
    compare(a, "llama lattice blocks HELM_QUANT_EXACT=1 vs dequantized F32", lattice, prompt, TOLERANCE["F32"],
            failures, reference=dequantized, helm_env={"HELM_QUANT_EXACT": "1"})
    lattice.unlink()
    dequantized.unlink()


def compare(a, label, path, prompt, tolerance, failures, threads=2, text=None, helmc_args=(), eos=2, template=True,
            reference=None, helm_env=None):
    """helm-rt on path against llama.cpp on path, or on `reference` (the same weights in another
    file); helm_env: environment variables for helm-rt."""
    rt_env = dict(os.environ, **helm_env) if helm_env else None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        package = tmp / "model.helmpkg"
        run([a.helmc, path, "-o", package, "-q", *helmc_args])
        blocks = check_bytes(label, path, package, failures)
        helm_logits = tmp / "helm.f32"
        out = run([a.helm_rt, package, "--prompt-ids", ",".join(map(str, prompt)), "-n", TOKENS,
                   "--temperature", 0, "--ignore-eos", "--emit-ids", "-q", "-t", threads, "--kv-type", "f32",
                   "--logits-out", helm_logits], env=rt_env)
        helm_ids = [int(x) for x in out.strip().splitlines()[-1].split(",")]
        ref_logits = tmp / "llama.f32"
        env = dict(os.environ, LD_LIBRARY_PATH=str(a.llama_dir / "build" / "bin"))
        ref = json.loads(run([a.llama_dir / "bin" / "llama-greedy", reference or path, ",".join(map(str, prompt)),
                              TOKENS, threads, ref_logits, "f32-kv"], env=env).strip().splitlines()[-1])
        ref_all = np.fromfile(ref_logits, dtype=np.float32).reshape(TOKENS, -1)
        helm_all = np.fromfile(helm_logits, dtype=np.float32).reshape(TOKENS, -1)
        if text is not None:
            # The package's own tokenizer (from the file's metadata): the text gives the prompt's
            # ids, so the same greedy tokens; the manifest keeps the chat template and GGUF's EOS.
            out = run([a.helm_rt, package, "-p", text, "-n", 4, "--temperature", 0, "--ignore-eos", "--emit-ids",
                       "-q", "-t", threads, "--kv-type", "f32"])
            from_text = [int(x) for x in out.strip().splitlines()[-1].split(",")]
            if from_text != helm_ids[:4]:
                failures.append(f"{label}: -p {text!r} generates {from_text}, the prompt's ids {helm_ids[:4]}")
            info = run([a.helm_rt, package, "--info"])
            tok_line = next((line for line in info.splitlines() if line.startswith("tokenizer:")), "")
            kv_line = next((line for line in info.splitlines() if line.startswith("KV cache:")), "")
            if not kv_line.split()[2:3] == ["f16"]:
                failures.append(f"{label}: a GGUF package's CPU cache should default to f16 rows, --info says {kv_line!r}")
            print(f"{label}: -p {text!r} gives the prompt ids' tokens; {tok_line.strip()}")
            eos_ids = [int(x) for x in tok_line.split("(eos", 1)[-1].split(")")[0].split()] if "(eos" in tok_line else []
            if ("chat template (" in tok_line) != template or eos not in eos_ids:
                failures.append(f"{label}: --info's tokenizer line should {'' if template else 'not '}name a chat "
                                f"template and should list EOS id {eos}: {tok_line!r}")
    # Step by step while the ids agree (both have then seen the same tokens): each step's logits
    # within the tolerance; where the ids part, helm's id must be within the two systems' measured
    # difference at that step of llama.cpp's best (a near-tie that this difference can flip).
    worst, compared, note = 0.0, TOKENS, ""
    for i in range(TOKENS):
        diff = float(np.max(np.abs(helm_all[i] - ref_all[i])))
        largest = float(np.max(np.abs(ref_all[i])))
        worst = max(worst, diff / largest)
        if diff > tolerance * largest:
            failures.append(f"{label}: step {i}'s logits differ by {diff / largest:.2e} of the largest, over {tolerance:.0e}")
            compared = i
            break
        if helm_ids[i] != ref["ids"][i]:
            gap = float(ref_all[i][ref["ids"][i]] - ref_all[i][helm_ids[i]])
            compared = i
            note = f" (then a near-tie: llama.cpp ranks helm's id {gap:.3g} lower, the logits differ by {diff:.3g})"
            if gap > 2 * diff:
                failures.append(f"{label}: greedy ids differ at step {i}: llama.cpp {ref['ids'][:i + 1]}, helm "
                                f"{helm_ids[:i + 1]}; llama.cpp ranks helm's id {gap:.3g} lower, more than twice "
                                f"the logits' difference {diff:.3g}")
            break
    first = float(np.max(np.abs(helm_all[0] - ref_all[0])) / np.max(np.abs(ref_all[0])))
    print(f"{label}: first-step logits {first:.2e} of the largest, worst step {worst:.2e} (tolerance {tolerance:.0e}); "
          f"ids {compared}/{TOKENS} identical{note}; {blocks} quantized tensors byte-identical in the package")


def main():
    ap = argparse.ArgumentParser()
    for tool in ["helmc", "helm-rt", "helm-gguf-dump", "helm-tokenize"]:
        ap.add_argument("--" + tool, required=True, type=Path)
    ap.add_argument("--root", required=True, type=Path)
    a = ap.parse_args()
    a.llama_dir = a.root / "bench" / ".cache" / "llama.cpp"
    vocab_dir = a.llama_dir / "src" / "vendor" / "llama.cpp" / "models"
    quantize = a.llama_dir / "build" / "bin" / "llama-quantize"
    for needed in [a.llama_dir / "bin" / "llama-greedy", quantize, vocab_dir / "ggml-vocab-gpt-2.gguf"]:
        if not needed.exists():
            print(f"check_gguf: {needed} is missing: llama.cpp, the reference, is not built "
                  f"(bench/build-llama-cpp.sh; scripts/test.sh runs it)", file=sys.stderr)
            return 1
    failures = []
    check_tokenizers(a, vocab_dir, failures)

    env = dict(os.environ, LD_LIBRARY_PATH=str(a.llama_dir / "build" / "bin"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # Prompt ids: real text of each vocabulary (llama.cpp's own tokenization of a sentence).
        cases = [("llama", "llama-spm", [1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203]),
                 ("qwen2", "gpt-2", [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13]),
                 ("qwen3", "gpt-2", [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13]),
                 ("phi3", "llama-spm", [1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203])]
        all_types = ["F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "Q4_K_M", "Q3_K_M", "Q2_K"]
        for arch, vocab, prompt in cases:
            f32 = tmp / f"{arch}-f32.gguf"
            # Phi-3: fused attn_qkv and gate-up ffn_up, and its sliding window (2047, beyond the
            # prompts here: llama.cpp ignores Phi-3's window).
            extra = ["--set", "phi3.attention.sliding_window=2047"] if arch == "phi3" else []
            run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", arch, "--out", f32,
                 "--vocab", vocab_dir / f"ggml-vocab-{vocab}.gguf", "--untied", "--seed", "1", *extra])
            compare(a, f"{arch} F32", f32, prompt, TOLERANCE["F32"], failures)
            for qtype in (["F16", "Q8_0", "Q4_K_M"] if arch == "phi3" else all_types):
                q = tmp / f"{arch}-{qtype}.gguf"
                run([quantize, f32, q, qtype], env=env)
                compare(a, f"{arch} {qtype}", q, prompt, TOLERANCE[qtype], failures)
                q.unlink()
            if arch == "llama":
                check_lattice_mixes(a, tmp, quantize, env, f32, vocab_dir / f"ggml-vocab-{vocab}.gguf", prompt, failures)
            f32.unlink()
        check_recipes(a, tmp, quantize, env, vocab_dir / "ggml-vocab-llama-spm.gguf", failures)
        # Q4_K_M of a model whose rows of 320 are not whole super-blocks: Q5_0 and Q8_0 fallbacks.
        narrow = tmp / "llama-320-f32.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "llama", "--out", narrow,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--untied", "--seed", "3", "--hidden", "320",
             "--heads", "5", "--kv-heads", "1", "--ffn", "768"])
        q = tmp / "llama-320-Q4_K_M.gguf"
        run([quantize, narrow, q, "Q4_K_M"], env=env)
        types = {gguf.GGMLQuantizationType(t.tensor_type).name for t in gguf.GGUFReader(q).tensors}
        if not {"Q5_0", "Q4_K"} <= types:
            failures.append(f"llama 320 Q4_K_M: expected Q5_0 fallbacks beside Q4_K, the file has {sorted(types)}")
        compare(a, "llama 320 Q4_K_M", q, cases[0][2], TOLERANCE["Q4_K_M"], failures)
        # Llama 3.1's rope_freqs.weight, and linear position scaling: all-CPU, and split on the
        # emulated GPU (layer 0 on the CPU, the rest on emu) in both forms of the GPU stage's code.
        scaled = tmp / "llama-rope-freqs.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "llama", "--out", scaled,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--untied", "--seed", "4", "--rope-freqs"])
        for form in ([], ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=host"],
                     ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=kernels"]):
            compare(a, "llama rope_freqs F32 " + (" ".join(form) or "cpu"), scaled, cases[0][2], TOLERANCE["F32"],
                    failures, helmc_args=form)
        linear = tmp / "llama-linear.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "llama", "--out", linear,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--untied", "--seed", "5",
             "--set", "llama.rope.scaling.type=str:linear", "--set", "llama.rope.scaling.factor=4.0"])
        compare(a, "llama linear rope scaling F32", linear, cases[0][2], TOLERANCE["F32"], failures)
        # Yarn (Qwen 2.5's long-context files): the frequencies blended between interpolation and
        # extrapolation, the rotation's magnitude 1 + 0.1 ln(factor) (times rope.scaling.attn_factor)
        # folded into the attention scale. A small original context (64) puts the blend's ramp
        # inside the head; all-CPU and split on emu in both code forms.
        yarn = tmp / "qwen2-yarn.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "qwen2", "--out", yarn,
             "--vocab", vocab_dir / "ggml-vocab-gpt-2.gguf", "--untied", "--seed", "9",
             "--set", "qwen2.rope.scaling.type=str:yarn", "--set", "qwen2.rope.scaling.factor=4.0",
             "--set", "qwen2.rope.scaling.original_context_length=64"])
        for form in ([], ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=host"],
                     ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=kernels"]):
            compare(a, "qwen2 yarn F32 " + (" ".join(form) or "cpu"), yarn, cases[1][2], TOLERANCE["F32"], failures,
                    helmc_args=form)
        yarn3 = tmp / "qwen3-yarn.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "qwen3", "--out", yarn3,
             "--vocab", vocab_dir / "ggml-vocab-gpt-2.gguf", "--untied", "--seed", "10",
             "--set", "qwen3.rope.scaling.type=str:yarn", "--set", "qwen3.rope.scaling.factor=8.0",
             "--set", "qwen3.context_length=128", "--set", "qwen3.rope.scaling.attn_factor=0.9"])
        compare(a, "qwen3 yarn with attn_factor F32", yarn3, cases[2][2], TOLERANCE["F32"], failures)
        # Phi-3's LongRoPE (the 128k files): llama.cpp takes the long table when its context per
        # sequence exceeds rope.scaling.original_context_length, HELM when --max-context does;
        # llama-greedy's context is the prompt and the tokens (under 100), so an original context
        # of 4096 tests the short table and one of 32 the long (the package's 4096 exceeds it);
        # rope.scaling.attn_factor scales both.
        for original in (4096, 32):
            longrope = tmp / f"phi3-longrope-{original}.gguf"
            run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "phi3", "--out", longrope,
                 "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--untied", "--seed", "12",
                 "--longrope", str(original)])
            compare(a, f"phi3 LongRoPE, original context {original}, F32", longrope, cases[3][2], TOLERANCE["F32"],
                    failures)
        # Mistral 3 (Ministral 3's keys): yarn with its beta_fast / beta_slow and log multiplier
        # read from the file, and Llama 4's attention temperature, which is 1 within the original
        # context (here 4096: the package's --max-context 4096 stays within it); Q4_K_M too.
        mistral = tmp / "mistral3-f32.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "mistral3", "--out", mistral,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--untied", "--seed", "13",
             "--set", "mistral3.rope.scaling.type=str:yarn", "--set", "mistral3.rope.scaling.factor=16.0",
             "--set", "mistral3.rope.scaling.original_context_length=4096",
             "--set", "mistral3.rope.scaling.yarn_beta_fast=16.0", "--set", "mistral3.rope.scaling.yarn_beta_slow=2.0",
             "--set", "mistral3.rope.scaling.yarn_log_multiplier=0.5",
             "--set", "mistral3.attention.temperature_scale=0.1"])
        compare(a, "mistral3 F32", mistral, cases[0][2], TOLERANCE["F32"], failures)
        q = tmp / "mistral3-Q4_K_M.gguf"
        run([quantize, mistral, q, "Q4_K_M"], env=env)
        compare(a, "mistral3 Q4_K_M", q, cases[0][2], TOLERANCE["Q4_K_M"], failures)
        # A tied table in blocks (the LM head reads the token table) at one bit width.
        tied = tmp / "llama-tied.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "llama", "--out", tied,
             "--vocab", vocab_dir / "ggml-vocab-gpt-2.gguf", "--type", "q8_0", "--seed", "2"])
        compare(a, "llama tied Q8_0", tied, [464, 2068, 7586, 21831, 18045, 625, 262], TOLERANCE["Q8_0"], failures)
        # Gemma 3 (and Gemma): scaled embedding, GELU-gated MLP, post-norms, q/k norms, the local
        # layers' window and rope base, the global layers' linear scaling; the head tied.
        spm = cases[0][2]
        gemma3 = tmp / "gemma3-f32.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "gemma3", "--out", gemma3,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--seed", "6", "--head-dim", "128",
             "--set", "gemma3.attention.sliding_window=6", "--set", "gemma3.attention.sliding_window_pattern=2",
             "--set", "gemma3.rope.scaling.type=str:linear", "--set", "gemma3.rope.scaling.factor=8.0"])
        for form in ([], ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=host"],
                     ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=kernels"]):
            compare(a, "gemma3 F32 " + (" ".join(form) or "cpu"), gemma3, spm, TOLERANCE["GELU_F32"], failures,
                    helmc_args=form)
        for qtype in ["Q8_0", "Q4_K_M"]:
            q = tmp / f"gemma3-{qtype}.gguf"
            run([quantize, gemma3, q, qtype], env=env)
            compare(a, f"gemma3 {qtype}", q, spm, TOLERANCE[qtype], failures)
            q.unlink()
        gemma = tmp / "gemma-f32.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "gemma", "--out", gemma,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--seed", "7"])
        compare(a, "gemma F32", gemma, spm, TOLERANCE["GELU_F32"], failures)
        # Gemma 2: the attention scores soft-capped (at 5 here, so that the cap bends the random
        # model's scores; the files' 50 barely does) and the logits at 30; even layers local.
        gemma2 = tmp / "gemma2-f32.gguf"
        run([sys.executable, HERE.parent / "gguf" / "make_gguf_model.py", "--arch", "gemma2", "--out", gemma2,
             "--vocab", vocab_dir / "ggml-vocab-llama-spm.gguf", "--seed", "8",
             "--set", "gemma2.attention.sliding_window=6", "--set", "gemma2.attn_logit_softcapping=5.0"])
        for form in ([], ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=host"],
                     ["--target=emu:rtx4060", "--force-split=2", "--gpu-code=kernels"]):
            compare(a, "gemma2 F32 " + (" ".join(form) or "cpu"), gemma2, spm, TOLERANCE["GELU_F32"], failures,
                    helmc_args=form)
        q = tmp / "gemma2-Q8_0.gguf"
        run([quantize, gemma2, q, "Q8_0"], env=env)
        compare(a, "gemma2 Q8_0", q, spm, TOLERANCE["Q8_0"], failures)

        # A real Gemma 3 file: as it is, and dequantized to F32. "The capital of France is", as
        # llama.cpp tokenizes it (BOS 2 first).
        real = a.root / "models" / ".cache" / "gguf" / "gemma-3-270m-q4_k_m.gguf"
        if not real.exists():
            print(f"check_gguf: {real} is missing (scripts/fetch-gguf.py gemma3-270m; scripts/test.sh runs it)",
                  file=sys.stderr)
            return 1
        check_file_tokenizer(a, "Gemma 3 270M", real, a.root / "test" / "data" / "text" / "public-domain.txt",
                             failures)
        prompt = [2, 818, 5279, 529, 7001, 563]
        # 8e-2: the two systems quantize this model's large hidden states (Gemma scales its
        # embedding by sqrt(640) and normalises each sublayer's output again) to 8 bits in other
        # blocks (q8_K of 256 for the k-quants against HELM's 32s); measured 4.1e-2 on the first
        # step and 5.4e-2 at worst, while the F32 file below agrees to 4e-4.
        compare(a, "Gemma 3 270M Q4_K_M", real, prompt, 8e-2, failures,
                text="The capital of France is", eos=1, template=False)
        dequantized = tmp / "gemma3-270m-f32.gguf"
        run([sys.executable, HERE.parent / "gguf" / "dequantize_gguf.py", real, dequantized])
        compare(a, "Gemma 3 270M dequantized to F32", dequantized, prompt, 1e-3, failures)
        dequantized.unlink()

    default = a.root / "models" / ".cache" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not default.exists():
        print(f"check_gguf: {default} is missing (scripts/fetch-default-model.py --gguf-only; "
              f"scripts/test.sh runs it)", file=sys.stderr)
        return 1
    # "The capital of France is", as llama.cpp tokenizes it.
    compare(a, "default model (SmolLM2-135M Q4_1)", default, [504, 3575, 282, 4649, 314],
            TOLERANCE["default"], failures, text="The capital of France is")

    for f in failures:
        print("FAIL:", f)
    print(f"check_gguf: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
