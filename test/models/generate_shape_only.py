#!/usr/bin/env python3
"""Writes shape-only ONNX exports of the real Qwen3-4B/8B/14B/32B under test/models/shape-only/.

Each <out>/<name>/model.onnx is a real `torch.onnx.export(dynamo=True)` graph of transformers'
`Qwen3ForCausalLM` built from the published Hugging Face config (all layers, real shapes, bfloat16
weights), in the style of the corpus model `qwen3-fp32` (opset 20, sdpa attention, inputs
input_ids/attention_mask/position_ids, output logits, dynamic batch/sequence).  The weights are
declared but not stored: every initializer with more than 64 elements is an external-data reference
(location `model.onnx.data`, offset/length laid out consecutively in initializer order) and
`model.onnx.data` is never written.  Initializers with at most 64 elements (shape constants, scalars,
the 64-element `model.rotary_emb.inv_freq`) are inline with their real values.  The files exist so
that the planner can be tested on real model sizes without weight bytes. They are stored as
model.onnx.xz; the lit tests unpack them into the build tree (%shape_only).

How no weight is materialised:
  1. the model is constructed inside torch's FakeTensorMode (`_from_config(dtype=bfloat16)`, as
     `from_pretrained(dtype=bfloat16)` builds it: bf16 parameters, fp32 inv_freq buffer), so every
     parameter is a FakeTensor (shape/dtype only, no storage);
  2. it is exported with `torch.onnx.export(dynamo=True, optimize=False)` (torch.export traces with
     the fake parameters);
  3. the initializers' fake values are replaced by zero-stride numpy views (`np.broadcast_to` of
     one scalar; tensors of <= 1024 elements, i.e. the RMSNorm weights the optimizer's
     de-duplication looks at, get small distinct random values; inv_freq gets its real values) and
     the exporter's own optimizer (`onnxscript_apis.optimize`, what `optimize=True` runs) is applied.
     Its constant folding turns `Transpose(W)` into the pre-transposed `val_N` initializers, which
     for a zero-stride view is again a view, so no weight-sized buffer is ever allocated;
  4. every initializer above 64 elements is replaced by an `onnx_ir.ExternalTensor` (no file is
     read or written) before serialisation.
For small configurations this pipeline gives exactly the graph (nodes, attributes, initializer
names/dtypes/shapes, value_info) of a normal export of a real-weight bf16 model: see `--self-check`.

config.json has the corpus' top-level keys (taken from the HF config, never from the graph) plus a
`corpus` object with `"shape_only": true`, the external-data byte count and the weight-byte
breakdown (embedding, per block, final norm, lm_head) for cross-checking the planner.

  python test/models/generate_shape_only.py                     # all four (about 15 min on 2 cores, 1-2 GB RAM)
  python test/models/generate_shape_only.py --only qwen3-4b     # one (repeatable)
  python test/models/generate_shape_only.py --self-check        # fake pipeline == real export, tiny
  python test/models/generate_shape_only.py --list
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import lzma
import math
import os
import re
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate as corpus  # noqa: E402  (shared helpers: wrappers, name/metadata tidying)

INLINE_MAX_ELEMENTS = 64  # initializers with more elements become external references
EXTERNAL_LOCATION = "model.onnx.data"
OPSET = 20  # as qwen3-fp32

# Published config.json of Qwen/Qwen3-{4B,8B,14B,32B} on the Hugging Face hub (transformers 4.51.0).
# Fields common to all four:
QWEN3_COMMON = dict(
    architectures=["Qwen3ForCausalLM"], model_type="qwen3", attention_bias=False, attention_dropout=0.0,
    bos_token_id=151643, eos_token_id=151645, head_dim=128, hidden_act="silu", initializer_range=0.02,
    max_position_embeddings=40960, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=1000000.0,
    sliding_window=None, use_sliding_window=False, torch_dtype="bfloat16", use_cache=True,
    vocab_size=151936,
)
MODELS = {
    "qwen3-4b": dict(hf="Qwen/Qwen3-4B", hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, max_window_layers=36,
                     tie_word_embeddings=True),
    "qwen3-8b": dict(hf="Qwen/Qwen3-8B", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, max_window_layers=36,
                     tie_word_embeddings=False),
    "qwen3-14b": dict(hf="Qwen/Qwen3-14B", hidden_size=5120, intermediate_size=17408, num_hidden_layers=40,
                      num_attention_heads=40, num_key_value_heads=8, max_window_layers=40,
                      tie_word_embeddings=False),
    "qwen3-32b": dict(hf="Qwen/Qwen3-32B", hidden_size=5120, intermediate_size=25600, num_hidden_layers=64,
                      num_attention_heads=64, num_key_value_heads=8, max_window_layers=64,
                      tie_word_embeddings=False),
}


def log(msg):
    print(f"[shape-only] {msg}", flush=True)


class ShapeOnlyError(RuntimeError):
    pass


def published_config(name):
    c = dict(QWEN3_COMMON)
    c.update({k: v for k, v in MODELS[name].items() if k != "hf"})
    return c


def hf_config(c):
    import transformers as tf

    cfg = tf.Qwen3Config(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], head_dim=c["head_dim"], hidden_act=c["hidden_act"],
        max_position_embeddings=c["max_position_embeddings"], initializer_range=c["initializer_range"],
        rms_norm_eps=c["rms_norm_eps"], rope_theta=c["rope_theta"], attention_bias=c["attention_bias"],
        attention_dropout=c["attention_dropout"], use_sliding_window=c["use_sliding_window"],
        sliding_window=c["sliding_window"], max_window_layers=c["max_window_layers"],
        tie_word_embeddings=c["tie_word_embeddings"], bos_token_id=c["bos_token_id"],
        eos_token_id=c["eos_token_id"], use_cache=c["use_cache"],
    )
    cfg._attn_implementation = "sdpa"  # as qwen3-fp32
    return cfg


def check_hf_config(cfg, c):
    """The config.json we write must describe the module we export."""
    want = {"hidden_size": "hidden_size", "intermediate_size": "intermediate_size",
            "num_hidden_layers": "num_hidden_layers", "num_attention_heads": "num_attention_heads",
            "num_key_value_heads": "num_key_value_heads", "vocab_size": "vocab_size",
            "rms_norm_eps": "rms_norm_eps", "tie_word_embeddings": "tie_word_embeddings"}
    for attr, key in want.items():
        if getattr(cfg, attr) != c[key]:
            raise ShapeOnlyError(f"HF config {attr}={getattr(cfg, attr)} != published {c[key]}")
    if corpus.cfg_head_dim(cfg) != c["head_dim"]:
        raise ShapeOnlyError("head_dim not taken from the config")
    if abs(corpus.cfg_rope_theta(cfg) - c["rope_theta"]) > 1e-6 * c["rope_theta"]:
        raise ShapeOnlyError("rope_theta not taken from the config")


# --------------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------------

def fake_model(cfg):
    """Qwen3ForCausalLM with FakeTensor parameters: bf16 weights, fp32 inv_freq, no storage."""
    import torch
    import transformers as tf
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        model = tf.Qwen3ForCausalLM._from_config(cfg, dtype=torch.bfloat16)
    model.eval()
    for n, p in list(model.named_parameters()) + list(model.named_buffers()):
        if not is_fake(p):
            raise ShapeOnlyError(f"{n} is not a fake tensor")
    if cfg.tie_word_embeddings:
        if model.lm_head.weight is not model.model.embed_tokens.weight:
            raise ShapeOnlyError("tie_word_embeddings did not tie")
    elif model.lm_head.weight is model.model.embed_tokens.weight:
        raise ShapeOnlyError("untied model has a tied head")
    if model.model.rotary_emb.inv_freq.dtype != torch.float32:
        raise ShapeOnlyError("inv_freq is not float32")
    return model


def real_inv_freq(cfg):
    """inv_freq with real values, from transformers' own rotary module (64 floats)."""
    import transformers as tf

    inv = tf.models.qwen3.modeling_qwen3.Qwen3RotaryEmbedding(cfg).inv_freq.detach().float().numpy()
    hd = corpus.cfg_head_dim(cfg)
    want = 1.0 / (corpus.cfg_rope_theta(cfg) ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    if not np.allclose(inv.astype(np.float64), want, rtol=1e-6):
        raise ShapeOnlyError("inv_freq does not match rope_theta/head_dim")
    return inv


def export_unoptimized(model):
    """torch.onnx.export(dynamo=True) of the corpus' LogitsOnly wrapper, without the optimizer."""
    import torch

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    LogitsOnly, _ = corpus.make_wrappers()
    wrapper = LogitsOnly(model, corpus.ALL_INPUTS).eval()
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, model.config.vocab_size, size=(2, 7), dtype=np.int64))
    mask = torch.ones((2, 7), dtype=torch.int64)
    pos = torch.arange(7, dtype=torch.int64).repeat(2, 1)
    B = torch.export.Dim("batch")
    S = torch.export.Dim("sequence")
    with torch.no_grad(), warnings.catch_warnings(), corpus.quiet():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(
            wrapper, (ids, mask, pos), dynamo=True, opset_version=OPSET,
            input_names=list(corpus.ALL_INPUTS), output_names=["logits"],
            dynamic_shapes={"args": tuple({0: B, 1: S} for _ in corpus.ALL_INPUTS)},
            verbose=False, report=False, external_data=False, optimize=False)
    return prog


def placeholder_weights(ir_model, inv_freq):
    """Replaces the fake initializer values by storage-free numpy views (see module docstring).
    Returns {initializer name: kind}."""
    import onnx_ir as ir

    rng = np.random.default_rng(0)
    kinds = {}
    for i, v in enumerate(ir_model.graph.initializers.values()):
        shape = tuple(int(d) for d in v.shape)
        npdt = v.dtype.numpy()
        if v.name.endswith("rotary_emb.inv_freq"):
            if shape != inv_freq.shape or v.dtype != ir.DataType.FLOAT:
                raise ShapeOnlyError(f"unexpected inv_freq {v.dtype} {shape}")
            arr = inv_freq.astype(np.float32)
            kinds[v.name] = "real"
        elif math.prod(shape) <= 1024:
            # distinct values, as a trained checkpoint has (the de-duplication pass compares these)
            arr = (rng.random(shape) + 0.5).astype(npdt)
            kinds[v.name] = "weight"
        else:
            arr = np.broadcast_to(np.array(0.01 * (i + 1), dtype=npdt), shape)
            kinds[v.name] = "weight"
        v.const_value = ir.Tensor(arr, name=v.name)
    return kinds


def optimize(ir_model):
    """What torch.onnx.export(optimize=True) runs on the exported model."""
    from torch.onnx._internal._lazy_import import onnxscript_apis

    for lg in ("onnxscript", "onnx_ir"):
        logging.getLogger(lg).setLevel(logging.ERROR)
    onnxscript_apis.optimize(ir_model)


def externalize(ir_model, weight_names):
    """Every initializer above INLINE_MAX_ELEMENTS becomes an ExternalTensor reference, offsets
    consecutive in initializer order.  Returns the list of (name, dtype, shape, offset, length,
    sources) and checks that exactly the weights (and their folded transposes) went external."""
    import onnx_ir as ir
    from onnxscript.optimizer._constant_folding import FOLDED_FROM_KEY

    offset = 0
    table = []
    for v in ir_model.graph.initializers.values():
        shape = tuple(int(d) for d in v.shape)
        n = math.prod(shape)
        sources = sorted(v.meta.get(FOLDED_FROM_KEY, set())) or [v.name]
        from_weight = any(weight_names.get(s) == "weight" for s in sources)
        if n <= INLINE_MAX_ELEMENTS:
            if from_weight:
                raise ShapeOnlyError(f"small initializer {v.name} {shape} derives from weights {sources}")
            continue
        if not from_weight:
            raise ShapeOnlyError(f"large initializer {v.name} {shape} is not a weight ({sources}); "
                                 "its values would be lost")
        length = int(n * v.dtype.itemsize)
        v.const_value = ir.ExternalTensor(EXTERNAL_LOCATION, offset, length, v.dtype,
                                          shape=ir.Shape(shape), name=v.name)
        table.append(dict(name=v.name, dtype=v.dtype.name, shape=list(shape), offset=offset,
                          length=length, sources=sources))
        offset += length
    return table


def to_proto(ir_model):
    import onnx_ir as ir

    proto = ir.serde.serialize_model(ir_model)
    corpus.tidy_dim_names(proto)
    corpus.strip_stack_traces(proto)
    corpus.strip_wrapper_prefix(proto)
    return proto


# --------------------------------------------------------------------------------------------------
# Checks and accounting on the written file
# --------------------------------------------------------------------------------------------------

ELEM_BYTES = {TensorProto.FLOAT: 4, TensorProto.FLOAT16: 2, TensorProto.BFLOAT16: 2, TensorProto.DOUBLE: 8,
              TensorProto.INT64: 8, TensorProto.INT32: 4, TensorProto.INT8: 1, TensorProto.UINT8: 1,
              TensorProto.BOOL: 1}


def tensor_bytes(t):
    return math.prod(t.dims) * ELEM_BYTES[t.data_type]


def check_external_layout(proto, outdir):
    """Every initializer above 64 elements: EXTERNAL, location model.onnx.data, offset/length exact,
    consecutive from 0; the rest inline with data; the data file absent."""
    offset = 0
    n_ext = n_inline = 0
    for t in proto.graph.initializer:
        n = math.prod(t.dims)
        if n > INLINE_MAX_ELEMENTS:
            if t.data_location != TensorProto.EXTERNAL or t.HasField("raw_data"):
                raise ShapeOnlyError(f"{t.name}: not an external reference")
            kv = {e.key: e.value for e in t.external_data}
            if kv.get("location") != EXTERNAL_LOCATION:
                raise ShapeOnlyError(f"{t.name}: location {kv.get('location')}")
            if int(kv["offset"]) != offset or int(kv["length"]) != tensor_bytes(t):
                raise ShapeOnlyError(f"{t.name}: offset/length {kv} (expected {offset}, {tensor_bytes(t)})")
            offset += int(kv["length"])
            n_ext += 1
        else:
            if t.data_location == TensorProto.EXTERNAL:
                raise ShapeOnlyError(f"{t.name}: small initializer is external")
            arr = onnx.numpy_helper.to_array(t)  # raises if the data is missing
            if arr.size != n:
                raise ShapeOnlyError(f"{t.name}: inline data has {arr.size} elements, dims say {n}")
            n_inline += 1
    if os.path.exists(os.path.join(outdir, EXTERNAL_LOCATION)):
        raise ShapeOnlyError(f"{EXTERNAL_LOCATION} must not exist")
    return offset, n_ext, n_inline


UNIT_RE = re.compile(r"^(?:m\.)?model\.layers\.(\d+)(?:\.|$)")


def unit_of_scopes(scopes):
    """Maps a node's pkg.torch.onnx.name_scopes to a unit: ('block', i) / 'embedding' / 'final_norm' /
    'lm_head' / None."""
    for s in reversed(scopes):
        m = UNIT_RE.match(s)
        if m:
            return ("block", int(m.group(1)))
        s2 = s[2:] if s.startswith("m.") else s
        if s2 == "model.embed_tokens":
            return "embedding"
        if s2 == "model.norm":
            return "final_norm"
        if s2 == "lm_head":
            return "lm_head"
    return None


def weight_accounting(proto, n_layers):
    """Attributes every external initializer to the unit(s) of the nodes that consume it (from the
    exporter's per-node name_scopes metadata, never from initializer names)."""
    ext = {t.name: tensor_bytes(t) for t in proto.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    units_of = collections.defaultdict(set)
    for node in proto.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        scopes = eval(meta.get("pkg.torch.onnx.name_scopes", "[]"), {})  # a repr'd list of str
        u = unit_of_scopes(scopes)
        for i in node.input:
            if i in ext:
                units_of[i].add(u)
    per_block = collections.Counter()
    acc = collections.Counter()
    for name, nbytes in ext.items():
        us = units_of.get(name, set())
        if us == {"embedding", "lm_head"}:
            acc["embedding"] += nbytes  # tied: one table feeds the Gather and the head MatMul
            acc["tied_lm_head"] += nbytes
        elif len(us) != 1 or None in us:
            raise ShapeOnlyError(f"cannot attribute {name} to one unit: {us}")
        else:
            (u,) = us
            if isinstance(u, tuple):
                per_block[u[1]] += nbytes
            else:
                acc[u] += nbytes
    blocks = [per_block[i] for i in range(n_layers)]
    if len(set(blocks)) != 1 or len(per_block) != n_layers:
        raise ShapeOnlyError(f"blocks differ in weight bytes: {sorted(set(blocks))}")
    total = sum(ext.values())
    if total != acc["embedding"] + acc["final_norm"] + acc["lm_head"] + sum(blocks):
        raise ShapeOnlyError("unattributed external bytes")
    return dict(total=total, embedding=acc["embedding"], per_block=blocks[0], blocks=sum(blocks),
                final_norm=acc["final_norm"], lm_head=acc["lm_head"] if not acc["tied_lm_head"] else 0,
                lm_head_tied=bool(acc["tied_lm_head"]))


def expected_weight_bytes(c, itemsize=2):
    """Closed-form parameter bytes of Qwen3ForCausalLM from the config (bf16)."""
    H, I, V, D = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    Nq, Nkv, L = c["num_attention_heads"], c["num_key_value_heads"], c["num_hidden_layers"]
    block = (H * Nq * D + 2 * H * Nkv * D + Nq * D * H  # q, k, v, o
             + 3 * H * I                                  # gate, up, down
             + 2 * H + 2 * D) * itemsize                  # input/post-attention norm, q_norm, k_norm
    emb = V * H * itemsize
    head = 0 if c["tie_word_embeddings"] else V * H * itemsize
    final_norm = H * itemsize
    return dict(total=emb + L * block + final_norm + head, embedding=emb, per_block=block,
                blocks=L * block, final_norm=final_norm, lm_head=head,
                lm_head_tied=bool(c["tie_word_embeddings"]))


def run_checker(path, ext_bytes):
    """onnx.checker insists that every external location is a regular file, so it fails on the
    model as shipped.  It is run (with full_check, i.e. strict shape/type inference) a second time on
    a temporary copy next to a sparse, all-zero model.onnx.data of the declared size (os.truncate:
    no disk blocks are written)."""
    import shutil
    import tempfile

    def check(p):
        try:
            onnx.checker.check_model(p, full_check=True)
            return "ok"
        except Exception as e:  # noqa: BLE001
            return "fails: " + str(e).strip().splitlines()[0][:200]

    res = {"as_shipped": check(path).replace(os.path.dirname(os.path.abspath(path)) + os.sep, "")}
    with tempfile.TemporaryDirectory() as td:
        shutil.copy(path, os.path.join(td, "model.onnx"))
        with open(os.path.join(td, EXTERNAL_LOCATION), "wb") as f:
            f.truncate(ext_bytes)
        res["with_sparse_data_file"] = check(os.path.join(td, "model.onnx"))
    return res


# --------------------------------------------------------------------------------------------------
# Per-model driver
# --------------------------------------------------------------------------------------------------

def generate_one(name, out_root):
    t0 = time.time()
    c = published_config(name)
    cfg = hf_config(c)
    check_hf_config(cfg, c)
    model = fake_model(cfg)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # tied counted once
    prog = export_unoptimized(model)
    t_export = time.time() - t0
    kinds = placeholder_weights(prog.model, real_inv_freq(cfg))
    optimize(prog.model)
    table = externalize(prog.model, kinds)
    proto = to_proto(prog.model)
    del prog, model
    proto.producer_name = proto.producer_name or "helm-corpus-generator"
    proto.doc_string = (f"HELM shape-only model {name}: {MODELS[name]['hf']} config, bf16 weights declared "
                        f"as external data ({EXTERNAL_LOCATION}, not written)")

    outdir = os.path.join(out_root, name)
    os.makedirs(outdir, exist_ok=True)
    for stale in ("model.onnx", "model.onnx.xz", EXTERNAL_LOCATION):
        if os.path.exists(os.path.join(outdir, stale)):
            os.remove(os.path.join(outdir, stale))
    path = os.path.join(outdir, "model.onnx")
    with open(path, "wb") as f:  # not onnx.save_model: nothing may touch external data
        f.write(proto.SerializeToString())
    os.chmod(path, 0o644)

    m = onnx.load(path, load_external_data=False)
    ext_bytes, n_ext, n_inline = check_external_layout(m, outdir)
    if n_ext != len(table) or ext_bytes != sum(r["length"] for r in table):
        raise ShapeOnlyError(f"{name}: written external references differ from the ones assigned")
    acc = weight_accounting(m, c["num_hidden_layers"])
    want = expected_weight_bytes(c)
    if acc != want:
        raise ShapeOnlyError(f"{name}: weight bytes from the graph {acc} != from the config {want}")
    if ext_bytes != param_bytes or ext_bytes != acc["total"]:
        raise ShapeOnlyError(f"{name}: external bytes {ext_bytes} != torch parameter bytes {param_bytes}")
    inline_bytes = sum(tensor_bytes(t) for t in m.graph.initializer if t.data_location != TensorProto.EXTERNAL)
    checker = run_checker(path, ext_bytes)
    inv = [t for t in m.graph.initializer if t.name == "model.rotary_emb.inv_freq"]
    if not inv or inv[0].data_location == TensorProto.EXTERNAL:
        raise ShapeOnlyError("model.rotary_emb.inv_freq missing or external")
    dtypes = collections.Counter(TensorProto.DataType.Name(t.data_type) for t in m.graph.initializer
                                 if t.data_location == TensorProto.EXTERNAL)
    write_config(name, c, cfg, m, outdir, checker, acc, ext_bytes, n_ext, n_inline, inline_bytes, dtypes)
    size = os.path.getsize(path)
    # Kept in the repository compressed (a graph of repeated layers: 7.4 MB -> 145 KB for 32B); the
    # lit configuration unpacks it into the build tree (test/lit/lit.cfg.py, %shape_only).
    with open(path, "rb") as f:
        packed = lzma.compress(f.read(), preset=9 | lzma.PRESET_EXTREME)
    with open(path + ".xz", "wb") as f:
        f.write(packed)
    os.remove(path)
    log(f"{name}: ok  model.onnx {size / 2**20:.2f} MiB ({len(packed) / 2**10:.0f} KiB as model.onnx.xz), {len(m.graph.node)} nodes, {n_ext} external "
        f"+ {n_inline} inline initializers, export {t_export:.0f}s, total {time.time() - t0:.0f}s")
    log(f"{name}: weight bytes total {acc['total']:,} ({acc['total'] / 2**30:.3f} GiB), "
        f"per block {acc['per_block']:,}, embedding {acc['embedding']:,}, final norm {acc['final_norm']:,}, "
        f"lm_head {'tied to the embedding' if acc['lm_head_tied'] else format(acc['lm_head'], ',')}; "
        f"inline {inline_bytes:,} bytes; checker {checker}")
    return dict(name=name, size=size, nodes=len(m.graph.node), **acc, inline=inline_bytes)


def write_config(name, c, cfg, proto, outdir, checker, acc, ext_bytes, n_ext, n_inline, inline_bytes, dtypes):
    onnx_opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    conf = collections.OrderedDict(
        architecture="qwen3",
        num_layers=int(cfg.num_hidden_layers),
        hidden_size=int(cfg.hidden_size),
        num_attention_heads=int(cfg.num_attention_heads),
        num_key_value_heads=int(cfg.num_key_value_heads),
        head_dim=int(corpus.cfg_head_dim(cfg)),
        intermediate_size=int(cfg.intermediate_size),
        vocab_size=int(cfg.vocab_size),
        rope_theta=float(corpus.cfg_rope_theta(cfg)),
        rms_norm_eps=float(cfg.rms_norm_eps),
        tie_word_embeddings=bool(cfg.tie_word_embeddings),
        dtype="bfloat16",
        num_units=int(cfg.num_hidden_layers) + 2,
        corpus=collections.OrderedDict(
            shape_only=True,
            hf_model=MODELS[name]["hf"],
            exporter="torch.onnx.export(dynamo=True) of a FakeTensorMode model, + onnxscript optimizer",
            opset=int(onnx_opset),
            has_kv_cache=False,
            fused=corpus.fused_kind(proto),
            fused_ops=corpus.fused_ops(proto),
            external_data=True,
            external_data_file=EXTERNAL_LOCATION,
            external_data_present=False,
            external_data_bytes=int(ext_bytes),
            external_initializers=int(n_ext),
            external_dtypes=dict(sorted(dtypes.items())),
            inline_initializers=int(n_inline),
            inline_initializer_bytes=int(inline_bytes),
            weight_bytes=collections.OrderedDict(
                total=int(acc["total"]), embedding=int(acc["embedding"]), per_block=int(acc["per_block"]),
                all_blocks=int(acc["blocks"]), final_norm=int(acc["final_norm"]),
                lm_head=int(acc["lm_head"]), lm_head_tied=bool(acc["lm_head_tied"])),
            rope_style="half",
            inputs=[i.name for i in proto.graph.input],
            outputs=[o.name for o in proto.graph.output],
            max_position_embeddings=int(c["max_position_embeddings"]),
            onnx_checker=checker,
            verified=None,
            notes=(f"initializers with more than {INLINE_MAX_ELEMENTS} elements are external references "
                   f"laid out consecutively (no alignment padding) in {EXTERNAL_LOCATION}, which is not "
                   "written; smaller ones (shape constants, scalars, model.rotary_emb.inv_freq) are "
                   "inline with real values; not run with ONNX Runtime (no weights); attn_implementation=sdpa"),
        ),
    )
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    os.chmod(os.path.join(outdir, "config.json"), 0o644)


# --------------------------------------------------------------------------------------------------
# Self-check: the fake pipeline reproduces a real-weight export
# --------------------------------------------------------------------------------------------------

def self_check():
    """On small bf16 Qwen3 configs (tied and untied, weights above and below the folder's size
    limits), the fake-tensor pipeline must give exactly the graph of a normal
    torch.onnx.export(dynamo=True, optimize=True) of the same model with real weights."""
    import onnx_ir as ir
    import torch
    import transformers as tf

    LogitsOnly, _ = corpus.make_wrappers()
    ok = True
    for tie in (True, False):
        c = published_config("qwen3-4b")
        c.update(hidden_size=256, intermediate_size=704, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1536, max_window_layers=3, tie_word_embeddings=tie)
        cfg = hf_config(c)
        torch.manual_seed(0)
        real_model = tf.Qwen3ForCausalLM._from_config(cfg, dtype=torch.bfloat16)
        corpus.randomize_(real_model, 1)
        if tie:
            real_model.tie_weights()
        real_model.eval()
        rng = np.random.default_rng(0)
        args = (torch.from_numpy(rng.integers(0, c["vocab_size"], size=(2, 7), dtype=np.int64)),
                torch.ones((2, 7), dtype=torch.int64), torch.arange(7, dtype=torch.int64).repeat(2, 1))
        B, S = torch.export.Dim("batch"), torch.export.Dim("sequence")
        with torch.no_grad(), warnings.catch_warnings(), corpus.quiet():
            warnings.simplefilter("ignore")
            ref = torch.onnx.export(
                LogitsOnly(real_model, corpus.ALL_INPUTS).eval(), args, dynamo=True, opset_version=OPSET,
                input_names=list(corpus.ALL_INPUTS), output_names=["logits"],
                dynamic_shapes={"args": tuple({0: B, 1: S} for _ in corpus.ALL_INPUTS)},
                verbose=False, report=False, external_data=False).model_proto
        prog = export_unoptimized(fake_model(cfg))
        placeholder_weights(prog.model, real_inv_freq(cfg))
        optimize(prog.model)
        got = ir.serde.serialize_model(prog.model)

        def summary(p):
            nodes = [(n.op_type, n.domain, tuple(n.input), tuple(n.output),
                      tuple(a.SerializeToString() for a in n.attribute)) for n in p.graph.node]
            inits = [(t.name, t.data_type, tuple(t.dims)) for t in p.graph.initializer]
            return nodes, inits, list(p.graph.input), list(p.graph.output), list(p.graph.value_info)

        same = summary(ref) == summary(got)
        inv_ref = [onnx.numpy_helper.to_array(t) for t in ref.graph.initializer if t.name.endswith("inv_freq")]
        inv_got = [onnx.numpy_helper.to_array(t) for t in got.graph.initializer if t.name.endswith("inv_freq")]
        same = same and len(inv_ref) == 1 and np.array_equal(inv_ref[0], inv_got[0])
        small_ref = {t.name: t.raw_data for t in ref.graph.initializer if math.prod(t.dims) <= INLINE_MAX_ELEMENTS}
        small_got = {t.name: t.raw_data for t in got.graph.initializer if math.prod(t.dims) <= INLINE_MAX_ELEMENTS}
        same = same and small_ref == small_got
        log(f"self-check tie={tie}: {len(ref.graph.node)} nodes, {len(ref.graph.initializer)} initializers: "
            f"{'identical' if same else 'DIFFERENT'}")
        ok = ok and same
    return ok


# --------------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "shape-only"),
                    help="output root (default: shape-only/ next to this script)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="generate only NAME (repeatable)")
    ap.add_argument("--self-check", action="store_true",
                    help="only check on small configs that the fake pipeline equals a real-weight export")
    ap.add_argument("--list", action="store_true", help="list the model names and exit")
    args = ap.parse_args(argv)
    if args.list:
        for n in MODELS:
            print(n)
        return 0
    import torch

    torch.set_num_threads(1)
    if args.self_check:
        return 0 if self_check() else 1
    names = args.only or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; try --list")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for n in names:
        try:
            rows.append(generate_one(n, args.out))
        except ShapeOnlyError as e:
            log(f"FAILED {n}: {e}")
            return 1
    print()
    print(f"{'model':10s} {'model.onnx':>11s} {'total weight bytes':>20s} {'per block':>14s} "
          f"{'embedding':>14s} {'final norm':>10s} {'lm_head':>14s}")
    for r in rows:
        head = "tied" if r["lm_head_tied"] else f"{r['lm_head']:,}"
        print(f"{r['name']:10s} {r['size'] / 2**20:8.2f} MiB {r['total']:>20,} {r['per_block']:>14,} "
              f"{r['embedding']:>14,} {r['final_norm']:>10,} {head:>14s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
