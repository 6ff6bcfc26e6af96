#!/usr/bin/env python3
"""HELM's block formats (kernels/quant, through helm-quant-oracle) against the `gguf` package.

For seeded random tensors (normal, uniform, heavy-tailed, negative-only, with an outlier, with zero
blocks, tiny values; shapes such as 4x256 and 3x4096) and every format:
  * q8_0, q4_0, q4_1, q5_0, q5_1: our bytes equal gguf.quants.quantize's, which reproduces ggml's
    reference quantizers (quantize_row_*_ref) bit for bit;
  * every format, the k-quants included: gguf.quants.dequantize(our bytes) equals our dequantizer's
    floats bit for bit, so ggml reads our blocks as we do;
  * the float64 error of each weight is within its format's bound (BOUNDS below);
  * random blocks of iq4_nl, iq4_xs (which HELM only reads), q2_k and q3_k (every code, finite f16
    scales of either sign) decode to gguf.quants.dequantize's floats bit for bit;
  * the iq lattice formats iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s (read-only) decode to
    gguf.quants.dequantize's floats bit for bit: blocks of random bytes whose f16 d is random finite
    (normal and subnormal, either sign) and each of the extremes (+-0, the smallest and largest
    subnormal, the smallest normal, +-1, +-65504); blocks written from their fields (iq_blocks) that
    together hold every lattice index (256, 512, 1024, 256, 512 entries), every sign code (the 128
    sign indices, or the 256 sign bytes of iq2_s and iq3_s) and every 4-bit scale code at every
    position of a block;
  * kernels/quant/IqGrids.h is exactly what scripts/gen_iq_grids.py prints from the installed gguf
    package now.
Exits 0 when all hold, 1 otherwise (one line per failure, then a summary).
"""

import argparse
import importlib.metadata
import os
import pathlib
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf import quants as gguf_quants
except ImportError as err:  # a broken install, not a reason to skip: CI installs scripts/requirements.txt
    print(f"check_block_formats: {err}; install scripts/requirements.txt into the venv", file=sys.stderr)
    sys.exit(1)

FORMATS = {
    # name: (GGML type, weights per block, bytes per block, byte-exact with ggml's quantizer)
    "q8_0": (GGMLQuantizationType.Q8_0, 32, 34, True),
    "q4_0": (GGMLQuantizationType.Q4_0, 32, 18, True),
    "q4_1": (GGMLQuantizationType.Q4_1, 32, 20, True),
    "q4_k": (GGMLQuantizationType.Q4_K, 256, 144, False),
    "q5_k": (GGMLQuantizationType.Q5_K, 256, 176, False),
    "q6_k": (GGMLQuantizationType.Q6_K, 256, 210, False),
    "q5_0": (GGMLQuantizationType.Q5_0, 32, 22, True),
    "q5_1": (GGMLQuantizationType.Q5_1, 32, 24, True),
    "q2_k": (GGMLQuantizationType.Q2_K, 256, 84, False),
    "q3_k": (GGMLQuantizationType.Q3_K, 256, 110, False),
}

IQ_FORMATS = {
    # The iq lattice formats (kernels/quant/IqFormats.h), which HELM only reads: random blocks and
    # blocks that together hold every lattice index, sign pattern and scale code at every position.
    # name: (GGML type, bytes per block, lattice entries, sign codes (7-bit indices into ggml's
    #        ksigns_iq2xs, or whole sign bytes), scale codes per block)
    "iq2_xxs": (GGMLQuantizationType.IQ2_XXS, 66, 256, 128, 8),
    "iq2_xs": (GGMLQuantizationType.IQ2_XS, 74, 512, 128, 16),
    "iq2_s": (GGMLQuantizationType.IQ2_S, 82, 1024, 256, 16),
    "iq3_xxs": (GGMLQuantizationType.IQ3_XXS, 98, 256, 128, 8),
    "iq3_s": (GGMLQuantizationType.IQ3_S, 110, 512, 256, 8),
}

RANDOM_BLOCKS = {
    # Formats whose every code and scale sign random blocks reach (our quantizer writes only some of
    # q2_k's and q3_k's, and none of the iq4 formats').
    # name: (GGML type, weights per block, bytes per block, offsets of the f16 fields)
    "iq4_nl": (GGMLQuantizationType.IQ4_NL, 32, 18, (0,)),
    "iq4_xs": (GGMLQuantizationType.IQ4_XS, 256, 136, (0,)),
    "q2_k": (GGMLQuantizationType.Q2_K, 256, 84, (80, 82)),
    "q3_k": (GGMLQuantizationType.Q3_K, 256, 110, (108,)),
}

BOUNDS = """
Per-weight bounds on |x - x'| (derivation; the same as test/unit/kernels/quant/BlockFormatsTest.cpp):
  half_error(v) = 2^-11 |v| + 2^-25   f16 round-to-nearest-even moves a value stored as v by at most half
                                      an ulp (relative 2^-11 when normal, 2^-25 absolute when subnormal)
  slack = 2^-20 * block amax          the quantizer and dequantizer do a few float roundings (<= 8 of
                                      2^-24) on values at most twice the block's largest magnitude
  q8_0  d = amax/127; codes round(x/d) are never clipped:  d/2 + 127 |d - f16(d)| + slack
  q4_0  d = max/-8 (max: the value of largest magnitude); code min(15, trunc(x/d + 8.5)) is the nearest
        except at x/d > 7.5, clamped to x' = 7d:  (x/d > 7.5 ? |x - 7d| : |d|/2) + 8 |d - f16(d)| + slack
  q4_1  d = (max - min)/15, m = min; nearest code:  d/2 + 15 |d - f16(d)| + |m - f16(m)| + slack
  q5_0  as q4_0 with d = max/-16, codes min(31, trunc(x/d + 16.5)), clamped above x/d > 15.5:
        (x/d > 15.5 ? |x - 15d| : |d|/2) + 16 |d - f16(d)| + slack
  q5_1  as q4_1 with d = (max - min)/31:  d/2 + 31 |d - f16(d)| + |m - f16(m)| + slack
  q4_k, q5_k (qmax 15, 31), sub-block of 32 with stored S = dh*sc, M = dminh*mc: the fit (s, m) reaches
        every weight within s/2, the 6-bit codes move s by Ds <= dh/2 + 64 half_error(dh) and m by
        Dm <= dminh/2 + 64 half_error(dminh), the final codes are the nearest for (S, M):
        S/2 + (qmax + 1/2) Ds + Dm + slack
  q6_k  sub-block of 16 with stored S = dh*sc: the fit s reaches every weight within |s|, the int8 code
        moves s by Ds <= |dh| + 129 half_error(dh), the final codes are the nearest for S:
        |S| + 33 Ds + slack
  q2_k  as q4_k with qmax 3 per sub-block of 16 and 4-bit codes for scale and offset (Ds <= dh/2 +
        16 half_error(dh), Dm likewise):  S/2 + 3.5 Ds + Dm + slack
  q3_k  as q6_k with codes -4..3 and 6-bit scale codes -32..31 (Ds <= |dh| + 33 half_error(dh)):
        |S| + 5 Ds + slack
"""


def half_error(v):
    return np.abs(v) * 2.0**-11 + 2.0**-25


def f16_field(blocks, offset):
    return blocks[:, offset:offset + 2].copy().view("<f2").astype(np.float64)[:, 0]


def k_scale_min(packed):
    """ggml's get_scale_min_k4 for all 8 sub-blocks: (n_blocks, 8) scale and min codes."""
    packed = packed.astype(np.int64)
    scale = np.empty((packed.shape[0], 8), dtype=np.int64)
    minimum = np.empty_like(scale)
    for j in range(8):
        if j < 4:
            scale[:, j] = packed[:, j] & 63
            minimum[:, j] = packed[:, j + 4] & 63
        else:
            scale[:, j] = (packed[:, j + 4] & 0xF) | ((packed[:, j - 4] >> 6) << 4)
            minimum[:, j] = (packed[:, j + 4] >> 4) | ((packed[:, j] >> 6) << 4)
    return scale, minimum


def error_bounds(name, x, blocks):
    """Per-weight bounds (BOUNDS) for x (n_blocks, weights per block) quantized to blocks (n_blocks, bytes)."""
    x32 = x.astype(np.float32)
    x64 = x.astype(np.float64)
    amax = np.abs(x64).max(axis=1, keepdims=True)
    slack = amax * 2.0**-20
    if name == "q8_0":
        d = (np.abs(x32).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float64)
        dh = f16_field(blocks, 0)[:, None]
        return d / 2 + 127 * np.abs(d - dh) + slack
    if name in ("q4_0", "q5_0"):
        half = 8 if name == "q4_0" else 16  # codes -half .. half - 1
        signed_max = np.take_along_axis(x32, np.abs(x32).argmax(axis=1)[:, None], axis=1)
        d = (signed_max / np.float32(-half)).astype(np.float64)
        dh = f16_field(blocks, 0)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            steps = np.where(d != 0, x64 / d, 0.0)
        nearest = np.where(steps > half - 0.5, np.abs(x64 - (half - 1) * d), np.abs(d) / 2)
        return nearest + half * np.abs(d - dh) + slack
    if name in ("q4_1", "q5_1"):
        top = 15 if name == "q4_1" else 31
        lo = x32.min(axis=1, keepdims=True)
        d = ((x32.max(axis=1, keepdims=True) - lo) / np.float32(top)).astype(np.float64)
        dh, mh = f16_field(blocks, 0)[:, None], f16_field(blocks, 2)[:, None]
        return d / 2 + top * np.abs(d - dh) + np.abs(lo.astype(np.float64) - mh) + slack
    if name in ("q4_k", "q5_k"):
        qmax = 15 if name == "q4_k" else 31
        dh, dminh = f16_field(blocks, 0)[:, None], f16_field(blocks, 2)[:, None]
        scale, _ = k_scale_min(blocks[:, 4:16])
        scale_move = dh / 2 + 64 * half_error(dh)
        offset_move = dminh / 2 + 64 * half_error(dminh)
        per_sub = dh * scale / 2 + (qmax + 0.5) * scale_move + offset_move  # (n_blocks, 8)
        return np.repeat(per_sub, 32, axis=1) + slack
    if name == "q6_k":
        dh = f16_field(blocks, 208)[:, None]
        scales = blocks[:, 192:208].copy().view(np.int8).astype(np.float64)
        scale_move = np.abs(dh) + 129 * half_error(dh)
        per_sub = np.abs(dh * scales) + 33 * scale_move  # (n_blocks, 16)
        return np.repeat(per_sub, 16, axis=1) + slack
    if name == "q2_k":
        dh, dminh = f16_field(blocks, 80)[:, None], f16_field(blocks, 82)[:, None]
        scale = (blocks[:, 0:16] & 0xF).astype(np.float64)
        scale_move = dh / 2 + 16 * half_error(dh)
        offset_move = dminh / 2 + 16 * half_error(dminh)
        per_sub = dh * scale / 2 + 3.5 * scale_move + offset_move  # (n_blocks, 16)
        return np.repeat(per_sub, 16, axis=1) + slack
    if name == "q3_k":
        dh = f16_field(blocks, 108)[:, None]
        packed = blocks[:, 96:108].astype(np.int64)
        sub = np.arange(16)
        codes = ((packed[:, sub % 8] >> (4 * (sub // 8))) & 0xF) | (((packed[:, 8 + sub % 4] >> (2 * (sub // 4))) & 3) << 4)
        scale_move = np.abs(dh) + 33 * half_error(dh)
        per_sub = np.abs(dh * (codes - 32)) + 5 * scale_move  # (n_blocks, 16)
        return np.repeat(per_sub, 16, axis=1) + slack
    raise ValueError(name)


def tensors():
    """(description, float32 array) pairs; every row length is a multiple of 256."""
    out = []
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        for shape in ((4, 256), (3, 4096), (2, 512)):
            out.append((f"normal {shape} seed {seed}", rng.standard_normal(shape)))
            out.append((f"uniform {shape} seed {seed}", rng.uniform(-3.0, 5.0, shape)))
            out.append((f"heavy-tailed {shape} seed {seed}", rng.standard_t(2.0, shape)))
        x = rng.standard_normal((4, 1024))
        x[0, 32:64] = 0.0      # one zero 32-block
        x[1, 256:512] = 0.0    # one zero 256-block
        x[2, :] = 0.0          # a zero row
        out.append((f"with zero blocks seed {seed}", x))
        x = -np.abs(rng.standard_normal((2, 768))) - 0.25
        out.append((f"negative-only seed {seed}", x))
        x = rng.standard_normal((3, 512))
        x[0, 17] = 2.0e4
        x[2, 300] = -5.0e4
        out.append((f"outliers seed {seed}", x))
        out.append((f"tiny seed {seed}", rng.standard_normal((2, 512)) * 1.0e-6))
    out += near_ties()
    return [(what, np.ascontiguousarray(x, dtype=np.float32)) for what, x in out]


def near_ties():
    """Blocks whose scale d is fixed by one element and whose other weights sit at, and one or two
    float ulps beside, the rounding boundaries (k + 1/2) d of q8_0, q4_0, q4_1, q5_0 and q5_1: the rows where
    roundf against ties-to-even, x * (1/d) against x / d, or truncation offsets change a code."""
    rng = np.random.default_rng(99)
    blocks = {"q8_0": [], "q4_0": [], "q4_1": [], "q5_0": [], "q5_1": []}
    for _ in range(96):
        d = np.float32(rng.uniform(0.01, 3.0))
        for name in blocks:
            if name == "q8_0":
                anchor, lo, hi = [np.float32(127) * d], -127, 126    # amax = 127 d
            elif name == "q4_0":
                anchor, lo, hi = [np.float32(-8) * d], -8, 6         # max = -8 d
            elif name == "q5_0":
                anchor, lo, hi = [np.float32(-16) * d], -16, 14      # max = -16 d
            elif name == "q4_1":
                anchor, lo, hi = [np.float32(0), np.float32(15) * d], 0, 14  # min 0, max 15 d
            else:
                anchor, lo, hi = [np.float32(0), np.float32(31) * d], 0, 30  # min 0, max 31 d
            ks = rng.integers(lo, hi + 1, size=32 - len(anchor))
            ties = ((ks + 0.5) * d).astype(np.float32)
            nudged = [np.nextafter(v, np.float32(np.inf * s)) if s else v
                      for v, s in zip(ties, rng.integers(-1, 2, size=ties.size))]
            blocks[name].append(np.concatenate([anchor, np.array(nudged, dtype=np.float32)]))
    return [(f"near ties of {name}", np.array(b, dtype=np.float32).reshape(-1, 256)) for name, b in blocks.items()]


def run_oracle(oracle, mode, name, src, dst):
    result = subprocess.run([oracle, mode, name, src, dst], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"helm-quant-oracle {mode} {name} failed: {result.stderr.strip()}")


def check(oracle, workdir):
    failures = []
    # The largest relative error per format, apart for the tiny tensors: their f16 scales are
    # subnormal or zero, so their relative error is large by design (their bound still holds).
    worst = {name: 0.0 for name in FORMATS}
    worst_tiny = {name: 0.0 for name in FORMATS}
    checked = 0
    for what, x in tensors():
        src = os.path.join(workdir, "x.f32")
        x.astype("<f4").tofile(src)
        for name, (qtype, block, type_size, byte_exact) in FORMATS.items():
            blocks_path = os.path.join(workdir, f"x.{name}")
            decoded_path = os.path.join(workdir, f"x.{name}.f32")
            run_oracle(oracle, "quantize", name, src, blocks_path)
            ours = np.fromfile(blocks_path, dtype=np.uint8)
            rows, cols = x.shape
            if ours.size != rows * cols // block * type_size:
                failures.append(f"{name} {what}: {ours.size} bytes, expected {rows * cols // block * type_size}")
                continue
            if byte_exact:
                theirs = gguf_quants.quantize(x, qtype).reshape(-1)
                if not np.array_equal(ours, theirs):
                    first = int(np.flatnonzero(ours != theirs)[0])
                    failures.append(f"{name} {what}: bytes differ from gguf.quants.quantize first in block "
                                    f"{first // type_size} (byte {first % type_size})")
            run_oracle(oracle, "dequantize", name, blocks_path, decoded_path)
            our_floats = np.fromfile(decoded_path, dtype="<f4").reshape(rows, cols)
            ggml_floats = gguf_quants.dequantize(ours.reshape(rows, cols // block * type_size), qtype)
            if not np.array_equal(our_floats.view(np.uint32), ggml_floats.astype(np.float32).view(np.uint32)):
                first = int(np.flatnonzero(our_floats.view(np.uint32) != ggml_floats.view(np.uint32))[0])
                failures.append(f"{name} {what}: dequantized weight {first} is {our_floats.reshape(-1)[first]!r}, "
                                f"gguf.quants.dequantize gives {ggml_floats.reshape(-1)[first]!r}")
            xb = x.reshape(-1, block)
            err = np.abs(xb.astype(np.float64) - our_floats.reshape(-1, block).astype(np.float64))
            bound = error_bounds(name, xb, ours.reshape(-1, type_size))
            over = np.argwhere(~(err <= bound))
            if over.size:
                b, i = over[0]
                failures.append(f"{name} {what}: block {b} weight {i} = {xb[b, i]!r} has error {err[b, i]:.6g} "
                                f"> bound {bound[b, i]:.6g} ({len(over)} weights over)")
            amax = np.abs(xb.astype(np.float64)).max(axis=1, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                relative = np.where(amax > 0, err / amax, 0.0)
            table = worst_tiny if what.startswith("tiny") else worst
            table[name] = max(table[name], float(relative.max()))
            checked += 1
    checked += check_read_only(oracle, workdir, failures)
    checked += check_iq(oracle, workdir, failures)
    return failures, worst, worst_tiny, checked


def check_read_only(oracle, workdir, failures):
    """The read-only formats: random blocks through our dequantizer and gguf's, bit for bit."""
    checked = 0
    rng = np.random.default_rng(7)
    for name, (qtype, block, type_size, halves) in RANDOM_BLOCKS.items():
        for rows in (1, 5, 64):
            blocks = rng.integers(0, 256, size=(rows * 8, type_size), dtype=np.uint8)
            # Finite f16 scales of either sign, 2^-10 .. 2^6 (every code byte stays random).
            scale = (rng.integers(0, 2, size=len(blocks)) << 15) | (rng.integers(5, 22, size=len(blocks)) << 10) \
                | rng.integers(0, 1024, size=len(blocks))
            for offset in halves:
                blocks[:, offset] = scale & 0xFF
                blocks[:, offset + 1] = scale >> 8
            blocks_path = os.path.join(workdir, f"r.{name}")
            decoded_path = os.path.join(workdir, f"r.{name}.f32")
            blocks.tofile(blocks_path)
            run_oracle(oracle, "dequantize", name, blocks_path, decoded_path)
            ours = np.fromfile(decoded_path, dtype="<f4")
            theirs = gguf_quants.dequantize(blocks.reshape(rows, -1), qtype).astype(np.float32).reshape(-1)
            if ours.size != theirs.size or not np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)):
                first = int(np.flatnonzero(ours.view(np.uint32) != theirs.view(np.uint32))[0]) \
                    if ours.size == theirs.size else 0
                failures.append(f"{name} random blocks ({rows} rows): dequantized weight {first} is "
                                f"{ours[first]!r}, gguf.quants.dequantize gives {theirs[first]!r}")
            checked += 1
    return checked


# f16 bit patterns the random iq blocks' d takes first (then random finite values of either sign):
# zeros, the smallest and largest subnormals, the smallest normal, 1, the largest finite.
SPECIAL_HALVES = (0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF)


def iq_blocks(name, d, index, signs, scales):
    """ggml's block_<name> bytes (ggml-common.h) from their fields, each (n_blocks, count):
    d the f16 bit patterns (n_blocks,); index the lattice indices (32 of 8 weights for iq2, 64 of 4
    for iq3); signs one sign code per 8 weights (a 7-bit index into ksigns_iq2xs for iq2_xxs,
    iq2_xs, iq3_xxs, the sign byte itself for iq2_s, iq3_s); scales the 4-bit codes (one per 32
    weights for iq2_xxs, iq3_xxs, iq3_s, per 16 for iq2_xs, iq2_s)."""
    _, type_size, _, _, _ = IQ_FORMATS[name]
    n = len(d)
    d, index, signs, scales = (np.asarray(v, dtype=np.int64) for v in (d, index, signs, scales))
    out = np.zeros((n, type_size), dtype=np.uint8)
    out[:, 0], out[:, 1] = d & 0xFF, d >> 8

    def words(values):  # (n, k) uint32 -> (n, 4k) little-endian bytes
        return np.ascontiguousarray(values.astype("<u4")).view(np.uint8).reshape(n, -1)

    def nibbles(codes):  # (n, 2k) 4-bit codes -> (n, k) bytes, the even code in the low nibble
        return codes[:, 0::2] | codes[:, 1::2] << 4

    def high_bits(bits, width):  # (n, k) values of `width` bits -> packed 8 // width per byte, lowest first
        per = 8 // width
        return sum(bits[:, t::per] << (width * t) for t in range(per))

    if name in ("iq2_xxs", "iq3_xxs"):
        aux = scales << 28  # per 32 weights: four 7-bit sign indices, then the scale
        for t in range(4):
            aux = aux | signs[:, t::4] << (7 * t)
        if name == "iq2_xxs":  # per 32 weights: 4 index bytes, then the word
            out[:, 2:66] = np.concatenate([index.reshape(n, 8, 4), words(aux).reshape(n, 8, 4)], axis=2).reshape(n, 64)
        else:  # 64 index bytes, then the 8 words
            out[:, 2:66] = index
            out[:, 66:98] = words(aux)
    elif name == "iq2_xs":
        out[:, 2:66] = np.ascontiguousarray((index | signs << 9).astype("<u2")).view(np.uint8).reshape(n, 64)
        out[:, 66:74] = nibbles(scales)
    elif name == "iq2_s":
        out[:, 2:34] = index & 0xFF
        out[:, 34:66] = signs
        out[:, 66:74] = high_bits(index >> 8, 2)
        out[:, 74:82] = nibbles(scales)
    else:  # iq3_s
        out[:, 2:66] = index & 0xFF
        out[:, 66:74] = high_bits(index >> 8, 1)
        out[:, 74:106] = signs
        out[:, 106:110] = nibbles(scales)
    return out


def iq_values(name, d, index, signs, scales):
    """The weights the fields stand for, (n_blocks, 256) float32, by the formats' one formula
    x = (d / k) * (2 ls + 1) * c (k = 8 for iq2, 4 for iq3_xxs, 1 for iq3_s; c the lattice entry's
    magnitude, negative where its sign bit is set; the 7-bit sign indices take their parity as the
    8th bit). Exact in float64 for finite d (at most 11 + 5 + 6 significant bits), so exact in float32."""
    cls = getattr(gguf_quants, name.upper())
    cls.init_grid()
    width = 4 if name.startswith("iq3") else 8
    grid = np.asarray(cls.grid, dtype=np.float64).reshape(-1, width)
    n = len(d)
    magnitude = grid[np.asarray(index)].reshape(n, 256)
    signs = np.asarray(signs, dtype=np.int64)
    if IQ_FORMATS[name][3] == 128:
        parity = np.array([bin(v).count("1") & 1 for v in range(128)])
        signs = signs | parity[signs] << 7
    negative = (signs[:, :, None] >> np.arange(8)) & 1  # (n, 32 groups of 8, 8)
    scales = np.asarray(scales, dtype=np.float64)
    s = np.repeat(2 * scales + 1, 256 // scales.shape[1], axis=1)
    k = {"iq2_xxs": 8, "iq2_xs": 8, "iq2_s": 8, "iq3_xxs": 4, "iq3_s": 1}[name]
    half = np.asarray(d, dtype=np.uint16).view(np.float16).astype(np.float64)[:, None]
    return (half / k * s * magnitude * np.where(negative.reshape(n, 256) == 1, -1.0, 1.0)).astype(np.float32)


def iq_fields(name, rng, n):
    """Random fields for n blocks of iq_blocks: any index, sign code and scale code."""
    _, _, entries, sign_codes, scale_slots = IQ_FORMATS[name]
    slots = 64 if name.startswith("iq3") else 32
    return (rng.integers(0, entries, size=(n, slots)), rng.integers(0, sign_codes, size=(n, 32)),
            rng.integers(0, 16, size=(n, scale_slots)))


def random_halves(rng, n, subnormal=True):
    """n finite f16 bit patterns of either sign: exponents 0 (subnormal, or zero) .. 30."""
    low = 0 if subnormal else 1
    return (rng.integers(0, 2, size=n) << 15) | (rng.integers(low, 31, size=n) << 10) | rng.integers(0, 1024, size=n)


def coverage_fields(name):
    """Fields of as many blocks as the lattice has entries (at least 256): at every index, sign and
    scale position, block b holds (b + a position offset) modulo the field's range, so that every
    lattice index, every sign code and every scale code appears at every position."""
    _, _, entries, sign_codes, scale_slots = IQ_FORMATS[name]
    slots = 64 if name.startswith("iq3") else 32
    b = np.arange(max(entries, 256))[:, None]
    index = (b + 97 * np.arange(slots)) % entries
    signs = (b + 13 * np.arange(32)) % sign_codes
    scales = (b + 5 * np.arange(scale_slots)) % 16
    for what, values, count in (("index", index, entries), ("sign code", signs, sign_codes),
                                 ("scale code", scales, 16)):
        for position in range(values.shape[1]):
            assert len(np.unique(values[:, position])) == count, f"{name}: not every {what} at position {position}"
    return index, signs, scales


def compare_iq(oracle, workdir, failures, name, what, blocks, fields=None):
    """Our decoding of blocks against gguf.quants.dequantize's, bit for bit; with the fields that
    iq_blocks wrote them from, gguf's also against iq_values (that the blocks hold what the fields
    say: a check of iq_blocks, so that the coverage blocks cover what they claim)."""
    qtype, type_size = IQ_FORMATS[name][0], IQ_FORMATS[name][1]
    blocks_path = os.path.join(workdir, f"iq.{name}")
    decoded_path = os.path.join(workdir, f"iq.{name}.f32")
    blocks.tofile(blocks_path)
    run_oracle(oracle, "dequantize", name, blocks_path, decoded_path)
    ours = np.fromfile(decoded_path, dtype="<f4")
    theirs = gguf_quants.dequantize(blocks.reshape(1, -1), qtype).astype(np.float32).reshape(-1)
    if ours.size != theirs.size:
        failures.append(f"{name} {what}: {ours.size} weights decoded, gguf.quants.dequantize gives {theirs.size}")
        return
    if fields is not None:
        want = iq_values(name, *fields).reshape(-1)
        wrong = np.flatnonzero(want.view(np.uint32) != theirs.view(np.uint32))
        if wrong.size:
            first = int(wrong[0])
            failures.append(f"{name} {what}: gguf.quants.dequantize gives {theirs[first]!r} for weight "
                            f"{first % 256} of block {first // 256}, the fields it was written from {want[first]!r} ({wrong.size} "
                            f"weights differ): iq_blocks or iq_values does not write the format as ggml reads it")
    differ = np.flatnonzero(ours.view(np.uint32) != theirs.view(np.uint32))
    if differ.size:
        first = int(differ[0])
        block = first // 256
        failures.append(f"{name} {what}: block {block} weight {first % 256} is {ours[first]!r}, gguf.quants.dequantize "
                        f"gives {theirs[first]!r} ({differ.size} weights differ); the block's {type_size} bytes: "
                        f"{blocks[block].tobytes().hex()}")


def check_iq(oracle, workdir, failures):
    """The iq lattice formats through our dequantizer and gguf's, bit for bit: (a) blocks of random
    bytes whose d is every special f16 (SPECIAL_HALVES) and random finite values, normal and
    subnormal, of either sign; (b) the coverage blocks (coverage_fields), d random normal halves of
    either sign, the first 1.0; (c) blocks of random fields (compare_iq checks (b) and (c) against
    iq_values too)."""
    checked = 0
    rng = np.random.default_rng(11)
    for name, (qtype, type_size, _, _, _) in IQ_FORMATS.items():
        if GGML_QUANT_SIZES[qtype] != (256, type_size):
            failures.append(f"{name}: the gguf package's size is {GGML_QUANT_SIZES[qtype]}, not (256, {type_size})")
            continue
        for rows in (1, 7, 96):
            blocks = rng.integers(0, 256, size=(rows * 4, type_size), dtype=np.uint8)
            d = random_halves(rng, len(blocks))
            if rows == 96:
                d[:len(SPECIAL_HALVES)] = SPECIAL_HALVES
            blocks[:, 0], blocks[:, 1] = d & 0xFF, d >> 8
            compare_iq(oracle, workdir, failures, name, f"random bytes ({len(blocks)} blocks)", blocks)
            checked += 1
        index, signs, scales = coverage_fields(name)
        d = random_halves(rng, len(index), subnormal=False)
        d[0] = 0x3C00
        compare_iq(oracle, workdir, failures, name, f"every index, sign and scale code ({len(index)} blocks)",
                   iq_blocks(name, d, index, signs, scales), (d, index, signs, scales))
        # (c) Blocks written from random fields, d the extremes first: these and (b) also decode (by
        # gguf) to iq_values of their fields, so the blocks hold what the fields say.
        d = random_halves(rng, 64)
        d[:len(SPECIAL_HALVES)] = SPECIAL_HALVES
        fields = (d, *iq_fields(name, rng, 64))
        compare_iq(oracle, workdir, failures, name, "random fields (64 blocks)", iq_blocks(name, *fields), fields)
        checked += 2
    return checked


def check_iq_grids(failures):
    """kernels/quant/IqGrids.h is what scripts/gen_iq_grids.py writes from the installed gguf package
    now: the committed tables cannot drift from the package's."""
    root = pathlib.Path(__file__).resolve().parents[2]
    header, generator = root / "kernels" / "quant" / "IqGrids.h", root / "scripts" / "gen_iq_grids.py"
    result = subprocess.run([sys.executable, str(generator)], capture_output=True, text=True)
    if result.returncode != 0:
        failures.append(f"{generator.name} failed: {result.stderr.strip()[-400:]}")
        return
    text = header.read_text(encoding="utf-8")
    if text != result.stdout:
        committed, generated = text.split("\n"), result.stdout.split("\n")
        line = next((i for i, (a, b) in enumerate(zip(committed, generated)) if a != b),
                    min(len(committed), len(generated)))
        failures.append(f"{header.relative_to(root)} is not what {generator.relative_to(root)} writes now (from gguf "
                        f"{importlib.metadata.version('gguf')}): first at line {line + 1}: "
                        f"{(committed[line] if line < len(committed) else '<end>')[:60]!r} against "
                        f"{(generated[line] if line < len(generated) else '<end>')[:60]!r}; regenerate it")
    else:
        print(f"{header.relative_to(root)}: identical to {generator.relative_to(root)}'s output")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", required=True, help="the helm-quant-oracle executable")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="helm-quant-") as workdir:
        try:
            failures, worst, worst_tiny, checked = check(args.oracle, workdir)
        except RuntimeError as err:
            print(f"check_block_formats: {err}", file=sys.stderr)
            return 1
    check_iq_grids(failures)
    for line in failures:
        print(f"FAIL {line}")
    summary = ", ".join(f"{name} {value:.4g}" for name, value in worst.items())
    summary_tiny = ", ".join(f"{name} {value:.4g}" for name, value in worst_tiny.items())
    print(f"{checked} tensor/format pairs; max |x - x'| / block amax: {summary}; tiny (1e-6) tensors: {summary_tiny}")
    print(f"block formats vs gguf: {'FAILED, ' + str(len(failures)) + ' failures' if failures else 'OK'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
