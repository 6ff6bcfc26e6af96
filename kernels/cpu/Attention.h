//===- Attention.h - causal grouped-query attention over a KV cache ---------------===//
//
// One kernel serves prefill (S query rows) and decode (S = 1). The keys and values of the
// sequence live in the runtime's cache as f32 rows, possibly split into several runs (pages); the
// kernel sees them as a list of spans. Design and numerics: docs/kernels.md, "Attention".
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_ATTENTION_H
#define HELM_KERNELS_CPU_ATTENTION_H

#include "kernels/cpu/Numeric.h"

#include <cstdint>

namespace helm::kernels {

/// `count` cached positions starting at position `start`: key row t is k + t * kvStride (and the
/// same for v); each row holds kvHeads * headDim floats.
struct KvSpan {
  const float *k, *v;
  int64_t start, count;
};

struct AttentionProblem {
  const void *q; ///< [S, heads * headDim] of dt: this call's queries of one sequence
  void *out;     ///< [S, heads * headDim] of dt
  DType dt;
  int64_t S, heads, kvHeads, headDim;
  int64_t kvStride; ///< floats between consecutive cached rows (at least kvHeads * headDim)
  float scale;
  int64_t past;   ///< cached positions before this call's first query (query s is at past + s)
  int64_t window; ///< > 0: query at position p sees keys p - window + 1 .. p only
  const KvSpan *spans; ///< ascending, contiguous, covering positions [0, past + S)
  int64_t numSpans;
};

/// out = softmax(q . K^T * scale, causal) . V per head, head h reading kv head h / (heads /
/// kvHeads). f32 products and sums; for f16/bf16 the scores, the probabilities and the output are
/// rounded to dt where the reference frameworks round them. Threads over (kv head, query block).
void attendCausal(const AttentionProblem &p);

} // namespace helm::kernels

#endif
