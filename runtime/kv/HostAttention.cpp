//===- HostAttention.cpp - append to a host-addressable KV cache, then attend -------===//
//
// The CPU side of attention over a KV cache: the new keys and values are widened to f32 and
// written through KvCache, then the attention kernel (kernels/cpu/Attention.h) streams over the
// spans the cache keeps each sequence's rows in. For half-precision models the kernel rounds to
// the model's dtype where the reference framework rounds (scores, probabilities, output), so
// greedy tokens follow ONNX Runtime's. helm_rt_attention (runtime/abi/RuntimeServices.cpp) and
// the host device ops (runtime/backends/host/HostDeviceOps.cpp) run it.
//
//===----------------------------------------------------------------------===//
#include "runtime/kv/HostAttention.h"

#include "kernels/cpu/Attention.h"
#include "kernels/common/Numeric.h"

#include <algorithm>
#include <vector>

using namespace helm::kernels;

namespace helm::rt {

const char *appendAndAttend(KvCache &kv, const int32_t *sequence, const int64_t *past,
                            int64_t layer, const void *q, const void *k, const void *v, void *out,
                            DType dt, int64_t B, int64_t S, int64_t heads, int64_t kvHeads,
                            int64_t headDim, float scale, int64_t window, float softcap) {
  int64_t kvWidth = kvHeads * headDim, qWidth = heads * headDim;
  // A head-major cache cut its rows into the model's kv heads: this call's must be the same.
  if (kv.positionStride() != kvWidth && kv.positionStride() != headDim)
    return "the KV cache's rows are cut into heads of another size than this attention's";
  // 1. Append this call's keys and values to every row's cache (f16/bf16 widened to f32 first;
  // f32 rows go straight in).
  // Called once per layer per token: the staging rows and the span list are per-thread buffers
  // that only grow, so a decode step allocates nothing here.
  thread_local std::vector<float> kf, vf;
  if (dt != DType::f32 && kf.size() < size_t(S * kvWidth)) {
    kf.resize(static_cast<size_t>(S * kvWidth));
    vf.resize(static_cast<size_t>(S * kvWidth));
  }
  size_t elem = size_t(dtypeBytes(dt));
  for (int64_t b = 0; b < B; ++b) {
    const char *kb = static_cast<const char *>(k) + size_t(b * S * kvWidth) * elem;
    const char *vb = static_cast<const char *>(v) + size_t(b * S * kvWidth) * elem;
    bool stored;
    if (dt == DType::f32) {
      stored = kv.write(layer, sequence[b], past[b], S, reinterpret_cast<const float *>(kb),
                        reinterpret_cast<const float *>(vb));
    } else {
      widen(kb, dt, kf.data(), S * kvWidth);
      widen(vb, dt, vf.data(), S * kvWidth);
      stored = kv.write(layer, sequence[b], past[b], S, kf.data(), vf.data());
    }
    if (!stored)
      return kv.error().c_str();
  }
  // 2. Attend. A cache that does not page keeps every span in host memory for the whole call: all
  // B sequences go to the kernel at once, one thread-pool dispatch over every (sequence, kv head,
  // query block) item (a decode batch of 16 short sequences otherwise pays 16 dispatches per
  // layer, each with 8 small items). A paged cache may bring each page to memory only for its
  // turn: one sequence at a time, streaming over its pages. Both give StreamingAttention's result
  // with the spans as pages; with one span (the contiguous host cache) the one-pass kernel's.
  size_t qBytes = size_t(S * qWidth) * elem;
  auto problemOf = [&](int64_t b) {
    return AttentionProblem{static_cast<const char *>(q) + b * qBytes,
                            static_cast<char *>(out) + b * qBytes,
                            dt,
                            S,
                            heads,
                            kvHeads,
                            headDim,
                            kv.positionStride(),
                            scale,
                            past[b],
                            window,
                            nullptr,
                            0,
                            kv.rowType(),
                            kv.headStride(layer, sequence[b]),
                            softcap};
  };
  // Keys before the first query's window are never visible: their pages are not read.
  auto firstVisible = [&](int64_t b) { return window > 0 ? std::max<int64_t>(0, past[b] - window + 1) : 0; };
  if (kv.pageTokens() == 0) {
    thread_local std::vector<AttentionProblem> problems;
    thread_local std::vector<KvSpan> spans;
    thread_local std::vector<size_t> firstSpan;
    problems.clear();
    spans.clear();
    firstSpan.assign(size_t(B + 1), 0);
    for (int64_t b = 0; b < B; ++b) {
      kv.forEachSpan(layer, sequence[b], firstVisible(b), past[b] + S,
                     [&](const void *ks, const void *vs, int64_t start, int64_t count) {
                       spans.push_back({ks, vs, start, count});
                     });
      firstSpan[size_t(b + 1)] = spans.size();
    }
    for (int64_t b = 0; b < B; ++b) { // spans no longer grows: its addresses are final
      problems.push_back(problemOf(b));
      problems.back().spans = spans.data() + firstSpan[size_t(b)];
      problems.back().numSpans = int64_t(firstSpan[size_t(b + 1)] - firstSpan[size_t(b)]);
    }
    attendBatch(problems.data(), B);
    return nullptr;
  }
  thread_local StreamingAttention attention;
  for (int64_t b = 0; b < B; ++b) {
    attention.begin(problemOf(b));
    kv.forEachSpan(layer, sequence[b], firstVisible(b), past[b] + S,
                   [&](const void *ks, const void *vs, int64_t start, int64_t count) {
                     attention.addPage({ks, vs, start, count});
                   });
    attention.end();
  }
  return nullptr;
}

} // namespace helm::rt
