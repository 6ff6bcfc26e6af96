//===- Attention.cpp - causal grouped-query attention over a KV cache -------------===//
//
// Work item = (kv head g, block of up to kQueryBlock query rows). The item's queries are the
// block's rows times the `group` heads that read kv head g, so every cached key row is loaded
// from memory once per item and used for all of them (GQA sharing); pass 2 sweeps the value rows
// once per query, from L1/L2 after the first. Two passes over the cached rows:
//   1. scores[t][i] = q_i . k_t (all queries of the item against each key row), then per query
//      scale, round, causal/window mask, max, exp, sum, normalise, round;
//   2. out_i = sum_t p[t][i] v_t with out_i's head_dim accumulators held in registers while the
//      value rows stream past (from L1/L2: one item's rows are at most a few hundred KB).
// The vector primitives exist for AVX-512, AVX2+FMA+F16C and scalar, one file each
// (AttentionImpl.h), picked like the GEMV's (Isa.h). See docs/kernels.md, "Attention".
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Attention.h"

#include "kernels/common/Isa.h"
#include "kernels/cpu/AttentionImpl.h"
#include "kernels/common/ThreadPool.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <immintrin.h>
#include <limits>
#include <type_traits>
#include <vector>

namespace helm::kernels {
namespace {

/// Query rows per work item in prefill: 16 rows x group heads queries share each key row load,
/// and the item's score block (queries x keys) stays in L2 for prompts of a few thousand tokens.
constexpr int64_t kQueryBlock = 16;
using attention::AttentionOps;
using attention::kPrefetchRows;
using attention::prefetchRow;

/// The kernels for `isa` and cache rows of `kvType` (f32 or f16; AttentionProblem says which).
const AttentionOps &opsFor(Isa isa, DType kvType) {
  // The caches hold f32 or f16 rows only (KvCache's rowType); any other type would be read as f32.
  assert(kvType == DType::f32 || kvType == DType::f16);
  switch (isa) {
  case Isa::avx512: return attention::avx512Ops(kvType);
  case Isa::avx2: return attention::avx2Ops(kvType);
  case Isa::scalar: break;
  }
  return attention::scalarOps(kvType);
}

/// Per-thread buffers that only grow (no allocation per item once warm).
struct Scratch {
  std::vector<float> q, scores;
};
Scratch &scratch() {
  thread_local Scratch s;
  return s;
}

/// Attention of work item (kv head g, query rows [s0, s1)) over the cached keys in [k0, k1)
/// only (all keys for the one-pass kernel, one page's for the streaming one). For each of the
/// item's nq queries (i = row * group + j) it leaves in `acc` [nq, D] the output normalised over
/// those keys and not yet rounded, in `maxOut[i]` the largest (rounded) score and in `sumOut[i]`
/// the sum of exp(score - max) over them; a query that sees none of them gets sum 0.
void attendItemRange(const AttentionProblem &p, const AttentionOps &ops, int64_t g, int64_t s0,
                     int64_t s1, int64_t k0, int64_t k1, float *acc, float *maxOut,
                     float *sumOut) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads, qWidth = p.heads * D;
  const int64_t rows = s1 - s0, nq = rows * group, elem = dtypeBytes(p.dt);
  const int64_t kvElem = dtypeBytes(p.kvType), headStride = p.headStride > 0 ? p.headStride : D;
  auto firstKey = [&](int64_t pos) {
    return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : int64_t(0);
  };
  // Keys any query of the block can see, within [k0, k1): [keyBegin, keyEnd).
  const int64_t keyBegin = std::max(k0, firstKey(p.past + s0));
  const int64_t keyEnd = std::min(k1, p.past + s1);
  const int64_t L = std::max<int64_t>(0, keyEnd - keyBegin);

  Scratch &buf = scratch();
  if (buf.q.size() < size_t(nq * D))
    buf.q.resize(size_t(nq * D));
  if (buf.scores.size() < size_t(L * nq))
    buf.scores.resize(size_t(L * nq));
  // Scores query-major, sc[i * L + t]: each query's softmax and its weights in pass 2 are one
  // contiguous row.
  float *qf = buf.q.data(), *sc = buf.scores.data();

  // Query i = (row r, head j of the group): head h = g * group + j.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < group; ++j) {
      int64_t offset = (s0 + r) * qWidth + (g * group + j) * D;
      widen(static_cast<const char *>(p.q) + offset * elem, p.dt, qf + (r * group + j) * D, D);
    }

  // Pass 1: raw scores of every query against every visible key row.
  for (int64_t si = 0; si < p.numSpans; ++si) {
    const KvSpan &span = p.spans[si];
    int64_t t0 = std::max(keyBegin, span.start), t1 = std::min(keyEnd, span.start + span.count);
    const char *k = static_cast<const char *>(span.k);
    if (ops.scoreRows) {
      if (t0 < t1)
        ops.scoreRows(qf, D, nq, k + ((t0 - span.start) * p.kvStride + g * headStride) * kvElem, p.kvStride, t1 - t0, D,
                      sc + (t0 - keyBegin), L);
      continue;
    }
    for (int64_t t = t0; t < t1; ++t) {
      if (t + kPrefetchRows < t1)
        prefetchRow(k + ((t + kPrefetchRows - span.start) * p.kvStride + g * headStride) * kvElem,
                    D * kvElem);
      ops.dotMany(qf, D, nq, k + ((t - span.start) * p.kvStride + g * headStride) * kvElem, D,
                  sc + (t - keyBegin), L);
    }
  }
  for (int64_t n = 0; n < L * nq; ++n)
    sc[n] *= p.scale;
  if (p.softcap > 0.0f) {
    const float inverse = 1.0f / p.softcap;
    for (int64_t n = 0; n < L * nq; ++n)
      sc[n] = std::tanh(sc[n] * inverse) * p.softcap;
  }
  roundInPlace(sc, p.dt, L * nq);

  // Softmax per query over its own visible keys; everything else becomes probability 0.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = p.past + s0 + r;
    // [lo, hi): this query's visible keys within the range, relative to keyBegin.
    // A window can start after this range ends (lo > L): the query sees none of its keys.
    const int64_t lo = std::min(L, std::max(firstKey(pos), keyBegin) - keyBegin);
    const int64_t hi = std::min(L, std::max(lo, std::min(pos + 1, keyEnd) - keyBegin));
    for (int64_t j = 0; j < group; ++j) {
      const int64_t i = r * group + j;
      float *si = sc + i * L;
      float maxScore = -std::numeric_limits<float>::infinity(), sum = 0;
      if (ops.expShifted && hi > lo) {
        sum = ops.expShifted(si + lo, hi - lo, &maxScore);
      } else {
        for (int64_t t = lo; t < hi; ++t)
          maxScore = std::max(maxScore, si[t]);
        for (int64_t t = lo; t < hi; ++t) {
          float e = std::exp(si[t] - maxScore);
          si[t] = e;
          sum += e;
        }
      }
      maxOut[i] = maxScore;
      sumOut[i] = sum;
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      std::fill(si, si + lo, 0.0f);
      for (int64_t t = lo; t < hi; ++t)
        si[t] *= inv;
      std::fill(si + hi, si + L, 0.0f);
    }
  }
  roundInPlace(sc, p.dt, L * nq);

  // Pass 2: out_i = sum_t p[i][t] v_t, span by span, accumulated in f32.
  std::fill(acc, acc + nq * D, 0.0f);
  for (int64_t si = 0; si < p.numSpans; ++si) {
    const KvSpan &span = p.spans[si];
    int64_t t0 = std::max(keyBegin, span.start), t1 = std::min(keyEnd, span.start + span.count);
    if (t0 >= t1)
      continue;
    const char *v = static_cast<const char *>(span.v) + ((t0 - span.start) * p.kvStride + g * headStride) * kvElem;
    if (ops.weightedSumMany) {
      ops.weightedSumMany(sc + (t0 - keyBegin), L, nq, v, p.kvStride, t1 - t0, D, acc, D, true);
      continue;
    }
    // The first query streams the rows in; the others find them in cache.
    for (int64_t i = 0; i < nq; ++i)
      ops.weightedSum(sc + i * L + (t0 - keyBegin), v, p.kvStride, t1 - t0, D, acc + i * D, i == 0);
  }
}

/// Per-thread output block of a work item and its per-query max and sum.
struct ItemScratch {
  std::vector<float> acc, max, sum;
  void fit(int64_t nq, int64_t D) {
    if (acc.size() < size_t(nq * D))
      acc.resize(size_t(nq * D));
    if (max.size() < size_t(nq)) {
      max.resize(size_t(nq));
      sum.resize(size_t(nq));
    }
  }
};
ItemScratch &itemScratch() {
  thread_local ItemScratch s;
  return s;
}

/// Merges one page's result for work item (kv head g, query rows [s0, s1)) -- its (m_p, l_p, o_p)
/// per query in `page` -- into the running (m, l, o) of those queries: query (row r of the item,
/// head j of the group) at index r * rowStride + first + j (StreamingAttention keeps every query
/// of the problem: rowStride = heads, first = s0 * heads + g * group; a batch item only its own:
/// rowStride = group, first = 0); o has headDim floats each:
///   m' = max(m, m_p), a = l e^(m - m'), b = l_p e^(m_p - m'), o' = (a o + b o_p) / (a + b).
/// The first page a query sees is taken as it is, so a context of one page gives exactly the
/// one-pass kernel's result.
void mergePage(const AttentionProblem &p, int64_t rows, const ItemScratch &page, int64_t rowStride, int64_t first,
               float *max, float *sum, float *out) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < group; ++j) {
      const int64_t i = r * group + j;
      const float lp = page.sum[size_t(i)];
      if (!(lp > 0))
        continue;
      const int64_t q = r * rowStride + first + j;
      float &m = max[q], &l = sum[q];
      float *o = out + q * D;
      const float *op = page.acc.data() + i * D;
      const float mp = page.max[size_t(i)];
      if (!(l > 0)) {
        m = mp;
        l = lp;
        std::copy(op, op + D, o);
        continue;
      }
      const float mNew = std::max(m, mp);
      const float a = l * std::exp(m - mNew), b = lp * std::exp(mp - mNew);
      const float inv = 1.0f / (a + b);
      for (int64_t d = 0; d < D; ++d)
        o[d] = (a * o[d] + b * op[d]) * inv;
      m = mNew;
      l = a + b;
    }
}

/// Work item (kv head g, query rows [s0, s1)) of `p` streamed over p.spans as pages, exactly as
/// StreamingAttention computes it, with the running state in per-thread buffers; writes the
/// item's rows of p.out.
void streamItem(const AttentionProblem &p, const AttentionOps &ops, int64_t g, int64_t s0, int64_t s1) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads, elem = dtypeBytes(p.dt);
  const int64_t nq = (s1 - s0) * group;
  ItemScratch &buf = itemScratch();
  buf.fit(nq, D);
  // The running state of the item's nq queries, in the page scratch's order (row * group + head).
  thread_local std::vector<float> runMax, runSum, runOut;
  runMax.assign(size_t(nq), -std::numeric_limits<float>::infinity());
  runSum.assign(size_t(nq), 0.0f);
  runOut.assign(size_t(nq * D), 0.0f);
  for (int64_t si = 0; si < p.numSpans; ++si) {
    const KvSpan &page = p.spans[si];
    if (page.count <= 0)
      continue;
    AttentionProblem pageProblem = p;
    pageProblem.spans = &page;
    pageProblem.numSpans = 1;
    attendItemRange(pageProblem, ops, g, s0, s1, page.start, page.start + page.count, buf.acc.data(),
                    buf.max.data(), buf.sum.data());
    mergePage(p, s1 - s0, buf, group, 0, runMax.data(), runSum.data(), runOut.data());
  }
  for (int64_t r = 0; r < s1 - s0; ++r)
    for (int64_t j = 0; j < group; ++j) {
      const int64_t q = (s0 + r) * p.heads + g * group + j;
      narrow(runOut.data() + (r * group + j) * D, p.dt, static_cast<char *>(p.out) + q * D * elem, D);
    }
}

/// One work item of the one-pass kernel: kv head g, query rows [s0, s1), all keys.
void attendItem(const AttentionProblem &p, const AttentionOps &ops, int64_t g, int64_t s0,
                int64_t s1) {
  const int64_t D = p.headDim, group = p.heads / p.kvHeads, qWidth = p.heads * D;
  const int64_t nq = (s1 - s0) * group, elem = dtypeBytes(p.dt);
  ItemScratch &buf = itemScratch();
  buf.fit(nq, D);
  attendItemRange(p, ops, g, s0, s1, 0, p.past + p.S, buf.acc.data(), buf.max.data(),
                  buf.sum.data());
  for (int64_t r = 0; r < s1 - s0; ++r)
    for (int64_t j = 0; j < group; ++j) {
      int64_t offset = (s0 + r) * qWidth + (g * group + j) * D;
      narrow(buf.acc.data() + (r * group + j) * D, p.dt,
             static_cast<char *>(p.out) + offset * elem, D);
    }
}

/// The query block handed out k-th of `blocks`: 0, B-1, 1, B-2, ... Causal blocks cost more the
/// later they are, so the pool's contiguous halves get about equal work.
int64_t blockOfRank(int64_t k, int64_t blocks) { return k % 2 == 0 ? k / 2 : blocks - 1 - k / 2; }

/// Runs `item(g, s0, s1)` for every work item of `p` on the thread pool.
template <typename Item> void forEachItem(const AttentionProblem &p, Item item) {
  const int64_t blocks = (p.S + kQueryBlock - 1) / kQueryBlock;
  const int64_t items = p.kvHeads * blocks;
  pool().parallelFor(items, 1, [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      int64_t g = it % p.kvHeads, k = it / p.kvHeads;
      int64_t block = blockOfRank(k, blocks);
      int64_t s0 = block * kQueryBlock, s1 = std::min(p.S, s0 + kQueryBlock);
      item(g, s0, s1);
    }
  });
}

} // namespace

void attendCausal(const AttentionProblem &p) {
  if (p.S <= 0 || p.heads <= 0)
    return;
  // The caller (helm_rt_attention) checks the geometry; the spans must cover every visible key.
  assert(p.kvHeads > 0 && p.heads % p.kvHeads == 0 && p.headDim > 0);
  const AttentionOps &ops = opsFor(activeIsa(), p.kvType);
  forEachItem(p, [&](int64_t g, int64_t s0, int64_t s1) { attendItem(p, ops, g, s0, s1); });
}

void attendBatch(const AttentionProblem *problems, int64_t count) {
  const Isa isa = activeIsa();
  // Every item of every problem, kv head outermost: the pool splits the list into contiguous
  // ranges, so each thread gets whole kv heads of every sequence, whatever the sequences' lengths
  // (8 kv heads on 2 threads: 4 each). Within a problem and head, the blocks in forEachItem's order.
  struct Item {
    int64_t problem, g, s0, s1;
  };
  thread_local std::vector<Item> items;
  items.clear();
  int64_t maxKvHeads = 0;
  for (int64_t b = 0; b < count; ++b)
    if (problems[b].S > 0 && problems[b].heads > 0)
      maxKvHeads = std::max(maxKvHeads, problems[b].kvHeads);
  for (int64_t g = 0; g < maxKvHeads; ++g)
    for (int64_t b = 0; b < count; ++b) {
      const AttentionProblem &p = problems[b];
      if (p.S <= 0 || p.heads <= 0 || g >= p.kvHeads)
        continue;
      assert(p.kvHeads > 0 && p.heads % p.kvHeads == 0 && p.headDim > 0);
      const int64_t blocks = (p.S + kQueryBlock - 1) / kQueryBlock;
      for (int64_t k = 0; k < blocks; ++k) {
        const int64_t block = blockOfRank(k, blocks);
        const int64_t s0 = block * kQueryBlock;
        items.push_back({b, g, s0, std::min(p.S, s0 + kQueryBlock)});
      }
    }
  const Item *list = items.data(); // the caller's list: the pool's threads have their own `items`
  pool().parallelFor(int64_t(items.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it)
      streamItem(problems[list[it].problem], opsFor(isa, problems[list[it].problem].kvType),
                 list[it].g, list[it].s0, list[it].s1);
  });
}

void StreamingAttention::begin(const AttentionProblem &p) {
  problem_ = p;
  problem_.spans = nullptr;
  problem_.numSpans = 0;
  int64_t queries = p.S * p.heads;
  max_.assign(size_t(queries), -std::numeric_limits<float>::infinity());
  sum_.assign(size_t(queries), 0.0f);
  out_.assign(size_t(queries * p.headDim), 0.0f);
  pages_ = 0;
}

void StreamingAttention::addPage(const KvSpan &page) {
  const AttentionProblem &p = problem_;
  if (p.S <= 0 || p.heads <= 0 || page.count <= 0)
    return;
  assert(p.kvHeads > 0 && p.heads % p.kvHeads == 0 && p.headDim > 0);
  const AttentionOps &ops = opsFor(activeIsa(), p.kvType);
  AttentionProblem pageProblem = p;
  pageProblem.spans = &page;
  pageProblem.numSpans = 1;
  const int64_t D = p.headDim, group = p.heads / p.kvHeads;
  forEachItem(p, [&](int64_t g, int64_t s0, int64_t s1) {
    const int64_t nq = (s1 - s0) * group;
    ItemScratch &buf = itemScratch();
    buf.fit(nq, D);
    attendItemRange(pageProblem, ops, g, s0, s1, page.start, page.start + page.count,
                    buf.acc.data(), buf.max.data(), buf.sum.data());
    mergePage(p, s1 - s0, buf, p.heads, s0 * p.heads + g * group, max_.data(), sum_.data(), out_.data());
  });
  ++pages_;
}

void StreamingAttention::end() {
  const AttentionProblem &p = problem_;
  const int64_t D = p.headDim, elem = dtypeBytes(p.dt);
  for (int64_t q = 0; q < p.S * p.heads; ++q)
    narrow(out_.data() + q * D, p.dt, static_cast<char *>(p.out) + q * D * elem, D);
}

} // namespace helm::kernels
