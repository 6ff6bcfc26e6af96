//===- StreamingAttentionTest.cpp - kernels::StreamingAttention (paged, online softmax) -===//
//
// The streaming kernel sees the KV cache one page at a time and merges each page's softmax
// partial into a running (m, l, o) state. References: the thesis' six-token example worked by
// hand, attendCausal (the one-pass kernel, itself tested against float64 in AttentionKernelTest)
// and a float64 softmax written here.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Attention.h"
#include "kernels/common/ThreadPool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

namespace hk = helm::kernels;

namespace {

/// Keys and values of `total` positions, row stride `stride` floats.
struct Cache {
  std::vector<float> k, v;
  int64_t stride;
};

/// Streams `cache` in pages of `page` positions (each page a separate copy, so a kernel that reads
/// past its page reads garbage) and returns the output.
std::vector<float> streamed(const hk::AttentionProblem &base, const Cache &cache, int64_t total,
                            int64_t page) {
  std::vector<float> out(size_t(base.S * base.heads * base.headDim), -7.0f);
  hk::AttentionProblem p = base;
  p.out = out.data();
  hk::StreamingAttention att;
  att.begin(p);
  for (int64_t start = 0; start < total; start += page) {
    int64_t count = std::min(page, total - start);
    std::vector<float> k(cache.k.begin() + start * cache.stride,
                         cache.k.begin() + (start + count) * cache.stride);
    std::vector<float> v(cache.v.begin() + start * cache.stride,
                         cache.v.begin() + (start + count) * cache.stride);
    k.push_back(NAN); // a read past the page poisons the result
    v.push_back(NAN);
    att.addPage({k.data(), v.data(), start, count});
  }
  att.end();
  EXPECT_EQ(att.pages(), (total + page - 1) / page);
  return out;
}

std::vector<float> onePass(const hk::AttentionProblem &base, const Cache &cache, int64_t total) {
  std::vector<float> out(size_t(base.S * base.heads * base.headDim), -7.0f);
  hk::AttentionProblem p = base;
  p.out = out.data();
  hk::KvSpan span{cache.k.data(), cache.v.data(), 0, total};
  p.spans = &span;
  p.numSpans = 1;
  hk::attendCausal(p);
  return out;
}

} // namespace

// Thesis example: one query, scores 2, 4, 1, 0, 1, 2 (q = 1, keys = the scores, scale 1) over
// values 10, 30, 5, 2, 8, 12. Softmax-weighted mean = 1837.84 / 75.81 = 24.24 ("24.2"), whatever
// the page size.
TEST(StreamingAttention, ThesisSixTokenExample) {
  const float scores[6] = {2, 4, 1, 0, 1, 2}, values[6] = {10, 30, 5, 2, 8, 12};
  double num = 0, den = 0;
  for (int t = 0; t < 6; ++t) {
    num += std::exp(double(scores[t])) * values[t];
    den += std::exp(double(scores[t]));
  }
  const double expected = num / den;
  EXPECT_NEAR(expected, 24.2, 0.05);
  Cache cache{std::vector<float>(scores, scores + 6), std::vector<float>(values, values + 6), 1};
  float q = 1.0f;
  // The query is the 6th token (past 5), so it sees all six keys.
  hk::AttentionProblem p{&q, nullptr, hk::DType::f32, 1, 1, 1, 1, 1, 1.0f, 5, 0, nullptr, 0};
  for (int64_t page : {1, 2, 3, 4, 5, 6}) {
    std::vector<float> out = streamed(p, cache, 6, page);
    EXPECT_NEAR(out[0], expected, 1e-5 * expected) << "page " << page;
  }
}

// Random problems: streaming equals the one-pass kernel (relative error of each output row
// <= 1e-5 in f32) for page sizes 1, 7 and 512, contexts that are not multiples of the page,
// GQA ratios 1, 4 and 8, decode and prefill rows, with and without a sliding window.
TEST(StreamingAttention, EqualsOnePassOnRandomProblems) {
  struct Case {
    int64_t heads, kvHeads, headDim, S, past, window;
  };
  const Case cases[] = {{4, 4, 16, 1, 1001, 0},  {8, 2, 32, 1, 777, 0},  {16, 2, 64, 1, 1300, 0},
                        {8, 1, 8, 5, 600, 0},    {4, 1, 16, 33, 90, 0},   {8, 2, 16, 1, 1030, 300},
                        {4, 4, 24, 20, 513, 17}, {8, 8, 128, 1, 1025, 0}, {16, 4, 40, 3, 2, 0}};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int threads : {1, 2}) {
    hk::setThreads(threads);
    for (const Case &c : cases) {
      const int64_t total = c.past + c.S, D = c.headDim, stride = c.kvHeads * D + 2;
      Cache cache{std::vector<float>(size_t(total * stride)),
                  std::vector<float>(size_t(total * stride)), stride};
      for (float &x : cache.k)
        x = uni(rng);
      for (float &x : cache.v)
        x = uni(rng);
      std::vector<float> q(size_t(c.S * c.heads * D));
      for (float &x : q)
        x = 3.0f * uni(rng); // peaked softmaxes make the merge's rescaling matter
      hk::AttentionProblem p{q.data(), nullptr, hk::DType::f32, c.S,
                             c.heads,  c.kvHeads, D,          stride,
                             float(1.0 / std::sqrt(double(D))), c.past, c.window, nullptr, 0};
      std::vector<float> want = onePass(p, cache, total);
      for (int64_t page : {int64_t(1), int64_t(7), int64_t(512)}) {
        ASSERT_NE(total % page == 0 && page > 1, true) << "contexts must not be page multiples";
        std::vector<float> got = streamed(p, cache, total, page);
        for (int64_t row = 0; row < c.S * c.heads; ++row) {
          double diff = 0, norm = 0;
          for (int64_t d = 0; d < D; ++d) {
            double a = got[size_t(row * D + d)], b = want[size_t(row * D + d)];
            diff += (a - b) * (a - b);
            norm += b * b;
          }
          ASSERT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-7)
              << "heads " << c.heads << "/" << c.kvHeads << " D " << D << " S " << c.S << " past "
              << c.past << " window " << c.window << " page " << page << " row " << row;
        }
      }
    }
  }
  hk::setThreads(0);
}

// A context that fits one page gives the one-pass kernel's output bit for bit, also in f16 and
// bf16 (where scores, probabilities and outputs are rounded to the dtype): paged KV does not
// change the tokens of short generations.
TEST(StreamingAttention, OnePageIsBitIdenticalToOnePass) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (hk::DType dt : {hk::DType::f32, hk::DType::f16, hk::DType::bf16}) {
    const int64_t heads = 8, kvHeads = 2, D = 32, S = 7, past = 40, total = past + S;
    const int64_t stride = kvHeads * D;
    Cache cache{std::vector<float>(size_t(total * stride)),
                std::vector<float>(size_t(total * stride)), stride};
    for (float &x : cache.k)
      x = uni(rng);
    for (float &x : cache.v)
      x = uni(rng);
    std::vector<float> qf(size_t(S * heads * D));
    for (float &x : qf)
      x = uni(rng);
    std::vector<uint16_t> qh(qf.size());
    for (size_t i = 0; i < qf.size(); ++i)
      qh[i] = dt == hk::DType::f16 ? hk::floatToHalf(qf[i]) : hk::floatToBf16(qf[i]);
    const void *q = dt == hk::DType::f32 ? static_cast<const void *>(qf.data()) : qh.data();
    hk::AttentionProblem p{q, nullptr, dt, S, heads, kvHeads, D, stride, 0.25f, past, 0,
                           nullptr, 0};
    // Outputs are read back as raw bytes: the f32-sized buffers hold dt elements.
    std::vector<float> want = onePass(p, cache, total);
    std::vector<float> got = streamed(p, cache, total, 512);
    EXPECT_EQ(std::memcmp(want.data(), got.data(),
                          size_t(S * heads * D * hk::dtypeBytes(dt))),
              0)
        << "dtype " << int(dt);
  }
}

// Pages may hold positions no query sees (a sliding window, or a query before the page): they
// contribute nothing, and a query that saw no page at all is impossible (its own key is always
// in some page).
TEST(StreamingAttention, WindowSkipsWholePages) {
  const int64_t total = 100, stride = 1;
  Cache cache{std::vector<float>(total, 0.0f), std::vector<float>(total), stride};
  for (int64_t t = 0; t < total; ++t)
    cache.v[size_t(t)] = float(t);
  float q = 0.0f; // equal scores: the output is the mean of the visible values
  hk::AttentionProblem p{&q, nullptr, hk::DType::f32, 1, 1, 1, 1, stride, 1.0f, 99, 4, nullptr, 0};
  std::vector<float> out = streamed(p, cache, total, 10);
  EXPECT_FLOAT_EQ(out[0], (96 + 97 + 98 + 99) / 4.0f);
}

// attendBatch (a decode batch in one thread-pool dispatch): every problem of a batch -- different
// GQA ratios, head sizes, decode and prefill rows, windows, f32 / f16 / bf16, f32 and f16 cache
// rows -- gives the bits StreamingAttention gives for it alone with its spans as pages, on 1, 2
// and 3 threads; a problem with S = 0 writes nothing. Decode rows take attendBatch's other path
// (kv heads in ranges, rows read across the range, tiles of 16 rows): the 1000-position
// problems cross many tiles, and 3 threads split 8 heads unevenly.
TEST(StreamingAttention, BatchEqualsEachProblemStreamedAlone) {
  struct Case {
    int64_t heads, kvHeads, headDim, S, past, window, page;
    hk::DType dt;
    hk::DType kvType = hk::DType::f32;
  };
  const Case cases[] = {{16, 8, 128, 1, 83, 0, 512, hk::DType::f32}, {16, 8, 128, 1, 20, 0, 7, hk::DType::f32},
                        {8, 2, 32, 1, 300, 64, 16, hk::DType::f16},  {4, 4, 16, 0, 10, 0, 4, hk::DType::f32},
                        {4, 1, 16, 33, 90, 0, 40, hk::DType::bf16},  {8, 8, 8, 5, 0, 0, 3, hk::DType::f32},
                        {16, 8, 128, 1, 1000, 0, 4096, hk::DType::f32, hk::DType::f16},
                        {32, 8, 64, 1, 999, 0, 300, hk::DType::f16, hk::DType::f16},
                        {12, 4, 20, 1, 77, 30, 64, hk::DType::f32, hk::DType::f16}};
  const int64_t count = int64_t(std::size(cases));
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<Cache> caches;
  std::vector<std::vector<uint16_t>> queries; // f32 queries use two words per value
  std::vector<std::vector<hk::KvSpan>> spans(static_cast<size_t>(count));
  std::vector<hk::AttentionProblem> problems;
  for (int64_t b = 0; b < count; ++b) {
    const Case &c = cases[b];
    const int64_t total = c.past + c.S, stride = c.kvHeads * c.headDim + 3;
    Cache cache{std::vector<float>(size_t(total * stride)), std::vector<float>(size_t(total * stride)), stride};
    for (float &x : cache.k)
      x = uni(rng);
    for (float &x : cache.v)
      x = uni(rng);
    if (c.kvType == hk::DType::f16) {
      // f16 rows packed two to a float slot: the first half of each vector holds them.
      for (std::vector<float> *rows : {&cache.k, &cache.v}) {
        std::vector<uint16_t> half(rows->size());
        for (size_t i = 0; i < half.size(); ++i)
          half[i] = hk::floatToHalf((*rows)[i]);
        std::memcpy(rows->data(), half.data(), half.size() * sizeof(uint16_t));
      }
    }
    caches.push_back(std::move(cache));
    const int64_t n = c.S * c.heads * c.headDim;
    std::vector<uint16_t> q(size_t(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      const float x = 3.0f * uni(rng);
      if (c.dt == hk::DType::f32)
        std::memcpy(q.data() + 2 * i, &x, 4);
      else
        q[size_t(i)] = c.dt == hk::DType::f16 ? hk::floatToHalf(x) : hk::floatToBf16(x);
    }
    queries.push_back(std::move(q));
  }
  for (int64_t b = 0; b < count; ++b) {
    const Case &c = cases[b];
    const int64_t total = c.past + c.S;
    const Cache &cache = caches[size_t(b)];
    const int64_t rowBytes = cache.stride * (c.kvType == hk::DType::f16 ? 2 : 4);
    const char *k = reinterpret_cast<const char *>(cache.k.data()), *v = reinterpret_cast<const char *>(cache.v.data());
    for (int64_t start = 0; start < total; start += c.page)
      spans[size_t(b)].push_back({k + start * rowBytes, v + start * rowBytes, start, std::min(c.page, total - start)});
    problems.push_back({queries[size_t(b)].data(), nullptr, c.dt, c.S, c.heads, c.kvHeads, c.headDim, cache.stride,
                        float(1.0 / std::sqrt(double(c.headDim))), c.past, c.window, spans[size_t(b)].data(),
                        int64_t(spans[size_t(b)].size()), c.kvType});
  }
  for (int threads : {1, 2, 3}) {
    hk::setThreads(threads);
    std::vector<std::vector<float>> got(static_cast<size_t>(count));
    for (int64_t b = 0; b < count; ++b) {
      got[size_t(b)].assign(size_t(problems[size_t(b)].S * cases[b].heads * cases[b].headDim), -7.0f);
      problems[size_t(b)].out = got[size_t(b)].data();
    }
    hk::attendBatch(problems.data(), count);
    for (int64_t b = 0; b < count; ++b) {
      const Case &c = cases[b];
      std::vector<float> want(got[size_t(b)].size(), -7.0f);
      hk::AttentionProblem alone = problems[size_t(b)];
      alone.out = want.data();
      alone.spans = nullptr;
      alone.numSpans = 0;
      hk::StreamingAttention att;
      att.begin(alone);
      for (const hk::KvSpan &span : spans[size_t(b)])
        att.addPage(span);
      att.end();
      ASSERT_EQ(want.size(), got[size_t(b)].size());
      EXPECT_TRUE(want.empty() || std::memcmp(want.data(), got[size_t(b)].data(), want.size() * sizeof(float)) == 0)
          << "problem " << b << " (heads " << c.heads << "/" << c.kvHeads << " D " << c.headDim << " S " << c.S
          << " past " << c.past << " window " << c.window << " page " << c.page << "), " << threads << " threads";
    }
  }
  hk::setThreads(0);
}

// A head-major cache (each kv head's rows together: kvStride = headDim, headStride = capacity x
// headDim, as runtime/kv's ContiguousKvCache keeps them) gives the bits of the same rows side by
// side in each position's row: only where the kernel reads changes. Decode and prefill rows,
// GQA 1, 2 and 4, a window, f32 and f16 rows, 1 and 2 threads.
TEST(StreamingAttention, HeadMajorRowsGiveTheSameBits) {
  struct Case {
    int64_t heads, kvHeads, headDim, S, past, window;
    hk::DType kvType;
  };
  const Case cases[] = {{16, 8, 128, 1, 700, 0, hk::DType::f16}, {8, 4, 64, 1, 33, 0, hk::DType::f32},
                        {8, 2, 32, 7, 90, 20, hk::DType::f32},   {4, 4, 16, 20, 5, 0, hk::DType::f16}};
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int threads : {1, 2})
    for (const Case &c : cases) {
      hk::setThreads(threads);
      const int64_t total = c.past + c.S, D = c.headDim, width = c.kvHeads * D, capacity = total + 5;
      const int64_t elem = c.kvType == hk::DType::f16 ? 2 : 4;
      // The same values in both layouts, as raw bytes of the row type.
      std::vector<char> kRow(size_t(total * width * elem)), vRow(kRow.size());
      std::vector<char> kHead(size_t(c.kvHeads * capacity * D * elem)), vHead(kHead.size());
      for (int64_t t = 0; t < total; ++t)
        for (int64_t e = 0; e < width; ++e)
          for (auto [row, head] : {std::pair{&kRow, &kHead}, std::pair{&vRow, &vHead}}) {
            const float x = uni(rng);
            const uint16_t h = hk::floatToHalf(x);
            const void *src = elem == 2 ? static_cast<const void *>(&h) : static_cast<const void *>(&x);
            std::memcpy(row->data() + (t * width + e) * elem, src, size_t(elem));
            std::memcpy(head->data() + ((e / D) * capacity * D + t * D + e % D) * elem, src, size_t(elem));
          }
      std::vector<float> q(size_t(c.S * c.heads * D));
      for (float &x : q)
        x = 2.0f * uni(rng);
      const hk::KvSpan rowSpan{kRow.data(), vRow.data(), 0, total}, headSpan{kHead.data(), vHead.data(), 0, total};
      std::vector<float> want(q.size(), -7.0f), got(q.size(), -7.0f);
      const float scale = float(1.0 / std::sqrt(double(D)));
      hk::AttentionProblem byRow{q.data(), want.data(), hk::DType::f32, c.S, c.heads, c.kvHeads, D, width, scale,
                                 c.past, c.window, &rowSpan, 1, c.kvType};
      hk::AttentionProblem byHead{q.data(), got.data(), hk::DType::f32, c.S, c.heads, c.kvHeads, D, D, scale,
                                  c.past, c.window, &headSpan, 1, c.kvType, capacity * D};
      hk::attendBatch(&byRow, 1);
      hk::attendBatch(&byHead, 1);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << "heads " << c.heads << "/" << c.kvHeads << " D " << D << " S " << c.S << " past " << c.past << ", "
          << threads << " threads";
      bool written = std::none_of(got.begin(), got.end(), [](float x) { return x == -7.0f; });
      EXPECT_TRUE(written);
    }
  hk::setThreads(0);
}
