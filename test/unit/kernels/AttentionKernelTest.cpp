//===- AttentionKernelTest.cpp - kernels::attendCausal against a float64 reference ---===//
//
// The kernel directly (AttentionTest.cpp covers it through helm_rt_attention and the cache):
// keys and values split into spans of 1, 7, 64 or 512 rows (as a paged cache hands them over),
// every instruction-set path, head dims that are not multiples of the vector width (1 .. 257),
// GQA ratios 1, 2, 4, 8, prompts longer than one query block (16 rows), sliding windows, and
// 1 - 3 threads.
//
// Reference: float64, softmax(q . k_t * scale) over the causal (windowed) key range, weighted sum
// of values. The f16/bf16 reference rounds exactly where the kernel's contract says the model
// dtype rounds (the scaled score, the probability, the output), with the test's own rounding
// (Reference.h), so the remaining differences are f32-vs-f64 arithmetic plus the rare rounding
// flip near a midpoint. Bounds (values in [-1, 1], so the output is a convex combination with
// unit scale):
//  * f32: dot products of up to 257 terms of size <= 1/3 after scaling, one exp and one division
//    per score, up to ~600 terms per weighted sum: well under 2e-5 absolute.
//  * f16 / bf16: a rounding flip moves one score or probability by one unit in the last place of
//    the dtype (u = 2^-11 / 2^-8 relative), and the output rounding adds u/2: we allow 4u.
// A logic error (wrong span offset, key range, head group, query block) is O(0.1).
//
//===----------------------------------------------------------------------===//
#include "test/unit/Reference.h"

#include "kernels/cpu/Attention.h"
#include "kernels/common/Isa.h"
#include "kernels/common/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace helm::test;
namespace hk = helm::kernels;

namespace {

struct Case {
  int64_t heads, kvHeads, headDim, S, past, window, page;
};

double roundDt(double x, Ty t) { return t == Ty::f32 ? double(float(x)) : roundToFormat(x, t); }

double bound(Ty t) {
  switch (t) {
  case Ty::f32: return 2e-5;
  case Ty::f16: return 4 * std::ldexp(1.0, -11);
  case Ty::bf16: return 4 * std::ldexp(1.0, -8);
  }
  return 0;
}

/// Runs one case on the active ISA with cache rows of `kv` (f32, or f16: the rows rounded to half
/// precision, which the reference reads too); returns the largest error (or +inf after reporting
/// a failure).
double runCase(const Case &c, Ty t, int threads, uint64_t seed, hk::DType kv = hk::DType::f32, double qScale = 1.0,
               float softcap = 0.0f) {
  hk::setThreads(threads);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  const int64_t D = c.headDim, total = c.past + c.S, kvWidth = c.kvHeads * D;
  // Cached rows carry 3 floats of padding so that a kernel that assumes the row stride equals
  // kv_heads * head_dim reads wrong data.
  const int64_t stride = kvWidth + 3;
  std::vector<float> keys(size_t(total * stride)), values(size_t(total * stride));
  const Ty kvTy = kv == hk::DType::f16 ? Ty::f16 : Ty::f32;
  for (float *buf : {keys.data(), values.data()})
    for (int64_t i = 0; i < total * stride; ++i) // the cache holds dtype values (in kv's type)
      buf[i] = float(roundDt(roundDt(uni(rng), t), kvTy));
  const int64_t qWidth = c.heads * D;
  std::vector<double> qd(size_t(c.S * qWidth));
  std::vector<unsigned char> q(qd.size() * elemSize(t));
  for (size_t i = 0; i < qd.size(); ++i) {
    qd[i] = roundDt(qScale * uni(rng), t);
    encodeAt(q.data(), t, i, qd[i]);
  }
  const size_t guard = 64;
  std::vector<unsigned char> out((qd.size() + guard) * elemSize(t), 0xff);

  std::vector<hk::KvSpan> spans;
  // Each span gets its own copy (in kv's type) so that contiguity across spans cannot be relied on.
  std::vector<std::vector<unsigned char>> pageK, pageV;
  for (int64_t start = 0; start < total; start += c.page) {
    int64_t count = std::min(c.page, total - start);
    for (auto [from, pages] : {std::pair{&keys, &pageK}, std::pair{&values, &pageV}}) {
      pages->emplace_back(size_t(count * stride) * elemSize(kvTy));
      for (int64_t i = 0; i < count * stride; ++i)
        encodeAt(pages->back().data(), kvTy, size_t(i), double((*from)[size_t(start * stride + i)]));
    }
    spans.push_back({pageK.back().data(), pageV.back().data(), start, count});
  }
  const float scale = float(1.0 / std::sqrt(double(D)));
  hk::AttentionProblem p{q.data(), out.data(), hk::DType(int(t)), c.S, c.heads, c.kvHeads, D,
                         stride, scale, c.past, c.window, spans.data(), int64_t(spans.size()), kv};
  p.softcap = softcap;
  hk::attendCausal(p);

  const int64_t group = c.heads / c.kvHeads;
  double worst = 0;
  for (int64_t s = 0; s < c.S; ++s) {
    const int64_t pos = c.past + s;
    const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t g = h / group;
      const double *qr = &qd[size_t(s * qWidth + h * D)];
      std::vector<double> sc;
      double mx = -INFINITY;
      for (int64_t tp = first; tp <= pos; ++tp) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += qr[d] * double(keys[size_t(tp * stride + g * D + d)]);
        const double scaled = dot * double(scale);
        sc.push_back(roundDt(softcap > 0 ? softcap * std::tanh(scaled / softcap) : scaled, t));
        mx = std::max(mx, sc.back());
      }
      double sum = 0;
      for (double &x : sc)
        sum += (x = std::exp(x - mx));
      for (double &x : sc)
        x = roundDt(x / sum, t);
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t tp = first; tp <= pos; ++tp)
          o += sc[size_t(tp - first)] * double(values[size_t(tp * stride + g * D + d)]);
        o = roundDt(o, t);
        size_t idx = size_t(s * qWidth + h * D + d);
        double got = decodeAt(out.data(), t, idx);
        double err = std::fabs(got - o);
        // A score's f32 error grows with its size, and e^x turns it into a relative error of the
        // weights: the bound grows with the queries' scale.
        // Soft-capped scores stay within the cap whatever the queries' scale.
        const double limit = bound(t) * (softcap > 0 ? std::min<double>(qScale, softcap) : qScale);
        if (!(err <= limit)) {
          ADD_FAILURE() << "s " << s << " head " << h << " d " << d << ": got " << got
                        << ", reference " << o << ", error " << err << " > " << limit;
          return INFINITY;
        }
        worst = std::max(worst, err);
      }
    }
  }
  for (size_t i = qd.size() * elemSize(t); i < out.size(); ++i)
    if (out[i] != 0xff) {
      ADD_FAILURE() << "write past the end of out";
      return INFINITY;
    }
  return worst;
}

class AttentionKernelTest : public ::testing::TestWithParam<hk::Isa> {
protected:
  void SetUp() override {
    if (!hk::setIsaForTesting(GetParam()))
      GTEST_SKIP() << "this CPU lacks " << hk::isaName(GetParam());
  }
  void TearDown() override {
    hk::resetIsaForTesting();
    hk::setThreads(1);
  }
};

TEST_P(AttentionKernelTest, MatchesFloat64Reference) {
  const std::vector<Case> cases = {
      // heads, kv_heads, head_dim, S, past, window, page
      {2, 2, 1, 1, 0, 0, 1},        {4, 1, 3, 5, 2, 0, 7},       {8, 2, 17, 37, 0, 0, 7},
      {8, 1, 33, 1, 600, 0, 512},   {16, 2, 64, 20, 45, 0, 64},  {2, 1, 127, 3, 130, 0, 7},
      {4, 4, 128, 1, 300, 0, 1},    {8, 1, 128, 33, 100, 0, 512}, {2, 2, 257, 9, 20, 0, 64},
      {8, 2, 48, 40, 10, 12, 7},    {4, 1, 80, 1, 700, 100, 512}, {8, 8, 16, 17, 0, 5, 1},
  };
  int threads = 0;
  for (Ty t : {Ty::f32, Ty::f16, Ty::bf16})
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case &c = cases[i];
      SCOPED_TRACE(std::string(tyName(t)) + " case " + std::to_string(i));
      double worst = runCase(c, t, 1 + (threads++ % 3), 1000 * i + uint64_t(t));
      if (!std::isfinite(worst))
        return;
    }
}

// The same cases over an f16 cache: the rows are loaded as half precision and widened, every
// other step is the f32 cache's (the bounds are the model dtype's).
TEST_P(AttentionKernelTest, HalfPrecisionCacheMatchesFloat64Reference) {
  const std::vector<Case> cases = {
      {2, 2, 1, 1, 0, 0, 1},       {4, 1, 3, 5, 2, 0, 7},      {8, 2, 17, 37, 0, 0, 7},
      {8, 1, 33, 1, 600, 0, 512},  {16, 2, 64, 20, 45, 0, 64}, {2, 1, 127, 3, 130, 0, 7},
      {4, 4, 128, 1, 300, 0, 1},   {2, 2, 257, 9, 20, 0, 64},  {4, 1, 80, 1, 700, 100, 512},
  };
  int threads = 0;
  for (Ty t : {Ty::f32, Ty::f16})
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::string(tyName(t)) + " case " + std::to_string(i) + ", f16 cache");
      double worst = runCase(cases[i], t, 1 + (threads++ % 3), 7000 * i + uint64_t(t), hk::DType::f16);
      if (!std::isfinite(worst))
        return;
    }
}

// Queries 300 times larger: scores spread over hundreds, so the shifted exponents of the softmax
// reach the subnormal range and below (e^x is 0 in f32 under x = -103.97), which the vector
// exponentials must give as libm does; key counts that are not multiples of 8 or 16 (the vector
// tails) included. The bound is 300 times the usual one (the scores' own f32 error grows with
// them); a wrong exponential (a NaN, a lost tail, 2^n built wrong) is off by far more.
TEST_P(AttentionKernelTest, WideScoreRangeMatchesFloat64Reference) {
  const std::vector<Case> cases = {
      {4, 2, 64, 37, 0, 0, 512}, {8, 2, 128, 19, 61, 0, 7}, {2, 1, 33, 1, 250, 0, 64}, {4, 4, 16, 45, 3, 9, 1},
  };
  for (Ty t : {Ty::f32, Ty::f16})
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::string(tyName(t)) + " case " + std::to_string(i) + ", wide scores");
      double worst = runCase(cases[i], t, 1 + int(i % 2), 9000 * i + uint64_t(t), hk::DType::f32, 300.0);
      if (!std::isfinite(worst))
        return;
    }
}

// Gemma 2's soft-capped scores: queries 30 times larger (scores up to about ±20) capped at 5, so
// that the cap bends most of them; every ISA's path, windows and pages included. Without the cap
// the kernel's result is off by far more than the bound (the softmax of the raw scores is peaked).
TEST_P(AttentionKernelTest, SoftCappedScoresMatchFloat64Reference) {
  const std::vector<Case> cases = {
      {4, 2, 64, 37, 0, 0, 512}, {8, 2, 128, 19, 61, 0, 7}, {2, 1, 256, 1, 250, 0, 64}, {4, 4, 16, 45, 3, 9, 1},
  };
  for (Ty t : {Ty::f32, Ty::f16})
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::string(tyName(t)) + " case " + std::to_string(i) + ", soft cap 5");
      double worst = runCase(cases[i], t, 1 + int(i % 2), 11000 * i + uint64_t(t), hk::DType::f32, 30.0, 5.0f);
      if (!std::isfinite(worst))
        return;
    }
}

// A query whose only visible key is itself (window 1) returns that value row exactly, through
// every span layout.
TEST_P(AttentionKernelTest, WindowOneIsIdentityAcrossSpans) {
  const int64_t heads = 4, kvHeads = 2, D = 24, S = 9;
  for (int64_t page : {1, 4, 64}) {
    std::vector<float> keys(size_t(S * kvHeads * D)), values(keys.size()), q(size_t(S * heads * D)),
        out(q.size(), NAN);
    std::mt19937 rng{uint32_t(page)};
    std::uniform_real_distribution<float> uni(-1, 1);
    for (auto *buf : {&keys, &values, &q})
      for (float &x : *buf)
        x = uni(rng);
    std::vector<hk::KvSpan> spans;
    for (int64_t start = 0; start < S; start += page)
      spans.push_back({keys.data() + start * kvHeads * D, values.data() + start * kvHeads * D, start,
                       std::min(page, S - start)});
    hk::AttentionProblem p{q.data(), out.data(), hk::DType::f32, S, heads, kvHeads, D,
                           kvHeads * D, 0.3f, 0, 1, spans.data(), int64_t(spans.size())};
    hk::attendCausal(p);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < D; ++d)
          ASSERT_EQ(out[size_t((s * heads + h) * D + d)],
                    values[size_t((s * kvHeads + h / 2) * D + d)])
              << "page " << page << " s " << s << " head " << h << " d " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionKernelTest,
                         ::testing::Values(hk::Isa::scalar, hk::Isa::avx2, hk::Isa::avx512),
                         [](const ::testing::TestParamInfo<hk::Isa> &info) {
                           return std::string(hk::isaName(info.param));
                         });

} // namespace
