//===- QuantBlocks.cu - weights in ggml block formats: dequantize, GEMV, embedding --===//
//
// The formats are kernels/quant/BlockFormats.h's (ggml's byte layouts), given by the contract's
// block dtype codes (the contract's HELM_BLOCK_FORMATS). A row of K weights is K / 32 blocks of
// 32 (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl) or K / 256 super-blocks of 256 (q2_k, q3_k, q4_k,
// q5_k, q6_k, iq4_xs, the iq2 / iq3 lattice formats); the kernels see a row
// as K / 32 groups of 32 consecutive weights (a block, or one eighth of a super-block) and give
// the 32 lanes of a warp one weight of a group each, so that neighbouring lanes read neighbouring
// code bytes (the block's scales are one broadcast read).
//
// Each weight is dequantized with the operations of quant::dequantizeRow, in its order and
// without fused multiply-adds (__fmul_rn / __fsub_rn / __fadd_rn are never contracted), so the
// f32 weights are bit-identical to the CPU's dequantization. Blocks are 2-byte aligned at best
// (34, 18, 20, 22, 24, 84, 110, 136, 144, 176, 210, and the lattice formats' 66, 74, 82, 98 and
// 110 bytes), so fields are read byte by byte; helm_cuda_qgemv_q4k
// alone reads 16-byte words, of q4_k weights on 16-byte boundaries.
//
// helm_cuda_dequantize_rows(const uint8_t *w, int32_t format, float *out, int64_t rows,
//                           int64_t k)
//   out[r, :] = the K weights of row r as f32. Launch: any grid and block, grid-strided over the
//   rows * K weights, one thread per weight.
// helm_cuda_dequantize_rows_f16(const uint8_t *w, int32_t format, __half *out, int64_t rows,
//                               int64_t k)
//   The same weights rounded to f16 (nearest even), for the prefill GEMM on tensor cores.
// helm_cuda_qgemv(const float *x, const uint8_t *w, int32_t format, float *y, int64_t m,
//                 int64_t k, int64_t n)
//   y[i, j] = sum_k x[i, k] * W[j, k] for i < m <= kQgemvMaxRows: one block per output row j
//   (grid-strided; blockDim.x a multiple of 32, at most 1024), its warps over the row's groups,
//   each lane's weight of a group multiplied into every row of x; f32 products and sums, one
//   block reduction per row of x.
// helm_cuda_qgemv_staged(const float *x, const uint8_t *w, int32_t format, float *y, int64_t m,
//                        int64_t k, int64_t n)
//   helm_cuda_qgemv's products (the same f32 weights), summed in another order, for weights whose
//   rows start on 16-byte boundaries (w 16-byte
//   aligned and the row's bytes a multiple of 16; the host checks). Launch: kQgemvStagedThreads
//   threads, grid-strided over the output rows kQgemvStagedRows at a time (KernelParams.h).
// helm_cuda_qgemv_q4k(const float *x, const uint8_t *w, float *y, int64_t m, int64_t k, int64_t n)
//   helm_cuda_qgemv's products, summed in another order, for q4_k weights at a 16-byte aligned
//   address (every q4_k row is a
//   whole number of 144-byte super-blocks, so every row and super-block is then aligned too) and
//   x 16-byte aligned; m <= kQgemvMaxRows. Launch: kQgemvQ4KThreads threads, grid-strided over
//   the output rows, kQgemvQ4KRowsPerWarp per warp at a time (KernelParams.h).
// helm_cuda_embed_blocks(const uint8_t *table, int32_t format, const int64_t *ids, T *y,
//                        int64_t rows, int64_t vocab, int64_t width)
//   y[r, :] = row clamp(ids[r], 0, vocab - 1) of the table, dequantized and rounded to T
//   (T = float; _f16 / _bf16 variants). Launch: grid-strided over rows, threads over the width.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

#include "contract/helm_contract.h"
#include "kernels/cuda/KernelParams.h"
#include "kernels/cuda/QuantLanes.h"
#include "kernels/quant/BlockFormats.h"
#include "kernels/quant/IqFormats.h"

#include <cuda_pipeline.h>

#include <cstddef>
#include <type_traits>

namespace helm_cuda {

// The byte layouts are BlockFormats.h's structs, read as raw bytes (offsetof / sizeof).
using helm::quant::BlockQ4_0;
using helm::quant::BlockQ4_1;
using helm::quant::BlockQ4K;
using helm::quant::BlockQ5K;
using helm::quant::BlockQ6K;
using helm::quant::BlockQ8_0;
using helm::quant::BlockQ5_0;
using helm::quant::BlockQ5_1;
using helm::quant::BlockIq2S;
using helm::quant::BlockIq2Xs;
using helm::quant::BlockIq2Xxs;
using helm::quant::BlockIq3S;
using helm::quant::BlockIq3Xxs;
using helm::quant::BlockIq4Nl;
using helm::quant::BlockIq4Xs;
using helm::quant::BlockQ2K;
using helm::quant::BlockQ3K;

/// The iq4 grid (quant::kIq4Values) where device code can read it.
__constant__ int8_t kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};
static_assert([] {
  constexpr int8_t grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int i = 0; i < 16; ++i)
    if (grid[i] != helm::quant::kIq4Values[i])
      return false;
  return true;
}(), "kIq4Grid is quant::kIq4Values");

/// The iq lattices (quant::kIq2XxsGrid ...: IqGrids.h, the one owner) in global memory: a warp's
/// lanes read up to 8 different entries at once, which the constant cache would serialise.
__device__ const uint64_t kIq2XxsLattice[256] = {HELM_IQ2XXS_GRID};
__device__ const uint64_t kIq2XsLattice[512] = {HELM_IQ2XS_GRID};
__device__ const uint64_t kIq2SLattice[1024] = {HELM_IQ2S_GRID};
__device__ const uint32_t kIq3XxsLattice[256] = {HELM_IQ3XXS_GRID};
__device__ const uint32_t kIq3SLattice[512] = {HELM_IQ3S_GRID};

/// ggml's sign bits of a 7-bit sign index (quant::iqSigns): the index, its parity as bit 7.
__device__ __forceinline__ uint32_t iqSigns(uint32_t index) { return index | (uint32_t(__popc(index)) & 1u) << 7; }

__device__ __forceinline__ float halfAt(const uint8_t *p) {
  const unsigned short bits = (unsigned short)(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

/// Bytes of a row of k weights of format F (the contract's block table).
template <int F> __device__ __forceinline__ int64_t rowBytes(int64_t k) {
  return k / helm_dtype_block_weights(F) * helm_dtype_block_bytes(F);
}

/// q4_k / q5_k sub-block j's 6-bit scale and min codes (quant::unpackScaleMin).
__device__ __forceinline__ void scaleMin(const uint8_t *packed, int j, int &scale, int &min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

/// Weight l (0..31) of group g (weights 32g .. 32g + 31) of the row at `row`: the kernels give
/// each of a warp's lanes one weight of a group, so that the lanes read neighbouring bytes.
template <int F>
__device__ __forceinline__ float weightAt(const uint8_t *row, int64_t g, int l) {
  if constexpr (F == HELM_DTYPE_Q8_0) {
    const uint8_t *b = row + g * sizeof(BlockQ8_0);
    return __fmul_rn(float(int8_t(b[offsetof(BlockQ8_0, qs) + l])), halfAt(b));
  } else if constexpr (F == HELM_DTYPE_Q4_0) {
    // Byte j holds weight j (low nibble) and weight j + 16 (high nibble).
    const uint8_t *b = row + g * sizeof(BlockQ4_0), *qs = b + offsetof(BlockQ4_0, qs);
    const int q = l < 16 ? (qs[l] & 0xF) : (qs[l - 16] >> 4);
    return __fmul_rn(float(q - 8), halfAt(b));
  } else if constexpr (F == HELM_DTYPE_Q4_1) {
    const uint8_t *b = row + g * sizeof(BlockQ4_1), *qs = b + offsetof(BlockQ4_1, qs);
    const int q = l < 16 ? (qs[l] & 0xF) : (qs[l - 16] >> 4);
    return __fadd_rn(__fmul_rn(float(q), halfAt(b)), halfAt(b + offsetof(BlockQ4_1, m)));
  } else if constexpr (F == HELM_DTYPE_Q5_0 || F == HELM_DTYPE_Q5_1) {
    // Nibbles as q4_0; bit l of the little-endian qh word is weight l's fifth bit.
    using Block = std::conditional_t<F == HELM_DTYPE_Q5_0, BlockQ5_0, BlockQ5_1>;
    const uint8_t *b = row + g * sizeof(Block), *qs = b + offsetof(Block, qs);
    const uint8_t high = b[offsetof(Block, qh) + l / 8];
    const int q = (l < 16 ? (qs[l] & 0xF) : (qs[l - 16] >> 4)) | (((high >> (l % 8)) & 1) << 4);
    if constexpr (F == HELM_DTYPE_Q5_0)
      return __fmul_rn(float(q - 16), halfAt(b));
    else
      return __fadd_rn(__fmul_rn(float(q), halfAt(b)), halfAt(b + offsetof(BlockQ5_1, m)));
  } else if constexpr (F == HELM_DTYPE_IQ4_NL) {
    const uint8_t *b = row + g * sizeof(BlockIq4Nl), *qs = b + offsetof(BlockIq4Nl, qs);
    const int nibble = l < 16 ? (qs[l] & 0xF) : (qs[l - 16] >> 4);
    return __fmul_rn(halfAt(b), float(kIq4Grid[nibble]));
  } else if constexpr (F == HELM_DTYPE_IQ4_XS) {
    // Sub-block g % 8 of super-block g / 8: scale d * (ls - 32), nibbles at qs[16 * sub ..].
    const uint8_t *b = row + (g / 8) * sizeof(BlockIq4Xs);
    const int sub = int(g % 8);
    const int high = (b[offsetof(BlockIq4Xs, scalesHigh) + sub / 4] >> (2 * (sub % 4))) & 3;
    const int ls = ((b[offsetof(BlockIq4Xs, scalesLow) + sub / 2] >> (4 * (sub % 2))) & 0xF) | (high << 4);
    const uint8_t *qs = b + offsetof(BlockIq4Xs, qs) + 16 * sub;
    const int nibble = l < 16 ? (qs[l] & 0xF) : (qs[l - 16] >> 4);
    return __fmul_rn(__fmul_rn(halfAt(b), float(ls - 32)), float(kIq4Grid[nibble]));
  } else if constexpr (F == HELM_DTYPE_Q2_K || F == HELM_DTYPE_Q3_K) {
    // Group t of super-block g / 8 = sub-blocks 2t (l < 16) and 2t + 1: half n = t / 4 of the
    // super-block, bits 2 (t % 4) of qs[32n + l] (q3_k: hmask[l] bit 4n + t % 4 as the third).
    using Block = std::conditional_t<F == HELM_DTYPE_Q2_K, BlockQ2K, BlockQ3K>;
    const uint8_t *b = row + (g / 8) * sizeof(Block);
    const int t = int(g % 8), n = t / 4, s = 2 * t + l / 16;
    const int low = (b[offsetof(Block, qs) + 32 * n + l] >> (2 * (t % 4))) & 3;
    if constexpr (F == HELM_DTYPE_Q2_K) {
      const int sc = b[offsetof(BlockQ2K, scales) + s];
      const float dl = __fmul_rn(halfAt(b + offsetof(BlockQ2K, d)), float(sc & 0xF));
      const float ml = __fmul_rn(halfAt(b + offsetof(BlockQ2K, dmin)), float(sc >> 4));
      return __fsub_rn(__fmul_rn(dl, float(low)), ml);
    } else {
      const uint8_t *scales = b + offsetof(BlockQ3K, scales);
      const int code = ((scales[s % 8] >> (4 * (s / 8))) & 0xF) | (((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
      const int high = (b[offsetof(BlockQ3K, hmask) + l] >> (4 * n + t % 4)) & 1;
      const float dl = __fmul_rn(halfAt(b + offsetof(BlockQ3K, d)), float(code - 32));
      return __fmul_rn(dl, float(low - (high ? 0 : 4)));
    }
  } else if constexpr (F == HELM_DTYPE_IQ2_XXS || F == HELM_DTYPE_IQ2_XS || F == HELM_DTYPE_IQ2_S ||
                       F == HELM_DTYPE_IQ3_XXS || F == HELM_DTYPE_IQ3_S) {
    // quant::decodeIq for one weight: sub-block j = g % 8 of super-block g / 8, 8-weight group
    // t = l / 8 (lattice entries of 8 weights, or two of 4 for iq3), weight l % 8 of it; the value
    // (D * s) * c with s = 2 ls + 1 and D = d / 8 (iq2), d / 4 (iq3_xxs), d (iq3_s).
    const uint8_t *b = row + (g / 8) * helm_dtype_block_bytes(F);
    const int j = int(g % 8), t = l / 8, i = l % 8, entry = 4 * j + t; // entry: the group in the super-block
    uint32_t magnitude, signs;
    int ls;
    float D;
    auto word = [](const uint8_t *p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; };
    if constexpr (F == HELM_DTYPE_IQ2_XXS) {
      const uint32_t aux = word(b + offsetof(BlockIq2Xxs, qs) + 8 * j + 4);
      magnitude = uint32_t(kIq2XxsLattice[b[offsetof(BlockIq2Xxs, qs) + 8 * j + t]] >> (8 * i)) & 0xFF;
      signs = iqSigns((aux >> (7 * t)) & 127);
      ls = int(aux >> 28);
      D = __fmul_rn(halfAt(b), 0.125f);
    } else if constexpr (F == HELM_DTYPE_IQ2_XS) {
      const uint32_t e = uint32_t(b[offsetof(BlockIq2Xs, qs) + 2 * entry]) | uint32_t(b[offsetof(BlockIq2Xs, qs) + 2 * entry + 1]) << 8;
      magnitude = uint32_t(kIq2XsLattice[e & 511] >> (8 * i)) & 0xFF;
      signs = iqSigns(e >> 9);
      ls = (b[offsetof(BlockIq2Xs, scales) + j] >> (t < 2 ? 0 : 4)) & 0xF;
      D = __fmul_rn(halfAt(b), 0.125f);
    } else if constexpr (F == HELM_DTYPE_IQ2_S) {
      const uint32_t index = b[offsetof(BlockIq2S, qs) + entry] | ((b[offsetof(BlockIq2S, qh) + j] >> (2 * t)) & 3) << 8;
      magnitude = uint32_t(kIq2SLattice[index] >> (8 * i)) & 0xFF;
      signs = b[offsetof(BlockIq2S, signs) + entry];
      ls = (b[offsetof(BlockIq2S, scales) + j] >> (t < 2 ? 0 : 4)) & 0xF;
      D = __fmul_rn(halfAt(b), 0.125f);
    } else if constexpr (F == HELM_DTYPE_IQ3_XXS) {
      const uint32_t aux = word(b + offsetof(BlockIq3Xxs, scalesAndSigns) + 4 * j);
      magnitude = (kIq3XxsLattice[b[offsetof(BlockIq3Xxs, qs) + 2 * entry + i / 4]] >> (8 * (i % 4))) & 0xFF;
      signs = iqSigns((aux >> (7 * t)) & 127);
      ls = int(aux >> 28);
      D = __fmul_rn(halfAt(b), 0.25f);
    } else {
      const int index = 2 * entry + i / 4; // iq3_s: 9-bit indices, the 9th in qh[index / 8] bit index % 8
      magnitude = (kIq3SLattice[b[offsetof(BlockIq3S, qs) + index] | ((b[offsetof(BlockIq3S, qh) + index / 8] >> (index % 8)) & 1) << 8] >> (8 * (i % 4))) & 0xFF;
      signs = b[offsetof(BlockIq3S, signs) + entry];
      ls = (b[offsetof(BlockIq3S, scales) + j / 2] >> (4 * (j % 2))) & 0xF;
      D = halfAt(b);
    }
    const float code = (signs >> i) & 1 ? -float(magnitude) : float(magnitude);
    return __fmul_rn(__fmul_rn(D, float(2 * ls + 1)), code);
  } else if constexpr (F == HELM_DTYPE_Q4_K || F == HELM_DTYPE_Q5_K) {
    // Sub-block `sub` of super-block g / 8: qs bytes 32 * (sub / 2) .., low nibbles for even
    // sub-blocks, high nibbles for odd ones; q5_k adds bit `sub` of qh[l] as the fifth bit.
    using Block = std::conditional_t<F == HELM_DTYPE_Q4_K, BlockQ4K, BlockQ5K>;
    const uint8_t *b = row + (g / 8) * sizeof(Block);
    const int sub = int(g % 8);
    int sc, mc;
    scaleMin(b + offsetof(Block, scales), sub, sc, mc);
    const float scale = __fmul_rn(halfAt(b + offsetof(Block, d)), float(sc)),
                offset = __fmul_rn(halfAt(b + offsetof(Block, dmin)), float(mc));
    int q = (b[offsetof(Block, qs) + 32 * (sub / 2) + l] >> ((sub % 2) * 4)) & 0xF;
    if constexpr (F == HELM_DTYPE_Q5_K)
      q |= ((b[offsetof(BlockQ5K, qh) + l] >> sub) & 1) << 4;
    return __fsub_rn(__fmul_rn(scale, float(q)), offset);
  } else {
    static_assert(F == HELM_DTYPE_Q6_K, "a block format without a weightAt case");
    // q6_k: group t of the super-block is quarter t % 4 of half t / 4 (128 weights each): its
    // low 4 bits are ql's low (quarters 0, 1) or high (2, 3) nibbles of bytes l or l + 32, its
    // high 2 bits qh's bits 2 * quarter, its scale scales[8 * half + 2 * quarter + l / 16];
    // x = (d * scale) * (q - 32).
    const uint8_t *b = row + (g / 8) * sizeof(BlockQ6K);
    const int t = int(g % 8), half = t / 4, quarter = t % 4;
    const int low =
        (b[offsetof(BlockQ6K, ql) + 64 * half + (quarter % 2) * 32 + l] >> ((quarter / 2) * 4)) & 0xF;
    const int high = (b[offsetof(BlockQ6K, qh) + 32 * half + l] >> (2 * quarter)) & 3;
    const float scale =
        float(int8_t(b[offsetof(BlockQ6K, scales) + 8 * half + 2 * quarter + l / 16]));
    return __fmul_rn(__fmul_rn(halfAt(b + offsetof(BlockQ6K, d)), scale),
                     float((low | (high << 4)) - 32));
  }
}

/// Runs fn(std::integral_constant<int, F>{}) for the block dtype code `format`, one case per row
/// of the contract's table (a code outside it runs nothing: the host checked it).
template <class Fn> __device__ __forceinline__ void forFormat(int32_t format, Fn &&fn) {
#define HELM_CUDA_FORMAT_CASE(NAME, CODE, name, ggml, weights, bytes, quantizable)               \
  case CODE:                                                                                     \
    fn(std::integral_constant<int, CODE>{});                                                     \
    break;
  switch (format) {
    HELM_BLOCK_FORMATS(HELM_CUDA_FORMAT_CASE)
  default: break;
  }
#undef HELM_CUDA_FORMAT_CASE
}

/// One thread per weight, in order: neighbouring threads read neighbouring codes and write
/// neighbouring values (f32 as dequantizeRow gives them, or those rounded to f16 for the tensor
/// cores).
template <int F, typename T>
__device__ void dequantizeRows(const uint8_t *w, T *out, int64_t rows, int64_t k) {
  const int64_t bytes = rowBytes<F>(k);
  for (int64_t i = gridStart(); i < rows * k; i += gridStride()) {
    const int64_t r = i / k, c = i % k;
    store(out + i, weightAt<F>(w + r * bytes, c / 32, int(c % 32)));
  }
}

/// One thread block per output row j (grid-strided): its warps take the row's groups in turn
/// (warp w: groups w, w + warps, ...), lane l weight l of each, multiplied into every row of x
/// (coalesced 128-byte reads of x); the partial sums are added by blockSum. Splitting a row over
/// the block's warps keeps many loads in flight: one warp walking a whole row waited on each
/// group's bytes in turn.
template <int F>
__device__ void qgemv(const float *x, const uint8_t *w, float *y, int64_t m, int64_t k,
                      int64_t n) {
  const int lane = int(threadIdx.x & 31u);
  const int64_t warp = threadIdx.x >> 5, warps = blockDim.x >> 5, groups = k / 32,
                bytes = rowBytes<F>(k);
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    const uint8_t *row = w + j * bytes;
    float acc[kQgemvMaxRows];
#pragma unroll
    for (int i = 0; i < kQgemvMaxRows; ++i)
      acc[i] = 0.0f;
#pragma unroll 2
    for (int64_t g = warp; g < groups; g += warps) {
      const float v = weightAt<F>(row, g, lane);
      const float *xg = x + g * 32 + lane;
#pragma unroll
      for (int i = 0; i < kQgemvMaxRows; ++i)
        if (i < m)
          acc[i] += v * xg[i * k];
    }
    for (int i = 0; i < kQgemvMaxRows && i < m; ++i) {
      const float total = blockSum(acc[i]);
      if (threadIdx.x == 0)
        y[i * n + j] = total;
    }
  }
}

/// Warps of a helm_cuda_qgemv_staged thread block (kQgemvStagedThreads, KernelParams.h), and the
/// bytes of a row a warp stages at a time (a whole number of blocks, plus room for the 16-byte
/// words that cover them to start up to 15 bytes early and end up to 15 bytes late).
constexpr int kStagedWarps = kQgemvStagedThreads / 32;
constexpr int kStageBytes = 1024 + 32;

/// helm_cuda_qgemv reads a weight with single-byte loads (blocks are at most 2-byte aligned), a
/// warp one group of 34 bytes or less at a time: too few bytes in flight to approach the memory's
/// bandwidth. Here a thread block takes kQgemvStagedRows output rows and its warps split each row's
/// blocks into contiguous ranges of equal length. A warp copies a stage of its range, for every one
/// of the rows, into shared memory with 16-byte asynchronous copies (cp.async: no registers held
/// while the bytes travel; up to 4 KiB per warp in flight), then decodes the stage's groups from
/// shared memory with weightAt (the same bit-exact dequantization), lane l weight l of each group,
/// and multiplies each weight into every row of x. A lane's x values are loaded once per group and
/// reused for the kQgemvStagedRows weight rows. The per-warp sums are added through shared memory
/// at the end of the step.
///
/// The shared memory is the kernel's (one StagedShared), not each instantiation's: a __shared__
/// array declared in the template would be allocated once per format.
struct StagedShared {
  __align__(16) uint8_t stage[kStagedWarps][kQgemvStagedRows][kStageBytes];
  float partial[kStagedWarps][kQgemvStagedRows * kQgemvMaxRows];
};

template <int F>
__device__ void qgemvStaged(const float *x, const uint8_t *w, float *y, int64_t m, int64_t k,
                            int64_t n, StagedShared &shared) {
  // The contract's block table; with F a constant the compiler folds these.
  const int64_t blockBytes = helm_dtype_block_bytes(F);
  const int64_t groupsPerBlock = helm_dtype_block_weights(F) / 32;
  const int64_t stageBlocks = (kStageBytes - 32) / blockBytes;
  auto &stage = shared.stage;
  auto &partial = shared.partial;
  const int lane = int(threadIdx.x & 31u), warp = int(threadIdx.x >> 5);
  const int64_t blocksPerRow = k / (32 * groupsPerBlock), rowBytes = blocksPerRow * blockBytes;
  const int64_t share = (blocksPerRow + kStagedWarps - 1) / kStagedWarps;
  const int64_t first = min(blocksPerRow, warp * share), last = min(blocksPerRow, first + share);
  for (int64_t j0 = int64_t(blockIdx.x) * kQgemvStagedRows; j0 < n;
       j0 += int64_t(gridDim.x) * kQgemvStagedRows) {
    const int rows = int(min(int64_t(kQgemvStagedRows), n - j0));
    float acc[kQgemvStagedRows][kQgemvMaxRows];
#pragma unroll
    for (int r = 0; r < kQgemvStagedRows; ++r)
#pragma unroll
      for (int i = 0; i < kQgemvMaxRows; ++i)
        acc[r][i] = 0.0f;
    for (int64_t b0 = first; b0 < last; b0 += stageBlocks) {
      const int64_t b1 = min(last, b0 + stageBlocks);
      const int64_t word0 = b0 * blockBytes / 16, word1 = (b1 * blockBytes + 15) / 16;
      for (int r = 0; r < rows; ++r) {
        const uint8_t *src = w + (j0 + r) * rowBytes;
        for (int64_t word = word0 + lane; word < word1; word += 32)
          __pipeline_memcpy_async(&stage[warp][r][(word - word0) * 16], src + word * 16, 16);
      }
      __pipeline_commit();
      __pipeline_wait_prior(0);
      __syncwarp();
      // The stage's first block starts `skip` bytes into the first word.
      const int skip = int(b0 * blockBytes - word0 * 16);
      const int64_t groups = (b1 - b0) * groupsPerBlock;
      const float *xg = x + b0 * groupsPerBlock * 32 + lane;
      for (int64_t g = 0; g < groups; ++g, xg += 32) {
        float xv[kQgemvMaxRows];
#pragma unroll
        for (int i = 0; i < kQgemvMaxRows; ++i)
          xv[i] = i < m ? xg[i * k] : 0.0f;
#pragma unroll
        for (int r = 0; r < kQgemvStagedRows; ++r) {
          if (r >= rows)
            break;
          const float v = weightAt<F>(&stage[warp][r][skip], g, lane);
#pragma unroll
          for (int i = 0; i < kQgemvMaxRows; ++i)
            if (i < m)
              acc[r][i] += v * xv[i];
        }
      }
      // Every lane is done reading the stage before the next copy overwrites it.
      __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < kQgemvStagedRows; ++r)
#pragma unroll
      for (int i = 0; i < kQgemvMaxRows; ++i)
        if (i < m) {
          const float total = warpSum(acc[r][i]);
          if (lane == 0)
            partial[warp][r * kQgemvMaxRows + i] = total;
        }
    __syncthreads();
    const int t = int(threadIdx.x), r = t / kQgemvMaxRows, i = t % kQgemvMaxRows;
    if (r < rows && i < m) {
      float total = 0.0f;
      for (int wp = 0; wp < kStagedWarps; ++wp)
        total += partial[wp][t];
      y[i * n + j0 + r] = total;
    }
    // partial is written again by the next step.
    __syncthreads();
  }
}

/// The byte-load GEMV keeps a warp's lanes on one 32-weight group at a time (34 bytes or less in
/// flight per warp, single-byte loads); here a warp takes kQgemvQ4KRowsPerWarp output rows and 4
/// super-blocks of each at a time, 8 lanes per super-block (QuantLanes.h): lane part p loads the
/// super-block's 16 header bytes (the 8 lanes read the same ones) and its 16 code bytes with one
/// 16-byte load each, 576 bytes per row and warp in all, and decodes its 32 weights with the exact
/// dequantization. Each load of x (16-byte, the 16 consecutive x values a nibble half of the part
/// multiplies) serves all of the warp's weight rows: x comes from the L1 cache, whose bandwidth,
/// not the memory's, bounds a GEMV that reads 4 bytes of x per weight for one weight row. The next
/// super-blocks' words are loaded before the current ones are decoded, so a warp's loads overlap
/// its arithmetic; they are streaming loads (evict first), read once, so that x stays cached.
/// Products are f32 fused multiply-adds; each lane's sums are added by a warp reduction.
__device__ __forceinline__ void q4kWords(const uint4 &v, uint32_t (&words)[4]) {
  words[0] = v.x;
  words[1] = v.y;
  words[2] = v.z;
  words[3] = v.w;
}

__device__ void qgemvQ4K(const float *x, const uint8_t *w, float *y, int64_t m, int64_t k,
                         int64_t n) {
  constexpr int rowsPerWarp = kQgemvQ4KRowsPerWarp, warpsPerBlock = kQgemvQ4KThreads / 32;
  constexpr int blocksAtOnce = 32 / kQ4KLaneParts;
  const int lane = int(threadIdx.x & 31u), part = lane % kQ4KLaneParts,
            slot = lane / kQ4KLaneParts, codeOffset = q4kLaneCodeOffset(part);
  const int64_t blocks = k / 256, rowBytes = blocks * int64_t(sizeof(BlockQ4K));
  const int64_t warp = int64_t(blockIdx.x) * warpsPerBlock + (threadIdx.x >> 5),
                warps = int64_t(gridDim.x) * warpsPerBlock;
  for (int64_t j0 = warp * rowsPerWarp; j0 < n; j0 += warps * rowsPerWarp) {
    // Rows past the last (odd n) read the last row again and write nothing.
    const uint8_t *rows[rowsPerWarp];
#pragma unroll
    for (int r = 0; r < rowsPerWarp; ++r)
      rows[r] = w + min(j0 + r, n - 1) * rowBytes;
    float acc[rowsPerWarp][kQgemvMaxRows];
#pragma unroll
    for (int r = 0; r < rowsPerWarp; ++r)
#pragma unroll
      for (int i = 0; i < kQgemvMaxRows; ++i)
        acc[r][i] = 0.0f;
    uint4 header[rowsPerWarp], codes[rowsPerWarp];
    int64_t b = slot;
    if (b < blocks)
#pragma unroll
      for (int r = 0; r < rowsPerWarp; ++r) {
        const uint8_t *block = rows[r] + b * int64_t(sizeof(BlockQ4K));
        header[r] = __ldcs(reinterpret_cast<const uint4 *>(block));
        codes[r] = __ldcs(reinterpret_cast<const uint4 *>(block + codeOffset));
      }
    for (; b < blocks; b += blocksAtOnce) {
      uint32_t headerWords[rowsPerWarp][4], codeWords[rowsPerWarp][4];
#pragma unroll
      for (int r = 0; r < rowsPerWarp; ++r) {
        q4kWords(header[r], headerWords[r]);
        q4kWords(codes[r], codeWords[r]);
      }
      if (b + blocksAtOnce < blocks)
#pragma unroll
        for (int r = 0; r < rowsPerWarp; ++r) {
          const uint8_t *block = rows[r] + (b + blocksAtOnce) * int64_t(sizeof(BlockQ4K));
          header[r] = __ldcs(reinterpret_cast<const uint4 *>(block));
          codes[r] = __ldcs(reinterpret_cast<const uint4 *>(block + codeOffset));
        }
      const float *xb = x + b * 256;
#pragma unroll
      for (int high = 0; high < 2; ++high) {
        float weights[rowsPerWarp][16];
#pragma unroll
        for (int r = 0; r < rowsPerWarp; ++r)
          q4kLaneHalf(headerWords[r], codeWords[r], part, high, weights[r]);
        const float *xh = xb + q4kLaneFirstWeight(part, high);
#pragma unroll
        for (int i = 0; i < kQgemvMaxRows; ++i) {
          if (i >= m)
            break;
          const float4 *xv = reinterpret_cast<const float4 *>(xh + i * k);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const float4 v = __ldg(xv + t);
#pragma unroll
            for (int r = 0; r < rowsPerWarp; ++r) {
              float a = acc[r][i];
              a = fmaf(weights[r][4 * t + 0], v.x, a);
              a = fmaf(weights[r][4 * t + 1], v.y, a);
              a = fmaf(weights[r][4 * t + 2], v.z, a);
              a = fmaf(weights[r][4 * t + 3], v.w, a);
              acc[r][i] = a;
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < rowsPerWarp; ++r)
#pragma unroll
      for (int i = 0; i < kQgemvMaxRows; ++i)
        if (i < m) {
          const float total = warpSum(acc[r][i]);
          if (lane == 0 && j0 + r < n)
            y[i * n + j0 + r] = total;
        }
  }
}

/// One thread block per picked row, threads over its weights.
template <typename T, int F>
__device__ void embedBlocksOf(const uint8_t *table, const int64_t *ids, T *y, int64_t rows,
                              int64_t vocab, int64_t width) {
  const int64_t bytes = rowBytes<F>(width);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t id = min(max(ids[r], int64_t(0)), vocab - 1);
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
      store(y + r * width + c, weightAt<F>(table + id * bytes, c / 32, int(c % 32)));
  }
}

template <typename T>
__device__ void embedBlocks(const uint8_t *table, int32_t format, const int64_t *ids, T *y,
                            int64_t rows, int64_t vocab, int64_t width) {
  forFormat(format, [&](auto f) { embedBlocksOf<T, decltype(f)::value>(table, ids, y, rows, vocab, width); });
}

} // namespace helm_cuda

extern "C" __global__ void helm_cuda_dequantize_rows(const uint8_t *w, int32_t format, float *out,
                                                     int64_t rows, int64_t k) {
  helm_cuda::forFormat(format, [&](auto f) { helm_cuda::dequantizeRows<decltype(f)::value>(w, out, rows, k); });
}

extern "C" __global__ void helm_cuda_dequantize_rows_f16(const uint8_t *w, int32_t format, __half *out,
                                                         int64_t rows, int64_t k) {
  helm_cuda::forFormat(format, [&](auto f) { helm_cuda::dequantizeRows<decltype(f)::value>(w, out, rows, k); });
}

extern "C" __global__ void helm_cuda_qgemv(const float *x, const uint8_t *w, int32_t format,
                                           float *y, int64_t m, int64_t k, int64_t n) {
  helm_cuda::forFormat(format, [&](auto f) { helm_cuda::qgemv<decltype(f)::value>(x, w, y, m, k, n); });
}

extern "C" __global__ void __launch_bounds__(helm_cuda::kQgemvStagedThreads)
    helm_cuda_qgemv_staged(const float *x, const uint8_t *w, int32_t format, float *y, int64_t m,
                           int64_t k, int64_t n) {
  __shared__ helm_cuda::StagedShared shared;
  helm_cuda::forFormat(format,
                       [&](auto f) { helm_cuda::qgemvStaged<decltype(f)::value>(x, w, y, m, k, n, shared); });
}

extern "C" __global__ void __launch_bounds__(helm_cuda::kQgemvQ4KThreads)
    helm_cuda_qgemv_q4k(const float *x, const uint8_t *w, float *y, int64_t m, int64_t k,
                        int64_t n) {
  helm_cuda::qgemvQ4K(x, w, y, m, k, n);
}

#define HELM_EMBED_BLOCKS_PARAMS(T)                                                                \
  (const uint8_t *table, int32_t format, const int64_t *ids, T *y, int64_t rows, int64_t vocab,    \
   int64_t width)
HELM_CUDA_TYPED_KERNELS(helm_cuda_embed_blocks, helm_cuda::embedBlocks, HELM_EMBED_BLOCKS_PARAMS,
                        (table, format, ids, y, rows, vocab, width))
