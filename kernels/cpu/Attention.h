//===- Attention.h - causal grouped-query attention over a KV cache ---------------===//
//
// One kernel serves prefill (S query rows) and decode (S = 1). The keys and values of the
// sequence live in the runtime's cache as f32 or f16 rows, possibly split into several runs
// (pages); the kernel sees them as a list of spans. Design and numerics: docs/kernels.md, "Attention".
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CPU_ATTENTION_H
#define HELM_KERNELS_CPU_ATTENTION_H

#include "kernels/common/Numeric.h"

#include <cstdint>
#include <vector>

namespace helm::kernels {

/// `count` cached positions starting at position `start`: key row t is k + t * kvStride elements
/// of the problem's kvType (and the same for v); each row holds kvHeads * headDim of them.
struct KvSpan {
  const void *k, *v;
  int64_t start, count;
};

struct AttentionProblem {
  const void *q; ///< [S, heads * headDim] of dt: this call's queries of one sequence
  void *out;     ///< [S, heads * headDim] of dt
  DType dt;
  int64_t S, heads, kvHeads, headDim;
  int64_t kvStride; ///< elements between consecutive cached rows (at least kvHeads * headDim)
  float scale;
  int64_t past;   ///< cached positions before this call's first query (query s is at past + s)
  int64_t window; ///< > 0: query at position p sees keys p - window + 1 .. p only
  const KvSpan *spans; ///< ascending, contiguous, covering positions [0, past + S)
  int64_t numSpans;
  /// The cached rows' element type: f32, or f16 (widened as loaded; products and sums stay f32).
  DType kvType = DType::f32;
  /// Elements from kv head g's row of a position to head g + 1's. 0: headDim, the cached row of a
  /// position holds every kv head side by side (kvStride >= kvHeads * headDim). A cache that keeps
  /// each head's rows together (head-major: kvStride = headDim, headStride = its capacity times
  /// headDim) lets a head's keys and values be read as one sequential stream.
  int64_t headStride = 0;
  /// > 0: each scaled score s becomes tanh(s * (1 / softcap)) * softcap before the softmax (Gemma
  /// 2's attention logit soft-capping, as llama.cpp computes it).
  float softcap = 0.0f;
};

/// out = softmax(q . K^T * scale, causal) . V per head, head h reading kv head h / (heads /
/// kvHeads). f32 products and sums; for f16/bf16 the scores, the probabilities and the output are
/// rounded to dt where the reference frameworks round them. Threads over (kv head, query block).
void attendCausal(const AttentionProblem &p);

/// Several problems at once (a decode batch: one sequence each), in one dispatch on the thread
/// pool over all their (kv head, query block) items. Each item streams over its problem's spans as
/// StreamingAttention streams over pages, so each problem's output equals StreamingAttention's
/// with its spans added in order as pages (and attendCausal's when it has one span). Every span
/// must stay readable until the call returns.
void attendBatch(const AttentionProblem *problems, int64_t count);

/// The same attention computed page by page (streaming paged attention): only the page being
/// added has to be in memory. For every query row and head it keeps the online-softmax state
/// (m: the largest score so far, l: the sum of exp(score - m), o: the output normalised by l, f32)
/// and merges each page's own (m_p, l_p, o_p) into it. Within a page the arithmetic and the
/// roundings are attendCausal's over that page's keys, so a context that fits one page gives
/// attendCausal's result exactly. Threads over (kv head, query block) in addPage.
///
///   StreamingAttention att;
///   att.begin(problem);            // problem.spans is not read
///   for (each page, ascending)     // pages need not be full; together they cover [0, past + S)
///     att.addPage(span);
///   att.end();                     // writes problem.out, rounded to problem.dt
class StreamingAttention {
public:
  void begin(const AttentionProblem &p);
  void addPage(const KvSpan &page);
  void end();
  int64_t pages() const { return pages_; }

private:
  AttentionProblem problem_{};
  std::vector<float> max_, sum_, out_; // per query (row * heads + head); out_ has headDim each
  int64_t pages_ = 0;
};

} // namespace helm::kernels

#endif
