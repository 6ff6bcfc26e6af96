#!/usr/bin/env python3
"""ONNX Runtime oracle for HELM's end-to-end tests: greedy generation of an ONNX decoder-only LLM.

For every prompt, independently and at batch 1, the oracle

  1. runs the prompt (prefill) and takes the argmax of the logits at the last position: token 1;
  2. feeds each new token back, one step at a time, until n_new tokens exist.

With `past_key_values.N.key/value` inputs the steps use the KV cache (the `present.N.*` outputs of one
step are the past of the next); without them (or with `use_kv=False`) every step re-runs the whole
sequence. It returns the n_new generated ids and, for every step, the float32 logits of the LAST
position, the distribution the step's token was taken from: shape [n_new, vocab] per prompt.

Sequences are never batched together, so prompts of different lengths need no padding. A runtime that
decodes several prompts in one batch must produce exactly what these independent per-sequence runs
produce (same ids; logits within the tolerance the comparison uses).

The inputs each graph wants are made from its own input list: `input_ids` [1, S] int64;
`attention_mask` all ones over the whole length (past + S for KV graphs, S otherwise); `position_ids`
arange(past, past + S); the first past is empty, [1, kv_heads, 0, head_dim], in the graph's dtype
(fp16 graphs take fp16 past and give fp16 logits, returned as float32).

  python ort_oracle.py MODEL.onnx --prompt-ids 1,2,3 --prompt-ids 4,5 -n 32 --out ref.json  # or .npz
  python ort_oracle.py MODEL.onnx --prompt "The capital of France is" -n 16   # tokenizer.json beside MODEL
  python ort_oracle.py --self-test test/models    # every corpus model, KV-cached vs full recompute

Output: JSON {"model", "prompt_ids", "ids": [[...] per prompt], "logits": [[[vocab floats] per step]
per prompt]}; .npz: `ids` int64 [P, n_new], `logits` float32 [P, n_new, vocab], `prompt_ids` int64
(all prompts concatenated), `prompt_lens` int64 [P].
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import numpy as np

_KV_IN = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
               "tensor(bfloat16)": None}


class OracleError(RuntimeError):
    pass


class OrtModel:
    """One onnxruntime CPU session plus what is needed to feed it (input names, KV layout)."""

    def __init__(self, model_path: str, threads: int = 1, session_config: dict[str, str] | None = None):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        for key, value in (session_config or {}).items():
            so.add_session_config_entry(key, value)
        self.path = model_path
        self.sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.sess.get_inputs()]
        self.outputs = [o.name for o in self.sess.get_outputs()]
        if "input_ids" not in self.inputs:
            raise OracleError(f"{model_path}: no input_ids input (inputs: {self.inputs})")
        if "logits" not in self.outputs:
            raise OracleError(f"{model_path}: no logits output (outputs: {self.outputs})")
        known = {"input_ids", "attention_mask", "position_ids"}
        self.kv_inputs = {}  # past input name -> (shape [1, kv_heads, 0, head_dim], numpy dtype)
        cfg = self._config()
        for i in self.sess.get_inputs():
            m = _KV_IN.match(i.name)
            if not m:
                if i.name not in known:
                    raise OracleError(f"{model_path}: cannot feed input {i.name!r}")
                continue
            if len(i.shape) != 4:
                raise OracleError(f"{model_path}: past input {i.name} is not 4-D: {i.shape}")
            heads, hd = i.shape[1], i.shape[3]
            if not isinstance(heads, int):
                heads = cfg.get("num_key_value_heads")
            if not isinstance(hd, int):
                hd = cfg.get("head_dim")
            dt = _ORT_DTYPES.get(i.type)
            if not isinstance(heads, int) or not isinstance(hd, int) or dt is None:
                raise OracleError(f"{model_path}: cannot size past input {i.name} {i.shape} {i.type}")
            present = f"present.{m.group(1)}.{m.group(2)}"
            if present not in self.outputs:
                raise OracleError(f"{model_path}: {i.name} has no matching output {present}")
            self.kv_inputs[i.name] = ((1, heads, 0, hd), dt)
        self.has_kv = bool(self.kv_inputs)
        self.vocab = None

    def _config(self):
        p = os.path.join(os.path.dirname(os.path.abspath(self.path)), "config.json")
        try:
            with open(p) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def run(self, ids, past=None, past_len=0):
        """ids: list of int (the new tokens); past: dict past-input-name -> array, or None for an empty
        cache. Returns (logits [S, vocab] float32, presents as the next step's past dict or None)."""
        seq = len(ids)
        total = past_len + seq if self.has_kv else seq
        feeds = {"input_ids": np.asarray([ids], dtype=np.int64)}
        if "attention_mask" in self.inputs:
            feeds["attention_mask"] = np.ones((1, total), dtype=np.int64)
        if "position_ids" in self.inputs:
            feeds["position_ids"] = np.arange(past_len, past_len + seq, dtype=np.int64)[None, :]
        for name, (shape, dt) in self.kv_inputs.items():
            feeds[name] = past[name] if past is not None else np.zeros(shape, dtype=dt)
        outs = self.sess.run(None, feeds)
        res = dict(zip(self.outputs, outs))
        logits = res["logits"]
        if logits.ndim != 3 or logits.shape[0] != 1 or logits.shape[1] != seq:
            raise OracleError(f"{self.path}: logits shape {logits.shape} for input [1, {seq}]")
        nxt = None
        if self.has_kv:
            nxt = {}
            for name in self.kv_inputs:
                _, layer, kind = name.split(".")
                pres = res[f"present.{layer}.{kind}"]
                if pres.shape[2] != past_len + seq:
                    raise OracleError(f"{self.path}: present.{layer}.{kind} has length {pres.shape[2]}, "
                                      f"expected {past_len + seq}")
                nxt[name] = pres
        return logits[0].astype(np.float32), nxt


def generate_one(model: OrtModel, prompt: list[int], n_new: int, use_kv: bool | None = None):
    """Greedy decoding of one prompt at batch 1. Returns (ids [n_new] list, logits [n_new, vocab])."""
    if not prompt:
        raise OracleError("empty prompt")
    if use_kv is None:
        use_kv = model.has_kv
    if use_kv and not model.has_kv:
        raise OracleError(f"{model.path}: no past_key_values inputs, cannot decode with a KV cache")
    ids, rows = [], []
    if use_kv:
        logits, past = model.run(list(prompt))
        pos = len(prompt)
        for step in range(n_new):
            row = logits[-1]
            rows.append(row)
            ids.append(int(np.argmax(row)))
            if step + 1 < n_new:
                logits, past = model.run([ids[-1]], past, pos)
                pos += 1
    else:
        seq = list(prompt)
        for _ in range(n_new):
            logits, _ = model.run(seq)  # KV graphs: with an empty past
            row = logits[-1]
            rows.append(row)
            ids.append(int(np.argmax(row)))
            seq.append(ids[-1])
    return ids, np.stack(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)


def generate(model_path: str, prompt_ids: list[list[int]], n_new: int, use_kv: bool | None = None,
             threads: int = 1, model: OrtModel | None = None, session_config: dict[str, str] | None = None):
    """Greedy generation of n_new tokens for every prompt, each run independently at batch 1.

    Returns (ids, logits): ids[p] is the list of the n_new generated token ids of prompt p, logits[p]
    a float32 array [n_new, vocab] with the last-position logits of every step (row k is what token k
    was chosen from). use_kv: None = the KV cache if the graph has one; False = re-run the whole
    sequence every step (also for KV graphs, with an empty past); True = require the cache.
    A runtime that decodes the prompts as one batch must give the same ids and logits as these
    independent runs: prompts of different lengths need no padding here."""
    model = model or OrtModel(model_path, threads=threads, session_config=session_config)
    all_ids, all_logits = [], []
    for p in prompt_ids:
        ids, logits = generate_one(model, [int(t) for t in p], n_new, use_kv)
        all_ids.append(ids)
        all_logits.append(logits)
    return all_ids, all_logits


# --------------------------------------------------------------------------------------------------
# Self-test over the corpus
# --------------------------------------------------------------------------------------------------

def _base_of(model_dir: str, default: str) -> str:
    try:
        with open(os.path.join(model_dir, "config.json")) as f:
            return json.load(f).get("corpus", {}).get("base") or default
    except (OSError, ValueError):
        return default


def self_test(root: str, n_new: int = 8, threads: int = 1) -> int:
    """Every ROOT/*/model.onnx: greedy generation of two prompts of different lengths (5 and 3 tokens).

    * KV graphs: with the cache and by full recompute, which must give the same ids and logits within
      1e-4 (fp32) / 1e-2 (fp16) of the largest logit;
    * models exported from the same network (config.json corpus.base) and of the same dtype get the same
      prompts and must agree the same way with the first of them (e.g. llama-kv-fp32, -ort, -gqa and
      -opset23-interleaved).
    Prints a table; returns the number of failures."""
    dirs = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "model.onnx")))
    if not dirs:
        print(f"ort_oracle: no */model.onnx under {root}", file=sys.stderr)
        return 1
    hdr = (f"{'model':34s} {'dtype':7s} {'inputs':>6s} {'kv':>3s} {'vocab':>5s} {'kv==full':>8s} "
           f"{'rel dlogit':>10s} {'same as':>26s} {'rel dlogit':>10s} {'time':>6s}  result")
    print(hdr)
    print("-" * len(hdr))
    failures = 0
    first_of = {}  # (base, dtype) -> (name, ids, logits)
    for d in dirs:
        path = os.path.join(root, d, "model.onnx")
        t0 = time.time()
        status, same, err, sib, sib_err = "ok", "-", "-", "-", "-"
        info = ("?", "?", "?", "?")
        try:
            m = OrtModel(path, threads=threads)
            out0 = m.sess.get_outputs()[0]
            dtype = "float16" if out0.type == "tensor(float16)" else "float32"
            tol = 1e-2 if dtype == "float16" else 1e-4
            vocab = out0.shape[2] if isinstance(out0.shape[2], int) else m._config().get("vocab_size", 256)
            base = _base_of(os.path.join(root, d), d)
            rng = np.random.default_rng(sum(base.encode()))
            prompts = [rng.integers(0, vocab, size=5).tolist(), rng.integers(0, vocab, size=3).tolist()]
            info = (dtype, str(len(m.inputs)), "yes" if m.has_kv else "no", str(vocab))
            full_ids, full_logits = generate(path, prompts, n_new, use_kv=False, model=m)
            for ids, lg in zip(full_ids, full_logits):
                if len(ids) != n_new or lg.shape != (n_new, vocab) or not np.all(np.isfinite(lg)):
                    raise OracleError(f"bad result: logits {lg.shape}, {len(ids)} ids, or non-finite logits")
            problems = []
            if m.has_kv:
                kv_ids, kv_logits = generate(path, prompts, n_new, use_kv=True, model=m)
                e = _rel_err(kv_logits, full_logits)
                same, err = ("yes" if kv_ids == full_ids else "NO"), f"{e:.1e}"
                if kv_ids != full_ids:
                    problems.append("KV-cached ids differ from full recompute")
                elif e > tol:
                    problems.append(f"KV-cached logits differ by {e:.2g} > {tol}")
            key = (base, dtype)
            if key in first_of:
                name0, ids0, logits0 = first_of[key]
                e = _rel_err(full_logits, logits0)
                sib, sib_err = name0, f"{e:.1e}"
                if full_ids != ids0:
                    problems.append(f"ids differ from {name0} (same network)")
                elif e > tol:
                    problems.append(f"logits differ from {name0} by {e:.2g} > {tol}")
            else:
                first_of[key] = (d, full_ids, full_logits)
            if problems:
                status = "FAIL: " + "; ".join(problems)
        except Exception as e:  # noqa: BLE001
            status = f"FAIL: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        if status != "ok":
            failures += 1
        print(f"{d:34s} {info[0]:7s} {info[1]:>6s} {info[2]:>3s} {info[3]:>5s} {same:>8s} {err:>10s} "
              f"{sib:>26s} {sib_err:>10s} {time.time() - t0:5.1f}s  {status}", flush=True)
    print(f"ort_oracle self-test: {len(dirs) - failures} passed, {failures} failed")
    return failures


def _rel_err(a_list, b_list) -> float:
    worst = 0.0
    for a, b in zip(a_list, b_list):
        scale = max(float(np.abs(b).max()), 1e-6)
        worst = max(worst, float(np.abs(a - b).max()) / scale)
    return worst


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------

def _parse_ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of token ids: {text!r}")
    if not ids:
        raise argparse.ArgumentTypeError("empty prompt")
    return ids


def _tokenizer(model_path: str):
    from tokenizers import Tokenizer

    p = os.path.join(os.path.dirname(os.path.abspath(model_path)), "tokenizer.json")
    if not os.path.isfile(p):
        raise OracleError(f"--prompt needs {p}")
    return Tokenizer.from_file(p)


def write_result(path: str, model_path: str, prompts, ids, logits):
    if path.endswith(".npz"):
        np.savez(path, ids=np.asarray(ids, dtype=np.int64).reshape(len(prompts), -1),
                 logits=np.stack(logits).astype(np.float32),
                 prompt_ids=np.asarray([t for p in prompts for t in p], dtype=np.int64),
                 prompt_lens=np.asarray([len(p) for p in prompts], dtype=np.int64))
    else:
        with open(path, "w") as f:
            json.dump({"model": model_path, "prompt_ids": [list(map(int, p)) for p in prompts], "ids": ids,
                       "logits": [lg.tolist() for lg in logits]}, f)
            f.write("\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="model.onnx")
    ap.add_argument("--prompt-ids", action="append", type=_parse_ids, default=[], metavar="IDS",
                    help="comma-separated token ids of one prompt (repeatable: one sequence each)")
    ap.add_argument("--prompt", action="append", default=[], metavar="TEXT",
                    help="prompt text, tokenized with the tokenizer.json beside the model (repeatable)")
    ap.add_argument("-n", "--n-new", type=int, default=32, help="tokens to generate (default 32)")
    ap.add_argument("--out", help="write the result to OUT (.json or .npz)")
    ap.add_argument("--no-kv", action="store_true", help="re-run the whole sequence at every step")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1)")
    ap.add_argument("--self-test", metavar="ROOT", help="check every ROOT/*/model.onnx (KV vs full recompute)")
    args = ap.parse_args(argv)

    if args.self_test:
        return 1 if self_test(args.self_test, n_new=8, threads=args.threads) else 0
    if not args.model:
        ap.error("MODEL is required (or --self-test ROOT)")
    if args.n_new < 1:
        ap.error("-n must be at least 1")
    try:
        tok = _tokenizer(args.model) if args.prompt else None
        prompts = list(args.prompt_ids)
        for text in args.prompt:
            prompts.append(tok.encode(text, add_special_tokens=False).ids)
        if not prompts:
            ap.error("give at least one --prompt-ids or --prompt")
        t0 = time.time()
        ids, logits = generate(args.model, prompts, args.n_new, use_kv=False if args.no_kv else None,
                               threads=args.threads)
        dt = time.time() - t0
    except OracleError as e:
        print(f"ort_oracle: {e}", file=sys.stderr)
        return 1
    if tok is None and os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(args.model)), "tokenizer.json")):
        tok = _tokenizer(args.model)
    for p, g in zip(prompts, ids):
        line = f"{','.join(map(str, p))} -> {','.join(map(str, g))}"
        if tok is not None:
            line += f"\n  {tok.decode(p, skip_special_tokens=False)!r} -> {tok.decode(g, skip_special_tokens=False)!r}"
        print(line)
    print(f"ort_oracle: {len(prompts)} prompt(s) x {args.n_new} tokens in {dt:.2f}s", file=sys.stderr)
    if args.out:
        write_result(args.out, args.model, prompts, ids, logits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
