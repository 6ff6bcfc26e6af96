//===- Attention.cu - KV append and streaming causal GQA attention over cache spans --===//
//
// helm_cuda_kv_append: widens the call's new keys and values to f32 into the KV cache's rows.
//   For each segment s of `batch` (one per grid.y) and e in [0, s.rows * width):
//     s.k[e] = float(k[s.srcRow * width + e]),  s.v[e] = float(v[s.srcRow * width + e])
//   Launch: grid.y = batch.count, any grid.x and blockDim.x (grid-stride over a segment's
//   elements), no dynamic shared memory.
//
//   helm_cuda_kv_append(const T *k, const T *v, KvAppendBatch batch, int32_t width)
//
// helm_cuda_attention: causal grouped-query attention of one sequence's queries over the KV
// cache, streamed span by span with an online softmax, so that no score matrix is ever stored and
// a span (a cache page) is read once per query and head.
//   Query i (row i of q, [seq, heads * head_dim]) is at position pos = past + i and sees keys
//   t in [lo, pos] with lo = max(0, pos - window + 1) when window > 0, else 0. Query head h reads
//   kv head g = h / group (group = heads / kv_heads). With f32 products and sums:
//     score_t = round(q . k_t * scale)                 (rounded to T, as the reference rounds it)
//   or, with softcap > 0 (Gemma 2), round(tanh(q . k_t * scale * (1 / softcap)) * softcap).
//     m = max score, s = sum_t exp(score_t - m), o = sum_t exp(score_t - m) v_t
//     out = round(o / s)
//   The probabilities are not rounded to T (the CPU kernel rounds them; the online form never
//   holds them normalised), a difference within T's rounding of the result.
//
//   Work: one block per (query row, head), blockIdx.x = i * heads + h; 8 warps
//   (kAttentionThreads). Warp w takes keys in steps of 4 (w * 4 + 32 * n within each span), so a
//   warp has 4 keys' loads in flight; each lane holds the query and the output accumulator for
//   dims lane + 32 j (DPL = ceil(head_dim / 32) of them, 1/2/4/8 instantiated), dot products are
//   lane partials summed with warp shuffles. Each warp keeps its own (m, s, o) and updates it
//   once per 4 keys: m' = max(m, scores), o = o * exp(m - m') + sum p_t v_t. At the end the
//   warps' states merge through shared memory (with the state a previous launch saved, under
//   kAttentionResume), and the block writes round(o / s) (kAttentionFinish) or saves the merged
//   (m, s, o) to `state` for the next launch.
//
//   A launch takes at most kAttentionSpans spans; a sequence with more is attended in several
//   launches over the same grid: the first without kAttentionResume, the last with
//   kAttentionFinish, `state` ([seq * heads][head_dim + 2] f32: m, s, o[head_dim]) carrying the
//   state between them. With both flags in one launch `state` is not touched (may be null).
//   A block whose query sees no key of this launch's spans contributes nothing (m = -inf).
//
//   Launch: grid.x = seq * heads, blockDim.x = kAttentionThreads, no dynamic shared memory
//   (8.2 KiB static). head_dim in [1, kAttentionMaxHeadDim]; kv_width = kv_heads * head_dim is
//   the floats between consecutive cached rows.
//
//   helm_cuda_attention(const T *q, T *out, float *state, KvSpanBatch spans, int32_t heads,
//                       int32_t group, int32_t head_dim, int32_t kv_width, int64_t past,
//                       int64_t window, float scale, int32_t flags, float softcap)
//
// T = float; _f16 / _bf16 variants take __half / __nv_bfloat16 for q, out, k and v (the cache
// is f32 whatever T is).
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"
#include "KernelParams.h"

namespace helm_cuda {

template <typename T>
__device__ void kvAppend(const T *k, const T *v, const KvAppendBatch &batch, int32_t width) {
  if (int32_t(blockIdx.y) >= batch.count)
    return;
  const KvAppendSegment &s = batch.segment[blockIdx.y];
  const int64_t n = s.rows * width;
  const T *ks = k + s.srcRow * width, *vs = v + s.srcRow * width;
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    s.k[e] = load(ks + e);
    s.v[e] = load(vs + e);
  }
}

constexpr int kAttentionWarps = kAttentionThreads / 32;
/// Keys a warp scores at once: their loads are independent, so 4 are in flight per warp.
constexpr int kKeysPerStep = 4;

/// The block's shared memory: each warp's (m, s, o) for the merge.
struct AttentionShared {
  float m[kAttentionWarps];
  float s[kAttentionWarps];
  float o[kAttentionWarps][kAttentionMaxHeadDim];
};

/// This lane's dimensions (lane + 32 j) of rows t .. t + kKeysPerStep - 1 of a span's K or V for
/// one kv head (`base`: that head's first column of the span's row `first`); rows at or past `t1`
/// and dimensions past `headDim` read as 0.
template <int DPL>
__device__ __forceinline__ void loadRows(const float *base, int64_t t, int64_t t1, int64_t first,
                                         int32_t kvWidth, int32_t headDim, int lane,
                                         float (&rows)[kKeysPerStep][DPL]) {
#pragma unroll
  for (int u = 0; u < kKeysPerStep; ++u) {
    const bool valid = t + u < t1;
    const float *row = base + (t + u - first) * kvWidth;
#pragma unroll
    for (int j = 0; j < DPL; ++j) {
      const int d = lane + 32 * j;
      rows[u][j] = valid && d < headDim ? row[d] : 0.0f;
    }
  }
}

template <typename T, int DPL>
__device__ void attendRow(const T *q, T *out, float *state, const KvSpanBatch &spans, int32_t heads,
                          int32_t group, int32_t headDim, int32_t kvWidth, int64_t past,
                          int64_t window, float scale, int32_t flags, float softcap,
                          AttentionShared &shared) {
  const int64_t item = blockIdx.x; // i * heads + h
  const int64_t i = item / heads;
  const int32_t h = int32_t(item % heads), g = h / group;
  const int64_t pos = past + i;
  const int64_t lo = window > 0 ? max(int64_t(0), pos - window + 1) : int64_t(0), hi = pos + 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool resume = flags & kAttentionResume, finish = flags & kAttentionFinish;
  float *itemState = state ? state + item * (int64_t(headDim) + 2) : nullptr;

  // The saved state's m and s, read by every thread before the barrier below: thread 0 rewrites
  // them after it.
  float savedM = -INFINITY, savedS = 0.0f;
  if (resume) {
    savedM = itemState[0];
    savedS = itemState[1];
  }

  float qr[DPL], o[DPL];
  const T *qRow = q + item * headDim;
#pragma unroll
  for (int j = 0; j < DPL; ++j) {
    const int d = lane + 32 * j;
    qr[j] = d < headDim ? load(qRow + d) : 0.0f;
    o[j] = 0.0f;
  }
  float m = -INFINITY, s = 0.0f;

  for (int32_t si = 0; si < spans.count; ++si) {
    const KvSpanDesc &span = spans.span[si];
    const int64_t t0 = max(lo, span.first), t1 = min(hi, span.first + span.count);
    // Row t of this kv head: base + (t - span.first) * kvWidth.
    const float *kBase = span.k + int64_t(g) * headDim, *vBase = span.v + int64_t(g) * headDim;
    for (int64_t t = t0 + warp * kKeysPerStep; t < t1; t += kAttentionWarps * kKeysPerStep) {
      // Scores of keys t .. t + 3 (those past t1 are masked).
      float dot[kKeysPerStep];
      {
        float kv[kKeysPerStep][DPL];
        loadRows<DPL>(kBase, t, t1, span.first, kvWidth, headDim, lane, kv);
#pragma unroll
        for (int u = 0; u < kKeysPerStep; ++u) {
          dot[u] = 0.0f;
#pragma unroll
          for (int j = 0; j < DPL; ++j)
            dot[u] = fmaf(qr[j], kv[u][j], dot[u]);
        }
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
#pragma unroll
        for (int u = 0; u < kKeysPerStep; ++u)
          dot[u] += __shfl_xor_sync(0xffffffffu, dot[u], offset);

      float score[kKeysPerStep];
      float mNew = m;
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        float scaled = __fmul_rn(dot[u], scale);
        if (softcap > 0.0f)
          scaled = __fmul_rn(tanhf(__fmul_rn(scaled, 1.0f / softcap)), softcap);
        score[u] = t + u < t1 ? roundTo<T>(scaled) : -INFINITY;
        mNew = fmaxf(mNew, score[u]);
      }
      // Key t is valid, so mNew is finite; on a warp's first step m = -inf and corr = 0.
      const float corr = expf(m - mNew);
      float p[kKeysPerStep];
      float pSum = 0.0f;
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        p[u] = t + u < t1 ? expf(score[u] - mNew) : 0.0f;
        pSum += p[u];
      }
      s = s * corr + pSum;
      m = mNew;
      float vv[kKeysPerStep][DPL];
      loadRows<DPL>(vBase, t, t1, span.first, kvWidth, headDim, lane, vv);
#pragma unroll
      for (int j = 0; j < DPL; ++j) {
        float acc = o[j] * corr;
#pragma unroll
        for (int u = 0; u < kKeysPerStep; ++u)
          acc = fmaf(p[u], vv[u][j], acc);
        o[j] = acc;
      }
    }
  }

  // Merge the warps' states (and the saved one) per dim; thread d owns dim d.
  if (lane == 0) {
    shared.m[warp] = m;
    shared.s[warp] = s;
  }
#pragma unroll
  for (int j = 0; j < DPL; ++j) {
    const int d = lane + 32 * j;
    if (d < headDim)
      shared.o[warp][d] = o[j];
  }
  __syncthreads();
  float mAll = resume ? savedM : -INFINITY;
  for (int w = 0; w < kAttentionWarps; ++w)
    mAll = fmaxf(mAll, shared.m[w]);
  for (int d = threadIdx.x; d < headDim; d += blockDim.x) {
    float sAll = 0.0f, oAll = 0.0f;
    // A state with m = -inf saw no key: it contributes nothing (and exp(-inf - -inf) is NaN).
    if (resume && savedM != -INFINITY) {
      const float e = expf(savedM - mAll);
      sAll = savedS * e;
      oAll = itemState[2 + d] * e;
    }
    for (int w = 0; w < kAttentionWarps; ++w) {
      if (shared.m[w] == -INFINITY)
        continue;
      const float e = expf(shared.m[w] - mAll);
      sAll = fmaf(shared.s[w], e, sAll);
      oAll = fmaf(shared.o[w][d], e, oAll);
    }
    if (finish) {
      // s > 0 whenever the query saw a key; causal attention always sees its own position.
      store(out + item * headDim + d, sAll > 0.0f ? oAll / sAll : 0.0f);
    } else {
      itemState[2 + d] = oAll;
      if (d == 0) {
        itemState[0] = mAll;
        itemState[1] = sAll;
      }
    }
  }
}

template <typename T>
__device__ void attention(const T *q, T *out, float *state, const KvSpanBatch &spans, int32_t heads,
                          int32_t group, int32_t headDim, int32_t kvWidth, int64_t past,
                          int64_t window, float scale, int32_t flags, float softcap) {
  __shared__ AttentionShared shared;
  if (headDim <= 32)
    attendRow<T, 1>(q, out, state, spans, heads, group, headDim, kvWidth, past, window, scale,
                    flags, softcap, shared);
  else if (headDim <= 64)
    attendRow<T, 2>(q, out, state, spans, heads, group, headDim, kvWidth, past, window, scale,
                    flags, softcap, shared);
  else if (headDim <= 128)
    attendRow<T, 4>(q, out, state, spans, heads, group, headDim, kvWidth, past, window, scale,
                    flags, softcap, shared);
  else if (headDim <= kAttentionMaxHeadDim)
    attendRow<T, 8>(q, out, state, spans, heads, group, headDim, kvWidth, past, window, scale,
                    flags, softcap, shared);
}

} // namespace helm_cuda

using helm_cuda::KvAppendBatch;
using helm_cuda::KvSpanBatch;

#define HELM_KV_APPEND_PARAMS(T)                                                                   \
  (const T *k, const T *v, const __grid_constant__ KvAppendBatch batch, int32_t width)
HELM_CUDA_TYPED_KERNELS(helm_cuda_kv_append, helm_cuda::kvAppend, HELM_KV_APPEND_PARAMS,
                        (k, v, batch, width))

#define HELM_ATTENTION_PARAMS(T)                                                                   \
  (const T *q, T *out, float *state, const __grid_constant__ KvSpanBatch spans, int32_t heads,     \
   int32_t group, int32_t head_dim, int32_t kv_width, int64_t past, int64_t window, float scale,   \
   int32_t flags, float softcap)
HELM_CUDA_TYPED_KERNELS(helm_cuda_attention, helm_cuda::attention, HELM_ATTENTION_PARAMS,
                        (q, out, state, spans, heads, group, head_dim, kv_width, past, window,
                         scale, flags, softcap))
