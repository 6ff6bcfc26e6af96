#!/usr/bin/env python3
"""Generates HELM's corpus of tiny ONNX LLM exports under test/models/.

Every model is a randomly initialised (seeded) `transformers` causal LM built from a config -- no
weights are downloaded -- exported to ONNX in one of several styles:

  * dynamo      torch.onnx.export(dynamo=True), the decomposed graph torch >= 2.9 produces by default
  * torchscript torch.onnx.export(dynamo=False), the legacy tracer (many Constant/Shape/Gather nodes)
  * ort-opt     one of the above passed through onnxruntime.transformers.optimizer (com.microsoft ops)
  * opset 23    the dynamo exporter at opset 23 (ONNX Attention / RMSNormalization / RotaryEmbedding)
  * handbuilt   onnx.helper graphs built from the HF weights (com.microsoft GroupQueryAttention)

For each model the generator writes <out>/<name>/model.onnx (+ model.onnx.data for the external-data
model) and <out>/<name>/config.json (the expectation the C++ importer is compared against, taken from
the HF config, never from the graph), then checks with ONNX Runtime that the file runs and that its
outputs match the torch model (fp32: 1e-4, fp16: 1e-2, relative to the largest reference value).
Any mismatch aborts the run.  At the end it rewrites <out>/op_histograms.txt and the model table in
<out>/README.md from what is on disk.

  python test/models/generate.py                 # all models (a few minutes on 2 cores)
  python test/models/generate.py --only llama-fp32 --only qwen3-fp32
  python test/models/generate.py --histograms    # only rewrite op_histograms.txt and the README table
  python test/models/generate.py --list          # list model names
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import io
import json
import logging
import math
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_POS = 256  # max_position_embeddings of every model (also the length of hand-built rotary caches)


# --------------------------------------------------------------------------------------------------
# Model specifications
# --------------------------------------------------------------------------------------------------

# Base HF configurations.  Every exported model names one of these; models that share a base share
# the exact same weights (same seed), so e.g. llama-kv-fp32 and llama-kv-ort-fp32 are the same network.
BASES = {
    "llama-a": dict(arch="llama", seed=101, layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                    inter=128, vocab=256, theta=10000.0, eps=1e-5, tie=False),
    "llama-b": dict(arch="llama", seed=102, layers=3, hidden=64, heads=4, kv_heads=1, head_dim=16,
                    inter=160, vocab=256, theta=500000.0, eps=1e-6, tie=True),
    "llama-c": dict(arch="llama", seed=103, layers=2, hidden=96, heads=6, kv_heads=2, head_dim=16,
                    inter=192, vocab=384, theta=500000.0, eps=1e-5, tie=False),
    # head_dim 32 with num_heads * head_dim == hidden (the other Llamas use 16)
    "llama-d": dict(arch="llama", seed=104, layers=3, hidden=128, heads=4, kv_heads=2, head_dim=32,
                    inter=160, vocab=320, theta=500000.0, eps=1e-5, tie=True),
    "qwen2-a": dict(arch="qwen2", seed=201, layers=3, hidden=96, heads=3, kv_heads=1, head_dim=32,
                    inter=192, vocab=384, theta=1000000.0, eps=1e-6, tie=False),
    "qwen3-a": dict(arch="qwen3", seed=301, layers=2, hidden=64, heads=4, kv_heads=2, head_dim=32,
                    inter=128, vocab=320, theta=1000000.0, eps=1e-6, tie=True),
    "qwen3-b": dict(arch="qwen3", seed=302, layers=3, hidden=64, heads=4, kv_heads=2, head_dim=16,
                    inter=128, vocab=256, theta=1000000.0, eps=1e-6, tie=True),
    # Mistral differs from Llama only by its sliding-window attention: a window shorter than the
    # longest verification sequence (13) makes the difference real and visible in the graph.
    "mistral-a": dict(arch="mistral", seed=401, layers=4, hidden=128, heads=8, kv_heads=2, head_dim=16,
                      inter=224, vocab=512, theta=1000000.0, eps=1e-5, tie=False, window=8),
    "phi3-a": dict(arch="phi3", seed=501, layers=2, hidden=96, heads=3, kv_heads=3, head_dim=32,
                   inter=192, vocab=288, theta=10000.0, eps=1e-5, tie=False),
}

ALL_INPUTS = ("input_ids", "attention_mask", "position_ids")

# kind: dynamo | torchscript | gqa (hand-built com.microsoft GroupQueryAttention graph)
# post: None | ("ort", model_type)      -- onnxruntime.transformers.optimizer afterwards
# rope: "half" (HF rotate_half) | "interleaved" (GPT-J style, see make_interleaved_copy): at opset 23
#       the fused RotaryEmbedding nodes get interleaved=1 (set_rotary_interleaved); below 23 the torch
#       rotary itself is patched to rotate_every_two during the export (interleaved_rotary)
MODELS = {
    # 1. plain exports, fp32, no KV cache
    "llama-fp32": dict(base="llama-a", kind="dynamo", opset=18, attn="sdpa"),
    "qwen2-fp32": dict(base="qwen2-a", kind="dynamo", opset=18, attn="eager"),
    "qwen3-fp32": dict(base="qwen3-a", kind="dynamo", opset=20, attn="sdpa"),
    "mistral-fp32": dict(base="mistral-a", kind="dynamo", opset=20, attn="sdpa", inputs=("input_ids",)),
    "phi3-fp32": dict(base="phi3-a", kind="dynamo", opset=18, attn="eager"),
    # decomposed GPT-J-style (interleaved) rotary, see interleaved_rotary()
    "llama-interleaved-fp32": dict(base="llama-d", kind="dynamo", opset=18, attn="sdpa", rope="interleaved"),
    # fp16 plain exports (the external-data one is fp16 too)
    "llama-fp16": dict(base="llama-b", kind="dynamo", opset=18, attn="sdpa", dtype="float16"),
    "qwen2-extdata-fp16": dict(base="qwen2-a", kind="dynamo", opset=18, attn="sdpa", dtype="float16",
                               external_data=True),
    # 2. KV-cache I/O
    "llama-kv-fp32": dict(base="llama-c", kind="dynamo", opset=18, attn="sdpa", kv=True),
    "qwen3-kv-fp32": dict(base="qwen3-b", kind="dynamo", opset=18, attn="sdpa", kv=True),
    "qwen3-kv-ts-fp32": dict(base="qwen3-b", kind="torchscript", opset=17, attn="sdpa", kv=True),
    # 3. ONNX Runtime transformer optimizer / com.microsoft contrib ops
    "llama-kv-ort-fp32": dict(base="llama-c", kind="dynamo", opset=18, attn="sdpa", kv=True,
                              post=("ort", "gpt2")),
    "qwen3-kv-ort-fp32": dict(base="qwen3-b", kind="torchscript", opset=17, attn="sdpa", kv=True,
                              post=("ort", "qwen3")),
    "llama-kv-gqa-fp32": dict(base="llama-c", kind="gqa", opset=18, kv=True),
    # 4. opset-23 ONNX-standard fused ops (and 6. interleaved rotary)
    "llama-opset23-fp32": dict(base="llama-a", kind="dynamo", opset=23, attn="sdpa"),
    "llama-kv-opset23-interleaved-fp32": dict(base="llama-c", kind="dynamo", opset=23, attn="sdpa",
                                              kv=True, rope="interleaved"),
}


def spec_of(name):
    s = dict(MODELS[name])
    s.setdefault("dtype", "float32")
    s.setdefault("kv", False)
    s.setdefault("post", None)
    s.setdefault("rope", "half")
    s.setdefault("external_data", False)
    s.setdefault("inputs", ALL_INPUTS)
    s.setdefault("attn", "sdpa")
    s["name"] = name
    s["b"] = BASES[s["base"]]
    return s


def log(msg):
    print(f"[generate] {msg}", flush=True)


class CorpusError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------------
# HF model construction
# --------------------------------------------------------------------------------------------------

def hf_config(b, attn):
    import transformers as tf

    kw = dict(
        vocab_size=b["vocab"], hidden_size=b["hidden"], intermediate_size=b["inter"],
        num_hidden_layers=b["layers"], num_attention_heads=b["heads"],
        num_key_value_heads=b["kv_heads"], rms_norm_eps=b["eps"], rope_theta=b["theta"],
        tie_word_embeddings=b["tie"], max_position_embeddings=MAX_POS,
        pad_token_id=None, bos_token_id=None, eos_token_id=None,
        attention_dropout=0.0,
    )
    arch = b["arch"]
    if arch in ("llama", "qwen3", "mistral"):
        kw["head_dim"] = b["head_dim"]
    if arch == "llama":
        cfg = tf.LlamaConfig(**kw)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(**kw, use_sliding_window=False)
    elif arch == "qwen3":
        cfg = tf.Qwen3Config(**kw, use_sliding_window=False)
    elif arch == "mistral":
        cfg = tf.MistralConfig(**kw, sliding_window=b.get("window"))
    elif arch == "phi3":
        cfg = tf.Phi3Config(**kw, original_max_position_embeddings=MAX_POS, resid_pdrop=0.0,
                            embd_pdrop=0.0)
    else:
        raise CorpusError(f"unknown arch {arch}")
    cfg._attn_implementation = attn
    return cfg


def cfg_head_dim(cfg):
    hd = getattr(cfg, "head_dim", None)
    return int(hd) if hd else cfg.hidden_size // cfg.num_attention_heads


def cfg_rope_theta(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return float(rp["rope_theta"])
    return float(cfg.rope_theta)


def randomize_(model, seed):
    """Deterministic weights with enough spread that a wrong recovery shows in the logits.

    HF's default init (std 0.02, norm weights exactly 1) makes attention almost uniform and lets the
    exporter de-duplicate all RMSNorm weights into one initializer, so it is replaced here:
    linear/embedding weights ~ N(0, 0.1), biases ~ N(0, 0.1), norm weights ~ U(0.5, 1.5)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if p.dim() == 1 and "norm" in pname:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def build_hf_model(b, attn="sdpa", dtype="float32"):
    import torch
    import transformers as tf

    cfg = hf_config(b, attn)
    torch.manual_seed(b["seed"])
    cls = {
        "llama": tf.LlamaForCausalLM, "qwen2": tf.Qwen2ForCausalLM, "qwen3": tf.Qwen3ForCausalLM,
        "mistral": tf.MistralForCausalLM, "phi3": tf.Phi3ForCausalLM,
    }[b["arch"]]
    model = cls(cfg)
    randomize_(model, b["seed"])
    if b["tie"]:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), \
            "tie_word_embeddings did not tie"
    else:
        assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    model.eval()
    check_hf_model(model, cfg, b)
    if dtype == "float16":
        # HF computes RoPE in fp32 from the inv_freq buffer; keep that buffer fp32 (as a model built
        # in fp32 and loaded with torch_dtype=float16 has it) so rope_theta stays recoverable exactly.
        inv_freq = model.model.rotary_emb.inv_freq.detach().clone()
        model = model.half()
        model.model.rotary_emb.inv_freq = inv_freq
    return model, cfg


def check_hf_model(model, cfg, b):
    """The config.json we write must describe this torch module, so check it does."""
    import torch

    hd = cfg_head_dim(cfg)
    if hd != b["head_dim"]:
        raise CorpusError(f"head_dim {hd} != requested {b['head_dim']}")
    if abs(cfg_rope_theta(cfg) - b["theta"]) > 1e-6 * b["theta"]:
        raise CorpusError("rope_theta not taken from the config")
    inv = model.model.rotary_emb.inv_freq.float()
    want = 1.0 / (b["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if not torch.allclose(inv.double(), want, rtol=1e-5):
        raise CorpusError("model inv_freq does not match rope_theta/head_dim")
    if len(model.model.layers) != b["layers"]:
        raise CorpusError("layer count mismatch")


# --------------------------------------------------------------------------------------------------
# Wrappers that give the exporters flat tensor signatures
# --------------------------------------------------------------------------------------------------

def kv_names(n_layers):
    ins, outs = [], []
    for i in range(n_layers):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outs += [f"present.{i}.key", f"present.{i}.value"]
    return ins, outs


def make_wrappers():
    import torch
    from transformers import DynamicCache

    class LogitsOnly(torch.nn.Module):
        def __init__(self, model, input_names):
            super().__init__()
            self.m = model
            self.input_names = tuple(input_names)

        def forward(self, *args):
            kw = dict(zip(self.input_names, args))
            return self.m(**kw, use_cache=False).logits

    class WithKVCache(torch.nn.Module):
        """input_ids, attention_mask, position_ids, past k/v (flat) -> logits, present k/v (flat)."""

        def __init__(self, model):
            super().__init__()
            self.m = model
            self.n = model.config.num_hidden_layers

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=self.m.config)
            for i in range(self.n):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
            flat = []
            for i in range(self.n):
                layer = out.past_key_values.layers[i]
                flat += [layer.keys, layer.values]
            return (out.logits, *flat)

    return LogitsOnly, WithKVCache


def example_inputs(s, cfg, batch, seq, past, rng, pad_left=0):
    """numpy feeds (dict, ordered like the graph inputs)."""
    feeds = collections.OrderedDict()
    total = past + seq
    feeds["input_ids"] = rng.integers(0, cfg.vocab_size, size=(batch, seq), dtype=np.int64)
    if s["kv"] or "attention_mask" in s["inputs"]:
        mask = np.ones((batch, total if s["kv"] else seq), dtype=np.int64)
        if pad_left:
            mask[0, :pad_left] = 0
        feeds["attention_mask"] = mask
    if s["kv"] or "position_ids" in s["inputs"]:
        feeds["position_ids"] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
    if s["kv"]:
        np_dtype = np.float16 if s["dtype"] == "float16" else np.float32
        hd = cfg_head_dim(cfg)
        ins, _ = kv_names(cfg.num_hidden_layers)
        for n in ins:
            feeds[n] = rng.standard_normal((batch, cfg.num_key_value_heads, past, hd)).astype(np_dtype)
    return feeds


# --------------------------------------------------------------------------------------------------
# Exporters
# --------------------------------------------------------------------------------------------------

def to_torch(feeds):
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in feeds.values())


def export_dynamo(s, model, cfg):
    import torch

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    LogitsOnly, WithKVCache = make_wrappers()
    rng = np.random.default_rng(0)
    B = torch.export.Dim("batch")
    S = torch.export.Dim("sequence")
    if s["kv"]:
        wrapper = WithKVCache(model)
        feeds = example_inputs(s, cfg, batch=2, seq=5, past=3, rng=rng)
        P = torch.export.Dim("past_sequence")
        T = torch.export.Dim("total_sequence")
        kv_in, kv_out = kv_names(cfg.num_hidden_layers)
        dyn = {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: T}, "position_ids": {0: B, 1: S},
               "past": tuple({0: B, 2: P} for _ in kv_in)}
        input_names = list(ALL_INPUTS) + kv_in
        output_names = ["logits"] + kv_out
    else:
        wrapper = LogitsOnly(model, s["inputs"])
        feeds = example_inputs(s, cfg, batch=2, seq=7, past=0, rng=rng)
        # LogitsOnly.forward(*args): dynamic_shapes is then a 1-tuple holding one spec per arg
        dyn = {"args": tuple({0: B, 1: S} for _ in s["inputs"])}
        input_names = list(s["inputs"])
        output_names = ["logits"]
    wrapper.eval()
    with torch.no_grad(), warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(
            wrapper, to_torch(feeds), dynamo=True, opset_version=s["opset"],
            input_names=input_names, output_names=output_names, dynamic_shapes=dyn,
            verbose=False, report=False, external_data=False)
    proto = prog.model_proto
    tidy_dim_names(proto)
    strip_stack_traces(proto)
    strip_wrapper_prefix(proto)
    return proto, wrapper


@contextlib.contextmanager
def legacy_rotary(model):
    """The torchscript export uses the rotary formulation of transformers 4.4x-4.5x:
    freqs = (inv_freq[None, :, None] @ position_ids[:, None, :]).transpose(1, 2)  (MatMul + Transpose)
    Numerically identical to transformers 5's broadcast Mul, but it is the shape of graph that
    onnxruntime's qwen3 RotaryEmbedding fusion recognises."""
    import torch

    cls = type(model.model.rotary_emb)
    original = cls.forward

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(x.dtype), sin.to(x.dtype)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = original


def export_torchscript(s, model, cfg):
    import torch

    LogitsOnly, WithKVCache = make_wrappers()
    rng = np.random.default_rng(0)
    if s["kv"]:
        wrapper = WithKVCache(model)
        feeds = example_inputs(s, cfg, batch=2, seq=5, past=3, rng=rng)
        kv_in, kv_out = kv_names(cfg.num_hidden_layers)
        input_names = list(ALL_INPUTS) + kv_in
        output_names = ["logits"] + kv_out
        dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"},
               "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
        for n in kv_in:
            dyn[n] = {0: "batch", 2: "past_sequence"}
        for n in kv_out:
            dyn[n] = {0: "batch", 2: "total_sequence"}
    else:
        wrapper = LogitsOnly(model, s["inputs"])
        feeds = example_inputs(s, cfg, batch=2, seq=7, past=0, rng=rng)
        input_names = list(s["inputs"])
        output_names = ["logits"]
        dyn = {n: {0: "batch", 1: "sequence"} for n in input_names + output_names}
    wrapper.eval()
    with tempfile.TemporaryDirectory() as td, torch.no_grad(), legacy_rotary(model), \
            warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")
        path = os.path.join(td, "m.onnx")
        torch.onnx.export(wrapper, to_torch(feeds), path, dynamo=False, opset_version=s["opset"],
                          input_names=input_names, output_names=output_names, dynamic_axes=dyn,
                          do_constant_folding=True)
        proto = onnx.load(path)
    strip_wrapper_prefix(proto)
    return proto, wrapper


@contextlib.contextmanager
def quiet():
    """Silences the exporters' progress chatter on stdout (errors still raise)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield


def strip_wrapper_prefix(proto, prefix="m."):
    """The export wrappers hold the HF model as attribute 'm'; drop that prefix from initializer
    names so they read like a direct export of the HF model (model.layers.0..., lm_head.weight)."""
    ren = {t.name: t.name[len(prefix):] for t in proto.graph.initializer if t.name.startswith(prefix)}
    taken = {t.name for t in proto.graph.initializer} | {n for nd in proto.graph.node for n in nd.output}
    ren = {k: v for k, v in ren.items() if v not in taken}
    for t in proto.graph.initializer:
        t.name = ren.get(t.name, t.name)
    for nd in proto.graph.node:
        for i, n in enumerate(nd.input):
            if n in ren:
                nd.input[i] = ren[n]
    for vi in proto.graph.value_info:
        vi.name = ren.get(vi.name, vi.name)


def strip_stack_traces(proto):
    """Drops the per-node 'pkg.torch.onnx.stack_trace' metadata (absolute paths and line numbers of
    this script: not reproducible).  The other metadata (namespace, name_scopes, class_hierarchy,
    fx_node) is kept as real exports carry it."""
    for n in proto.graph.node:
        keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        if len(keep) != len(n.metadata_props):
            del n.metadata_props[:]
            n.metadata_props.extend(keep)


def tidy_dim_names(proto):
    """The dynamo exporter names derived dims by expression ('past_sequence + sequence')."""
    for vi in list(proto.graph.output) + list(proto.graph.input):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param.replace(" ", "") in (
                    "past_sequence+sequence", "sequence+past_sequence"):
                d.dim_param = "total_sequence"


# --------------------------------------------------------------------------------------------------
# onnxruntime transformer optimizer
# --------------------------------------------------------------------------------------------------

def ort_optimize(proto, model_type, cfg):
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    for lg in ("onnxruntime.transformers", "fusion_base", "fusion_utils", "onnx_model", "optimizer",
               "fusion_skiplayernorm", "fusion_rotary_attention", "onnx_model_bert", "fusion_attention"):
        logging.getLogger(lg).setLevel(logging.ERROR)
    opts = FusionOptions(model_type)
    with quiet():
        om = optimize_model(proto, model_type=model_type, num_heads=cfg.num_attention_heads,
                            hidden_size=cfg.hidden_size, optimization_options=opts, opt_level=0,
                            use_gpu=False)
    out = om.model
    truncate_rotary_caches(out, MAX_POS)
    om.topological_sort()
    return out


def truncate_rotary_caches(proto, max_pos):
    """ORT's on-the-fly-RoPE fusion bakes 131072-row cos/sin caches (8 MB here); the models only
    support max_position_embeddings positions, so keep that many rows."""
    inits = {t.name: t for t in proto.graph.initializer}
    done = set()
    for n in proto.graph.node:
        if n.domain == "com.microsoft" and n.op_type in ("RotaryEmbedding", "GroupQueryAttention"):
            idx = (2, 3) if n.op_type == "RotaryEmbedding" else (7, 8)
            for i in idx:
                if i < len(n.input) and n.input[i] in inits and n.input[i] not in done:
                    t = inits[n.input[i]]
                    a = numpy_helper.to_array(t)
                    if a.shape[0] > max_pos:
                        t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a[:max_pos]), t.name))
                    done.add(n.input[i])


# --------------------------------------------------------------------------------------------------
# Interleaved (GPT-J style) rotary variant
# --------------------------------------------------------------------------------------------------

def half_to_interleaved_perm(hd):
    """new[2i] = old[i], new[2i+1] = old[i + hd/2]."""
    p = np.empty(hd, dtype=np.int64)
    p[0::2] = np.arange(hd // 2)
    p[1::2] = np.arange(hd // 2) + hd // 2
    return p


def make_interleaved_copy(model, cfg):
    """Permutes the rows of q_proj/k_proj within every head so that interleaved RoPE on the permuted
    projections equals HF's rotate_half RoPE on the original ones.  Scores q.k are invariant under a
    shared permutation, so the logits and values are unchanged; present keys come out permuted."""
    import torch

    m2 = copy.deepcopy(model)
    hd = cfg_head_dim(cfg)
    perm = torch.from_numpy(half_to_interleaved_perm(hd))
    with torch.no_grad():
        for layer in m2.model.layers:
            att = layer.self_attn
            for proj, nh in ((att.q_proj, cfg.num_attention_heads), (att.k_proj, cfg.num_key_value_heads)):
                w = proj.weight.view(nh, hd, -1)[:, perm, :].reshape(nh * hd, -1).clone()
                proj.weight.copy_(w)
                if proj.bias is not None:
                    proj.bias.copy_(proj.bias.view(nh, hd)[:, perm].reshape(-1).clone())
            for nm in ("q_norm", "k_norm"):
                if hasattr(att, nm):
                    getattr(att, nm).weight.copy_(getattr(att, nm).weight[perm].clone())
    return m2


@contextlib.contextmanager
def interleaved_rotary(model):
    """GPT-J-style (interleaved) rotary in plain torch ops, for the decomposed (opset < 23) exports.

    Patches the rotary embedding's forward (cos/sin = repeat_interleave(2) of the half-width
    frequencies instead of cat((freqs, freqs))) and the modeling module's apply_rotary_pos_emb
    (rotate_every_two instead of rotate_half): x1 = x[..., ::2], x2 = x[..., 1::2],
    rot = stack((-x2, x1), -1).flatten(-2), x_embed = x*cos + rot(x)*sin.  With the q/k rows permuted
    by make_interleaved_copy this computes exactly what the unpatched HF model computes."""
    import torch

    cls = type(model.model.rotary_emb)
    mod = sys.modules[type(model.model.layers[0].self_attn).__module__]
    original_forward = cls.forward
    original_apply = mod.apply_rotary_pos_emb

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = freqs.repeat_interleave(2, dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    def rotate_every_two(x):
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = (q * cos) + (rotate_every_two(q) * sin)
        k_embed = (k * cos) + (rotate_every_two(k) * sin)
        return q_embed, k_embed

    cls.forward = forward
    mod.apply_rotary_pos_emb = apply_rotary_pos_emb
    try:
        yield
    finally:
        cls.forward = original_forward
        mod.apply_rotary_pos_emb = original_apply


def check_decomposed_interleaved(proto):
    """The patched export must carry the interleaved rotary as plain ops: no fused RotaryEmbedding,
    and stride-2 Slices on the head dimension (the even/odd halves of q and k)."""
    if any(n.op_type == "RotaryEmbedding" for n in proto.graph.node):
        raise CorpusError("decomposed interleaved export contains a fused RotaryEmbedding node")
    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    strided = [n for n in proto.graph.node if n.op_type == "Slice" and len(n.input) > 4
               and n.input[4] in consts and np.all(consts[n.input[4]] == 2)]
    want = 4 * sum(1 for n in proto.graph.node if n.op_type == "Softmax")  # q and k, even and odd
    if len(strided) != want:
        raise CorpusError(f"interleaved export: {len(strided)} stride-2 Slices, expected {want}")


def set_rotary_interleaved(proto):
    n_set = 0
    for n in proto.graph.node:
        if n.op_type == "RotaryEmbedding":
            for a in list(n.attribute):
                if a.name == "interleaved":
                    n.attribute.remove(a)
            n.attribute.append(helper.make_attribute("interleaved", 1))
            n_set += 1
    if not n_set:
        raise CorpusError("no RotaryEmbedding node to make interleaved (exporter did not fuse rotary)")
    return n_set


# --------------------------------------------------------------------------------------------------
# Hand-built com.microsoft GroupQueryAttention graph
# --------------------------------------------------------------------------------------------------

def build_gqa_graph(model, cfg, opset):
    """onnx.helper graph of an HF Llama/Mistral/Qwen2 model in the shape ORT GenAI's builder emits:
    SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization, MatMul projections,
    com.microsoft RotaryEmbedding on Q and K, com.microsoft GroupQueryAttention with KV cache,
    SiLU MLP (Sigmoid*Mul), tied-or-untied lm_head MatMul."""
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    L = cfg.num_hidden_layers
    H = cfg.hidden_size
    nh = cfg.num_attention_heads
    nkv = cfg.num_key_value_heads
    hd = cfg_head_dim(cfg)
    eps = float(cfg.rms_norm_eps)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr.astype(np.float32)), name))
        return name

    def node(op, ins, outs, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{len(nodes)}", domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    inv_freq = model.model.rotary_emb.inv_freq.detach().double().numpy()
    freqs = np.outer(np.arange(MAX_POS, dtype=np.float64), inv_freq)  # [MAX_POS, hd/2]
    init("cos_cache", np.cos(freqs))
    init("sin_cache", np.sin(freqs))

    # seqlens_k = sum(attention_mask) - 1 (int32 [B]), total_sequence_length = attention_mask.shape[1]
    inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "one_i64"))
    inits.append(numpy_helper.from_array(np.array(1, dtype=np.int64), "one_scalar_i64"))
    node("ReduceSum", ["attention_mask", "one_i64"], ["mask_sum"], keepdims=0)
    node("Sub", ["mask_sum", "one_i64"], ["mask_sum_m1"])
    node("Cast", ["mask_sum_m1"], ["seqlens_k"], to=TensorProto.INT32)
    node("Shape", ["attention_mask"], ["mask_shape"])
    node("Gather", ["mask_shape", "one_scalar_i64"], ["total_len_i64"], axis=0)
    node("Cast", ["total_len_i64"], ["total_sequence_length"], to=TensorProto.INT32)

    init("model.embed_tokens.weight", sd["model.embed_tokens.weight"])
    x = node("Gather", ["model.embed_tokens.weight", "input_ids"], ["embed"], axis=0)
    residual = None
    pending = x  # tensor to be added to the residual stream before the next norm
    for i in range(L):
        p = f"model.layers.{i}."
        w_in = init(p + "input_layernorm.weight", sd[p + "input_layernorm.weight"])
        if residual is None:
            normed = node("SimplifiedLayerNormalization", [pending, w_in], [p + "input_norm"], axis=-1,
                          epsilon=eps, stash_type=1)
            residual = pending
        else:
            normed, _, _, residual = node("SkipSimplifiedLayerNormalization", [pending, residual, w_in],
                                    [p + "input_norm", "", "", p + "resid_attn"],
                                    domain="com.microsoft", epsilon=eps)
        qkv = []
        for nm in ("q", "k", "v"):
            w = init(p + f"self_attn.{nm}_proj.weight.T", sd[p + f"self_attn.{nm}_proj.weight"].T)
            t = node("MatMul", [normed, w], [p + f"{nm}_mm"])
            bias = p + f"self_attn.{nm}_proj.bias"
            if bias in sd:
                t = node("Add", [t, init(bias, sd[bias])], [p + f"{nm}_lin"])
            qkv.append(t)
        q, k, v = qkv
        q = node("RotaryEmbedding", [q, "position_ids", "cos_cache", "sin_cache"], [p + "q_rot"],
                 domain="com.microsoft", num_heads=nh, interleaved=0)
        k = node("RotaryEmbedding", [k, "position_ids", "cos_cache", "sin_cache"], [p + "k_rot"],
                 domain="com.microsoft", num_heads=nkv, interleaved=0)
        attn, _, _ = node("GroupQueryAttention",
                          [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value",
                           "seqlens_k", "total_sequence_length"],
                          [p + "attn", f"present.{i}.key", f"present.{i}.value"],
                          domain="com.microsoft", num_heads=nh, kv_num_heads=nkv,
                          scale=1.0 / math.sqrt(hd), do_rotary=0)
        wo = init(p + "self_attn.o_proj.weight.T", sd[p + "self_attn.o_proj.weight"].T)
        o = node("MatMul", [attn, wo], [p + "o_proj"])
        w_post = init(p + "post_attention_layernorm.weight", sd[p + "post_attention_layernorm.weight"])
        normed, _, _, residual = node("SkipSimplifiedLayerNormalization", [o, residual, w_post],
                                [p + "post_norm", "", "", p + "resid_mlp"], domain="com.microsoft",
                                epsilon=eps)
        wg = init(p + "mlp.gate_proj.weight.T", sd[p + "mlp.gate_proj.weight"].T)
        wu = init(p + "mlp.up_proj.weight.T", sd[p + "mlp.up_proj.weight"].T)
        wd = init(p + "mlp.down_proj.weight.T", sd[p + "mlp.down_proj.weight"].T)
        gate = node("MatMul", [normed, wg], [p + "gate"])
        sig = node("Sigmoid", [gate], [p + "gate_sigmoid"])
        silu = node("Mul", [gate, sig], [p + "gate_silu"])
        up = node("MatMul", [normed, wu], [p + "up"])
        act = node("Mul", [silu, up], [p + "act"])
        pending = node("MatMul", [act, wd], [p + "down"])
    w_f = init("model.norm.weight", sd["model.norm.weight"])
    final, _, _, _ = node("SkipSimplifiedLayerNormalization", [pending, residual, w_f],
                    ["final_norm", "", "", "resid_final"], domain="com.microsoft", epsilon=eps)
    if cfg.tie_word_embeddings:
        wl = "model.embed_tokens.weight.T"
        nodes.append(helper.make_node("Transpose", ["model.embed_tokens.weight"], [wl], perm=[1, 0],
                                      name="lm_head_transpose"))
    else:
        wl = init("lm_head.weight.T", sd["lm_head.weight"].T)
    node("MatMul", [final, wl], ["logits"])

    f32 = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total_sequence"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "sequence"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch", "sequence", cfg.vocab_size])]
    kv_in, kv_out = kv_names(L)
    for n in kv_in:
        inputs.append(helper.make_tensor_value_info(n, f32, ["batch", nkv, "past_sequence", hd]))
    for n in kv_out:
        outputs.append(helper.make_tensor_value_info(n, f32, ["batch", nkv, "total_sequence", hd]))
    graph = helper.make_graph(nodes, "helm_gqa_" + cfg.model_type, inputs, outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="helm-corpus-generator")
    proto.ir_version = 9
    return proto


# --------------------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------------------

def verify(s, path, reference, cfg):
    """Runs the saved model in ONNX Runtime on several shapes and compares every output with the
    torch reference module.  Returns a summary dict; raises CorpusError on mismatch."""
    import onnxruntime as ort
    import torch

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        raise CorpusError(f"{s['name']}: onnxruntime cannot load the model: {e}") from e
    graph_inputs = [i.name for i in sess.get_inputs()]
    tol = 1e-2 if s["dtype"] == "float16" else 1e-4
    rng = np.random.default_rng(1234)
    if s["kv"]:
        if s["kind"] == "gqa":
            # ORT's CPU GroupQueryAttention: batch must be 1 when seq > 1 and past > 0, and seqlens_k
            # assumes right padding (so no left-padded case)
            cases = [(1, 1, 5, 0), (3, 1, 4, 0), (1, 4, 3, 0), (3, 6, 0, 0), (1, 7, 0, 0)]
        else:
            cases = [(1, 1, 5, 0), (2, 4, 3, 0), (3, 6, 0, 0), (1, 7, 0, 0), (2, 3, 4, 2)]
    else:
        cases = [(1, 1, 0, 0), (2, 7, 0, 0), (3, 13, 0, 0)]
        if "attention_mask" in s["inputs"]:
            cases.append((2, 6, 0, 2))
    worst = 0.0
    for (batch, seq, past, pad) in cases:
        feeds = example_inputs(s, cfg, batch, seq, past, rng, pad_left=pad)
        if list(feeds.keys()) != graph_inputs:
            raise CorpusError(f"{s['name']}: graph inputs {graph_inputs} != expected {list(feeds)}")
        try:
            got = sess.run(None, dict(feeds))
        except Exception as e:  # noqa: BLE001
            raise CorpusError(f"{s['name']}: onnxruntime failed for batch={batch} seq={seq} "
                              f"past={past}: {e}") from e
        with torch.no_grad():
            ref = reference(*to_torch(feeds))
        if not isinstance(ref, (tuple, list)):
            ref = (ref,)
        if len(ref) != len(got):
            raise CorpusError(f"{s['name']}: {len(got)} outputs, reference has {len(ref)}")
        for oi, (g, r) in enumerate(zip(got, ref)):
            r = r.float().numpy()
            g = g.astype(np.float32)
            if g.shape != r.shape:
                raise CorpusError(f"{s['name']}: output {oi} shape {g.shape} != torch {r.shape}")
            if not np.all(np.isfinite(g)):
                raise CorpusError(f"{s['name']}: output {oi} has non-finite values")
            if oi == 0 and pad:
                # rows whose query token is padding are garbage in every implementation
                keep = feeds["attention_mask"][:, -seq:].astype(bool)
                g, r = g[keep], r[keep]
            scale = max(float(np.abs(r).max()), 1e-6)
            err = float(np.abs(g - r).max()) / scale
            worst = max(worst, err)
            if err > tol:
                raise CorpusError(f"{s['name']}: output {oi} ({sess.get_outputs()[oi].name}) differs from "
                                  f"torch: rel err {err:.3g} > {tol} (batch={batch} seq={seq} "
                                  f"past={past} pad={pad})")
    return {"cases": len(cases), "max_rel_err": float(f"{worst:.1e}"), "tolerance": tol}


# --------------------------------------------------------------------------------------------------
# Per-model driver
# --------------------------------------------------------------------------------------------------

def fused_kind(proto):
    ops = {(n.domain, n.op_type) for n in proto.graph.node}
    if any(d == "com.microsoft" for d, _ in ops) or ("", "SimplifiedLayerNormalization") in ops:
        return "ort-contrib"
    if {("", "Attention"), ("", "RMSNormalization"), ("", "RotaryEmbedding")} & ops:
        return "onnx23"
    return "none"


def fused_ops(proto):
    fused = {"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "RotaryEmbedding",
             "GroupQueryAttention", "MultiHeadAttention", "Attention", "RMSNormalization"}
    c = collections.Counter(qual_op(n) for n in proto.graph.node if n.op_type in fused)
    return dict(sorted(c.items()))


def qual_op(n):
    return f"{n.domain or 'ai.onnx'}::{n.op_type}"


def write_config(s, cfg, proto, outdir, summary, checker):
    hd = cfg_head_dim(cfg)
    onnx_opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    exporter = {
        "dynamo": "torch.onnx.export(dynamo=True)",
        "torchscript": "torch.onnx.export(dynamo=False)",
        "gqa": "onnx.helper (hand-built from the HF weights)",
    }[s["kind"]]
    if s["post"]:
        exporter += f" + onnxruntime.transformers.optimizer(model_type={s['post'][1]!r})"
    notes = []
    if s["kind"] == "torchscript":
        notes.append("rotary cos/sin via MatMul(inv_freq, position_ids)+Transpose (transformers 4.4x form)")
    if s["post"] and s["post"][1] == "qwen3":
        notes.append(f"ORT RotaryEmbedding cos/sin caches truncated to {MAX_POS} rows")
    if s["rope"] == "interleaved":
        note = ("q_proj/k_proj rows permuted within each head (new[2i]=old[i], new[2i+1]=old[i+d/2]) "
                "so interleaved RoPE reproduces the HF logits")
        if s["kv"]:
            note += "; present keys are in permuted order"
        notes.append(note)
        if s["opset"] < 23:
            notes.append("decomposed interleaved (GPT-J rotate_every_two) rotary: "
                         "cos/sin = Cos/Sin(Reshape(Expand(Unsqueeze(freqs, [3]), [1,1,1,2]), "
                         "Concat(Shape(freqs, end=-1), [-1]))) (repeat_interleave(2), [B, S, d]); "
                         "per q/k: Mul(x, cos), Slice(x, [0], [INT64_MAX], axes=[3], steps=[2]), "
                         "Slice(x, [1], [INT64_MAX], axes=[3], steps=[2]), Neg(odd), Unsqueeze(-1) x2, "
                         "Concat(-odd, even, axis=-1), Reshape([B, N, S, d]), Mul(., sin), Add")
    if s["kind"] == "gqa":
        notes.append("seqlens_k = ReduceSum(attention_mask)-1, total_sequence_length = shape(attention_mask)[1]; "
                     "right padding only")
    if s["b"]["arch"] == "mistral":
        notes.append(f"sliding_window={s['b'].get('window')}")
    if s["external_data"]:
        notes.append("all float initializers external (size_threshold=0) in model.onnx.data; "
                     "integer shape constants inline")
    if s["kind"] != "gqa":
        notes.append(f"attn_implementation={s['attn']}")
    conf = collections.OrderedDict(
        architecture=s["b"]["arch"],
        num_layers=int(cfg.num_hidden_layers),
        hidden_size=int(cfg.hidden_size),
        num_attention_heads=int(cfg.num_attention_heads),
        num_key_value_heads=int(cfg.num_key_value_heads),
        head_dim=int(hd),
        intermediate_size=int(cfg.intermediate_size),
        vocab_size=int(cfg.vocab_size),
        rope_theta=float(cfg_rope_theta(cfg)),
        rms_norm_eps=float(cfg.rms_norm_eps),
        tie_word_embeddings=bool(cfg.tie_word_embeddings),
        dtype=s["dtype"],
        num_units=int(cfg.num_hidden_layers) + 2,
        corpus=collections.OrderedDict(
            exporter=exporter,
            opset=int(onnx_opset),
            has_kv_cache=bool(s["kv"]),
            fused=fused_kind(proto),
            fused_ops=fused_ops(proto),
            external_data=bool(s["external_data"]),
            rope_style=s["rope"],
            inputs=[i.name for i in proto.graph.input],
            outputs=[o.name for o in proto.graph.output],
            max_position_embeddings=MAX_POS,
            seed=s["b"]["seed"],
            base=s["base"],
            onnx_checker=checker,
            verified=summary,
            notes="; ".join(notes),
        ),
    )
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")


def run_checker(path):
    try:
        onnx.checker.check_model(path)
        return "ok"
    except Exception as e:  # noqa: BLE001
        return "fails: " + str(e).strip().splitlines()[0][:200]


def generate_one(name, out_root):
    import torch

    s = spec_of(name)
    t0 = time.time()
    model, cfg = build_hf_model(s["b"], attn=s["attn"], dtype=s["dtype"])
    LogitsOnly, WithKVCache = make_wrappers()
    if s["kind"] == "gqa":
        proto = build_gqa_graph(model, cfg, s["opset"])
        reference = WithKVCache(model).eval()
    else:
        interleaved = s["rope"] == "interleaved"
        fused_rope = s["opset"] >= 23  # the exporter emits ONNX RotaryEmbedding from opset 23 on
        export_model = make_interleaved_copy(model, cfg) if interleaved else model
        patch = interleaved_rotary(export_model) if interleaved and not fused_rope else contextlib.nullcontext()
        with patch:
            if s["kind"] == "dynamo":
                proto, _ = export_dynamo(s, export_model, cfg)
            else:
                proto, _ = export_torchscript(s, export_model, cfg)
        if interleaved and fused_rope:
            set_rotary_interleaved(proto)
        elif interleaved:
            check_decomposed_interleaved(proto)
        if s["post"] and s["post"][0] == "ort":
            proto = ort_optimize(proto, s["post"][1], cfg)
        # reference: the unmodified HF model
        reference = (WithKVCache(model) if s["kv"] else LogitsOnly(model, s["inputs"])).eval()
        if s["rope"] == "interleaved":
            reference = InterleavedReference(reference, cfg)
    proto.producer_name = proto.producer_name or "helm-corpus-generator"
    proto.doc_string = f"HELM test corpus model {name} (tiny random {s['b']['arch']}, seed {s['b']['seed']})"

    outdir = os.path.join(out_root, name)
    os.makedirs(outdir, exist_ok=True)
    for stale in ("model.onnx", "model.onnx.data"):
        if os.path.exists(os.path.join(outdir, stale)):
            os.remove(os.path.join(outdir, stale))
    path = os.path.join(outdir, "model.onnx")
    if s["external_data"]:
        save_external(proto, path)
        m = onnx.load(path, load_external_data=False)
        floats = [t for t in m.graph.initializer if t.data_type in FLOAT_TYPES]
        bad = [t.name for t in floats if t.data_location != TensorProto.EXTERNAL]
        if not floats or bad:
            raise CorpusError(f"{name}: float initializers not external: {bad[:5]}")
    else:
        onnx.save_model(proto, path)
    for f in os.listdir(outdir):
        os.chmod(os.path.join(outdir, f), 0o644)
    checker = run_checker(path)
    summary = verify(s, path, reference, cfg)
    write_config(s, cfg, onnx.load(path, load_external_data=False), outdir, summary, checker)
    size = sum(os.path.getsize(os.path.join(outdir, f)) for f in os.listdir(outdir))
    log(f"{name}: ok ({size / 1024:.0f} KiB, max rel err {summary['max_rel_err']:.2e}, "
        f"checker {checker.split(':')[0]}, {time.time() - t0:.1f}s)")


FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)


def save_external(proto, path):
    """Every floating-point initializer, whatever its size (size_threshold=0), goes to one file
    model.onnx.data with location/offset/length.  Integer initializers (Unsqueeze axes, Reshape
    shapes, Slice bounds...) stay inline: ONNX Runtime's load-time shape inference cannot read
    external tensors and refuses the model otherwise."""
    from onnx.external_data_helper import convert_model_to_external_data

    convert_model_to_external_data(proto, all_tensors_to_one_file=True, location="model.onnx.data",
                                   size_threshold=0, convert_attribute=False)
    for t in proto.graph.initializer:
        if t.data_type not in FLOAT_TYPES:
            t.data_location = TensorProto.DEFAULT
            del t.external_data[:]
    onnx.save_model(proto, path)


class InterleavedReference:
    """Reference for the interleaved-RoPE model: HF outputs with present keys permuted like the
    exported q/k projections (values and logits are unchanged)."""

    def __init__(self, inner, cfg):
        import torch

        self.inner = inner
        perm = half_to_interleaved_perm(cfg_head_dim(cfg))
        self.perm = torch.from_numpy(perm)
        self.inv = torch.from_numpy(np.argsort(perm))

    def __call__(self, *args):
        # past keys arrive in the exported (permuted) layout: bring them back to HF's layout
        args = list(args)
        for j in range(3, len(args), 2):
            args[j] = args[j][..., self.inv]
        out = self.inner(*args)
        if not isinstance(out, tuple):
            return out
        res = [out[0]]
        for j, t in enumerate(out[1:]):
            res.append(t[..., self.perm] if j % 2 == 0 else t)
        return tuple(res)


# --------------------------------------------------------------------------------------------------
# Histograms and README table (from what is on disk)
# --------------------------------------------------------------------------------------------------

def model_dirs(out_root):
    names = [n for n in MODELS if os.path.exists(os.path.join(out_root, n, "model.onnx"))]
    extra = sorted(d for d in os.listdir(out_root)
                   if d not in MODELS and os.path.exists(os.path.join(out_root, d, "model.onnx")))
    return names + extra


def write_histograms(out_root):
    lines = ["# op_type histograms of every model in test/models (generated by generate.py; do not edit)",
             "# format: count  domain::op_type   (ai.onnx = default domain; note ORT registers its contrib",
             "# SimplifiedLayerNormalization in the default domain, so it appears as ai.onnx::)", ""]
    for name in model_dirs(out_root):
        m = onnx.load(os.path.join(out_root, name, "model.onnx"), load_external_data=False)
        c = collections.Counter(qual_op(n) for n in m.graph.node)
        opsets = ", ".join(f"{o.domain or 'ai.onnx'}={o.version}" for o in m.opset_import)
        lines.append(f"== {name}  ({len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers; "
                     f"opsets: {opsets})")
        for op, k in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {k:4d}  {op}")
        lines.append("")
    with open(os.path.join(out_root, "op_histograms.txt"), "w") as f:
        f.write("\n".join(lines))


TABLE_BEGIN = "<!-- models-table-begin (generated by generate.py) -->"
TABLE_END = "<!-- models-table-end -->"


def readme_table(out_root):
    rows = ["| name | arch | exporter | opset | kv-cache | fused ops | dtype | ext. data | rope | "
            "layers/hidden/heads/kv_heads/head_dim | size |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    short = {"torch.onnx.export(dynamo=True)": "dynamo", "torch.onnx.export(dynamo=False)": "torchscript"}
    for name in model_dirs(out_root):
        d = os.path.join(out_root, name)
        cpath = os.path.join(d, "config.json")
        if not os.path.exists(cpath):
            continue
        with open(cpath) as f:
            c = json.load(f)
        cc = c["corpus"]
        exp = cc["exporter"]
        for k, v in short.items():
            exp = exp.replace(k, v)
        exp = exp.replace("onnxruntime.transformers.optimizer", "ORT optimizer")
        exp = exp.replace("onnx.helper (hand-built from the HF weights)", "onnx.helper (hand-built)")
        fused = ", ".join(f"{k.replace('ai.onnx::', '')}×{v}" for k, v in cc["fused_ops"].items()) or "—"
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        rows.append(
            f"| `{name}` | {c['architecture']} | {exp} | {cc['opset']} | {'yes' if cc['has_kv_cache'] else 'no'} "
            f"| {fused} | {c['dtype']} | {'yes' if cc['external_data'] else 'no'} | {cc['rope_style']} "
            f"| {c['num_layers']}/{c['hidden_size']}/{c['num_attention_heads']}/{c['num_key_value_heads']}"
            f"/{c['head_dim']} | {size / 1024:.0f} KiB |")
    return "\n".join(rows)


def update_readme(out_root):
    path = os.path.join(out_root, "README.md")
    if not os.path.exists(path):
        return
    with open(path) as f:
        text = f.read()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        return
    head, rest = text.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    with open(path, "w") as f:
        f.write(head + TABLE_BEGIN + "\n" + readme_table(out_root) + "\n" + TABLE_END + tail)


# --------------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="output root (default: the folder of this script)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="generate only NAME (repeatable)")
    ap.add_argument("--histograms", action="store_true",
                    help="only rewrite op_histograms.txt and the README table from the models on disk")
    ap.add_argument("--list", action="store_true", help="list the model names and exit")
    args = ap.parse_args(argv)

    if args.list:
        for n in MODELS:
            print(n)
        return 0
    os.makedirs(args.out, exist_ok=True)
    if not args.histograms:
        import torch

        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        names = args.only or list(MODELS)
        unknown = [n for n in names if n not in MODELS]
        if unknown:
            ap.error(f"unknown model(s) {unknown}; try --list")
        t0 = time.time()
        for n in names:
            try:
                generate_one(n, args.out)
            except CorpusError as e:
                log(f"FAILED: {e}")
                return 1
        log(f"{len(names)} model(s) in {time.time() - t0:.0f}s")
    write_histograms(args.out)
    update_readme(args.out)
    total = 0
    for root, _, files in os.walk(args.out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    log(f"wrote op_histograms.txt; {args.out} holds {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
