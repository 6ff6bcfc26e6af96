//===- StageAbi.cpp - runtime side of the stage ABI: weights and attention --------===//
//
// Attention is computed per (row, query, head) in two passes over the cached keys: scores, then a
// softmax and the weighted sum of values. For half-precision models every step is rounded to the
// model's dtype where the reference framework rounds (scores, probabilities, output), so greedy
// tokens follow ONNX Runtime's. The streaming (online-softmax) form is the paged cache's work.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Numeric.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/helm_kernels.h"
#include "runtime/core/StageContext.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace helm::kernels;
using helm::rt::StageContext;

namespace {
/// A zeroed tensor the size of any weight is not available, so a refused weight fetch hands out
/// this block; the stage's result is discarded anyway because `ctx->error` is set.
alignas(64) const char kNoWeight[64] = {};
} // namespace

extern "C" const void *helm_rt_weight(void *ctx, int64_t id) {
  auto *c = static_cast<StageContext *>(ctx);
  if (id < 0 || id >= c->numWeights) {
    c->error = "the stage asks for a weight id outside the package's tensor table";
    return kNoWeight;
  }
  return c->weights[id];
}

extern "C" void helm_rt_attention(void *ctx, int64_t layer, const void *q, const void *k,
                                  const void *v, void *out, int32_t dtype, int64_t B, int64_t S,
                                  int64_t heads, int64_t kvHeads, int64_t headDim, float scale,
                                  int64_t window) {
  auto *c = static_cast<StageContext *>(ctx);
  DType dt = DType(dtype);
  int64_t kvWidth = kvHeads * headDim, qWidth = heads * headDim;
  // The cache was sized from the manifest; code that disagrees must not write past it.
  if (layer < 0 || layer >= c->kv->layers() || kvWidth != c->kv->rowWidth() || kvHeads <= 0 ||
      heads % kvHeads != 0) {
    c->error = "the stage's attention does not match the package's KV geometry (kv.layers, "
               "kv.kv_heads, kv.head_dim)";
    return;
  }
  // 1. Append this call's keys and values to every row's cache (f16/bf16 widened to f32 first;
  // f32 rows go straight in).
  std::vector<float> kf, vf;
  if (dt != DType::f32) {
    kf.resize(static_cast<size_t>(S * kvWidth));
    vf.resize(static_cast<size_t>(S * kvWidth));
  }
  size_t elem = dt == DType::f32 ? 4 : 2;
  for (int64_t b = 0; b < B; ++b) {
    const char *kb = static_cast<const char *>(k) + size_t(b * S * kvWidth) * elem;
    const char *vb = static_cast<const char *>(v) + size_t(b * S * kvWidth) * elem;
    if (dt == DType::f32) {
      c->kv->write(layer, c->sequence[b], c->past[b], S, reinterpret_cast<const float *>(kb),
                   reinterpret_cast<const float *>(vb));
      continue;
    }
    widen(kb, dt, kf.data(), S * kvWidth);
    widen(vb, dt, vf.data(), S * kvWidth);
    c->kv->write(layer, c->sequence[b], c->past[b], S, kf.data(), vf.data());
  }
  // 2. Attend: one work item per (row, query, head).
  int64_t group = heads / kvHeads;
  pool().parallelFor(B * S * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qv(static_cast<size_t>(headDim)), scores, acc(static_cast<size_t>(headDim));
    for (int64_t item = begin; item < end; ++item) {
      int64_t h = item % heads, s = (item / heads) % S, b = item / (heads * S);
      int64_t pos = c->past[b] + s;
      int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      int64_t g = h / group;
      size_t qOffset = size_t((b * S + s) * qWidth + h * headDim);
      for (int64_t d = 0; d < headDim; ++d)
        qv[size_t(d)] = loadAs(q, dt, int64_t(qOffset) + d);
      scores.assign(static_cast<size_t>(pos + 1 - first), 0.0f);
      float maxScore = -std::numeric_limits<float>::infinity();
      c->kv->forEachSpan(layer, c->sequence[b], first, pos + 1,
                         [&](const float *ks, const float *, int64_t start, int64_t count) {
                           for (int64_t t = 0; t < count; ++t) {
                             const float *kr = ks + t * kvWidth + g * headDim;
                             float dot = 0;
                             for (int64_t d = 0; d < headDim; ++d)
                               dot += qv[size_t(d)] * kr[d];
                             float sc = roundTo(dot * scale, dt);
                             scores[size_t(start + t - first)] = sc;
                             maxScore = std::max(maxScore, sc);
                           }
                         });
      float sum = 0;
      for (float &sc : scores) {
        sc = std::exp(sc - maxScore);
        sum += sc;
      }
      float inv = 1.0f / sum;
      for (float &sc : scores)
        sc = roundTo(sc * inv, dt);
      std::fill(acc.begin(), acc.end(), 0.0f);
      c->kv->forEachSpan(layer, c->sequence[b], first, pos + 1,
                         [&](const float *, const float *vs, int64_t start, int64_t count) {
                           for (int64_t t = 0; t < count; ++t) {
                             float p = scores[size_t(start + t - first)];
                             const float *vr = vs + t * kvWidth + g * headDim;
                             for (int64_t d = 0; d < headDim; ++d)
                               acc[size_t(d)] += p * vr[d];
                           }
                         });
      for (int64_t d = 0; d < headDim; ++d)
        storeAs(out, dt, int64_t(qOffset) + d, acc[size_t(d)]);
    }
  });
}

namespace helm::rt {
const void *const *stageAbiSymbols() {
  static const void *const symbols[] = {reinterpret_cast<const void *>(&helm_k_linear),
                                        reinterpret_cast<const void *>(&helm_rt_weight),
                                        reinterpret_cast<const void *>(&helm_rt_attention),
                                        nullptr};
  return symbols;
}
} // namespace helm::rt
