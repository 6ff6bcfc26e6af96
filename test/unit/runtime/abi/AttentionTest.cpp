//===- AttentionTest.cpp - helm_rt_attention against a float64 causal GQA reference ---===//
//
// The reference keeps its own key/value history per sequence (in double) and computes, for every
// query at absolute position pos = past + s, softmax(q . k_t * scale) over t in [first, pos] (first
// = pos - window + 1 with a sliding window, else 0) and the weighted sum of values, query head h
// reading KV head h / (heads / kv_heads).
//
// Bounds. The output is a convex combination of values (|v| <= 1 here), so errors are measured in
// absolute terms against that unit scale.
//  * f32: head_dim <= 64 terms per dot product, one exp and one normalisation per score, up to ~20
//    terms per weighted sum: a few hundred roundings of relative size 2^-24 at most, i.e. < 1e-5.
//  * f16/bf16: the runtime rounds the scores, the probabilities and the output to the model dtype
//    (as the reference framework does), unit roundoff u = 2^-11 / 2^-8. Rounding a score s changes
//    its weight by a factor exp(+-u|s|) (|s| is about 1 or less for these random inputs: |q.k| *
//    scale has standard deviation sqrt(head_dim)/3 / sqrt(head_dim) = 1/3), rounding a probability
//    by (1 +- u), the output by u/2: about 3u in all; we allow 4u (measured: about 1u). Any logic
//    error (wrong key range, wrong head group, wrong position or slot) is O(0.1).
//
//===----------------------------------------------------------------------===//
#include "test/unit/Reference.h"

#include "kernels/common/ThreadPool.h"
#include "contract/helm_contract.h"
#include "runtime/kv/KvCache.h"
#include "runtime/abi/StageContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace helm::test;

namespace {

struct Config {
  int64_t heads, kvHeads, headDim, window;
  Ty dtype;
};

/// History[layer][slot] = rows of kv_width doubles, one per position.
using Rows = std::vector<std::vector<double>>;

class AttentionRun {
public:
  static constexpr int64_t kLayers = 2;
  static constexpr int32_t kSlots = 2;

  explicit AttentionRun(const Config &c)
      : c_(c), kvWidth_(c.kvHeads * c.headDim), qWidth_(c.heads * c.headDim),
        cache_(kLayers, kSlots, c.kvHeads * c.headDim), keys_(kLayers, std::vector<Rows>(kSlots)),
        values_(kLayers, std::vector<Rows>(kSlots)), rng_(uint64_t(c.heads * 1000 + c.headDim * 10 + c.window)) {}

  /// One helm_rt_attention call for rows mapped to `slots` at `past`, S new tokens each; checks
  /// the output against the reference. Returns the largest error seen.
  double step(int64_t layer, const std::vector<int32_t> &slots, const std::vector<int64_t> &past, int64_t S,
              int threads) {
    helm::kernels::setThreads(threads);
    int64_t B = int64_t(slots.size());
    Ty t = c_.dtype;
    std::vector<unsigned char> q(size_t(B * S * qWidth_) * elemSize(t)),
        k(size_t(B * S * kvWidth_) * elemSize(t)), v(size_t(B * S * kvWidth_) * elemSize(t));
    std::vector<double> qd(size_t(B * S * qWidth_)), kd(size_t(B * S * kvWidth_)), vd(size_t(B * S * kvWidth_));
    fill(q, qd, t);
    fill(k, kd, t);
    fill(v, vd, t);
    const size_t guard = 64;
    std::vector<unsigned char> out((size_t(B * S * qWidth_) + guard) * elemSize(t), 0xff); // NaN

    helm::rt::StageContext ctx;
    ctx.kv = &cache_;
    ctx.sequence = slots.data();
    ctx.past = past.data();
    float scale = float(1.0 / std::sqrt(double(c_.headDim)));
    helm_rt_attention(&ctx, layer, q.data(), k.data(), v.data(), out.data(), int32_t(t), B, S, c_.heads,
                      c_.kvHeads, c_.headDim, scale, c_.window);

    // Reference: append, then attend.
    for (int64_t b = 0; b < B; ++b) {
      Rows &ks = keys_[size_t(layer)][size_t(slots[size_t(b)])];
      Rows &vs = values_[size_t(layer)][size_t(slots[size_t(b)])];
      EXPECT_EQ(int64_t(ks.size()), past[size_t(b)]) << "test bookkeeping";
      for (int64_t s = 0; s < S; ++s) {
        size_t off = size_t((b * S + s) * kvWidth_);
        ks.emplace_back(kd.begin() + long(off), kd.begin() + long(off) + kvWidth_);
        vs.emplace_back(vd.begin() + long(off), vd.begin() + long(off) + kvWidth_);
      }
    }
    int64_t group = c_.heads / c_.kvHeads;
    double worst = 0;
    for (int64_t b = 0; b < B; ++b) {
      const Rows &ks = keys_[size_t(layer)][size_t(slots[size_t(b)])];
      const Rows &vs = values_[size_t(layer)][size_t(slots[size_t(b)])];
      for (int64_t s = 0; s < S; ++s) {
        int64_t pos = past[size_t(b)] + s;
        int64_t first = c_.window > 0 ? std::max<int64_t>(0, pos - c_.window + 1) : 0;
        for (int64_t h = 0; h < c_.heads; ++h) {
          int64_t g = h / group;
          const double *qr = &qd[size_t((b * S + s) * qWidth_ + h * c_.headDim)];
          std::vector<double> sc;
          double mx = -INFINITY;
          for (int64_t tpos = first; tpos <= pos; ++tpos) {
            double dot = 0;
            for (int64_t d = 0; d < c_.headDim; ++d)
              dot += qr[d] * ks[size_t(tpos)][size_t(g * c_.headDim + d)];
            sc.push_back(dot * double(scale));
            mx = std::max(mx, sc.back());
          }
          double sum = 0;
          for (double &x : sc)
            sum += (x = std::exp(x - mx));
          for (int64_t d = 0; d < c_.headDim; ++d) {
            double o = 0;
            for (int64_t tpos = first; tpos <= pos; ++tpos)
              o += sc[size_t(tpos - first)] / sum * vs[size_t(tpos)][size_t(g * c_.headDim + d)];
            size_t idx = size_t((b * S + s) * qWidth_ + h * c_.headDim + d);
            double got = decodeAt(out.data(), t, idx);
            double err = std::fabs(got - o);
            if (!(err <= bound())) {
              ADD_FAILURE() << "layer " << layer << " row " << b << " (slot " << slots[size_t(b)] << ", past "
                            << past[size_t(b)] << ") s " << s << " head " << h << " d " << d << ": got " << got
                            << ", reference " << o << ", error " << err << " > " << bound();
              return INFINITY;
            }
            worst = std::max(worst, err);
          }
        }
      }
    }
    for (size_t i = size_t(B * S * qWidth_) * elemSize(t); i < out.size(); ++i)
      if (out[i] != 0xff) {
        ADD_FAILURE() << "write past the end of out";
        return INFINITY;
      }
    return worst;
  }

  /// The cache holds exactly the keys and values the calls passed (widened from the dtype).
  void checkCache() const {
    for (int64_t l = 0; l < kLayers; ++l)
      for (int32_t slot = 0; slot < kSlots; ++slot) {
        const Rows &ks = keys_[size_t(l)][size_t(slot)];
        const Rows &vs = values_[size_t(l)][size_t(slot)];
        int64_t n = int64_t(ks.size());
        int64_t seen = 0;
        cache_.forEachSpan(l, slot, 0, n, [&](const void *kpRows, const void *vpRows, int64_t first, int64_t count) {
          auto *kp = static_cast<const float *>(kpRows);
          auto *vp = static_cast<const float *>(vpRows);
          for (int64_t r = 0; r < count; ++r)
            for (int64_t e = 0; e < kvWidth_; ++e) {
              ASSERT_EQ(double(kp[r * kvWidth_ + e]), ks[size_t(first + r)][size_t(e)]);
              ASSERT_EQ(double(vp[r * kvWidth_ + e]), vs[size_t(first + r)][size_t(e)]);
            }
          seen += count;
        });
        EXPECT_EQ(seen, n);
      }
  }

  double bound() const {
    switch (c_.dtype) {
    case Ty::f32: return 1e-5;
    case Ty::f16: return 4 * std::ldexp(1.0, -11);
    case Ty::bf16: return 4 * std::ldexp(1.0, -8);
    }
    return 0;
  }

private:
  void fill(std::vector<unsigned char> &bytes, std::vector<double> &vals, Ty t) {
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    for (size_t i = 0; i < vals.size(); ++i) {
      vals[i] = roundToFormat(uni(rng_), t);
      encodeAt(bytes.data(), t, i, vals[i]);
    }
  }

  Config c_;
  int64_t kvWidth_, qWidth_;
  helm::rt::ContiguousKvCache cache_;
  std::vector<std::vector<Rows>> keys_, values_;
  std::mt19937_64 rng_;
};

using Param = std::tuple<int, int, int, Ty>; // heads/kv_heads ratio, head_dim, window, dtype

class AttentionTest : public ::testing::TestWithParam<Param> {
protected:
  void TearDown() override { helm::kernels::setThreads(1); }
};

TEST_P(AttentionTest, MatchesFloat64Reference) {
  auto [ratio, headDim, window, dtype] = GetParam();
  Config c{2 * ratio, 2, headDim, window, dtype};
  AttentionRun run(c);
  int threads = 0;
  auto nextThreads = [&] { return 1 + (threads++ % 3); };
  double worst = 0;
  // Batch row 0 uses KV slot 1 and row 1 slot 0 (the mapping must be honoured). Both layers are fed
  // different data at the same positions, so a layer mix-up shows.
  for (int64_t layer : {0, 1}) {
    // Prefill: each prompt alone (B = 1, S > 1), as the generator does.
    worst = std::max(worst, run.step(layer, {1}, {0}, 5, nextThreads()));
    worst = std::max(worst, run.step(layer, {0}, {0}, 3, nextThreads()));
  }
  int64_t p0 = 5, p1 = 3;
  // Batched decode with different past lengths.
  for (int i = 0; i < 6; ++i, ++p0, ++p1)
    for (int64_t layer : {0, 1})
      worst = std::max(worst, run.step(layer, {1, 0}, {p0, p1}, 1, nextThreads()));
  // A batched chunk (B = 2, S = 3) on top of existing history: causal inside the chunk.
  for (int64_t layer : {0, 1})
    worst = std::max(worst, run.step(layer, {1, 0}, {p0, p1}, 3, nextThreads()));
  p0 += 3;
  p1 += 3;
  // Only one sequence still running, then both again.
  for (int64_t layer : {0, 1})
    worst = std::max(worst, run.step(layer, {0}, {p1}, 1, nextThreads()));
  ++p1;
  for (int i = 0; i < 3; ++i, ++p0, ++p1)
    for (int64_t layer : {0, 1})
      worst = std::max(worst, run.step(layer, {1, 0}, {p0, p1}, 1, nextThreads()));
  EXPECT_LE(worst, run.bound());
  run.checkCache();
  std::ostringstream os;
  os << worst;
  RecordProperty("worst_error", os.str());
}

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  auto [ratio, headDim, window, dtype] = info.param;
  return "gqa" + std::to_string(ratio) + "_hd" + std::to_string(headDim) + "_window" +
         std::to_string(window) + "_" + tyName(dtype);
}

INSTANTIATE_TEST_SUITE_P(Configs, AttentionTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(8, 16, 64),
                                            ::testing::Values(0, 3),
                                            ::testing::Values(Ty::f32, Ty::f16, Ty::bf16)),
                         paramName);

// Window 1 attends only to the token itself, so the output is exactly its own value row.
TEST(Attention, WindowOneReturnsOwnValue) {
  const int64_t heads = 4, kvHeads = 2, hd = 8, S = 4;
  helm::rt::ContiguousKvCache cache(1, 1, kvHeads * hd);
  std::vector<float> q(size_t(S * heads * hd)), k(size_t(S * kvHeads * hd)), v(size_t(S * kvHeads * hd));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1, 1);
  for (auto *buf : {&q, &k, &v})
    for (float &x : *buf)
      x = uni(rng);
  std::vector<float> out(q.size(), NAN);
  int32_t slot = 0;
  int64_t past = 0;
  helm::rt::StageContext ctx;
  ctx.kv = &cache;
  ctx.sequence = &slot;
  ctx.past = &past;
  helm_rt_attention(&ctx, 0, q.data(), k.data(), v.data(), out.data(), 0, 1, S, heads, kvHeads, hd, 0.5f, 1);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < hd; ++d)
        ASSERT_EQ(out[size_t((s * heads + h) * hd + d)], v[size_t((s * kvHeads + h / 2) * hd + d)]);
}

// A refused contract call records a helm_status and its message in the stage context; the first
// refusal of a stage run is the one reported, and calls before it leave the context clean.
TEST(ContractStatus, RefusalsCarryTheirCodeAndTheFirstOneWins) {
  const int64_t heads = 2, kvHeads = 1, hd = 4;
  helm::rt::ContiguousKvCache cache(1, 1, kvHeads * hd);
  std::vector<float> q(size_t(heads * hd), 0.5f), k(size_t(kvHeads * hd), 0.5f), v = k;
  std::vector<float> out(q.size());
  int32_t slot = 0;
  int64_t past = 0;
  const void *weights[1] = {q.data()};
  auto context = [&] {
    helm::rt::StageContext ctx;
    ctx.kv = &cache;
    ctx.sequence = &slot;
    ctx.past = &past;
    ctx.weights = weights;
    ctx.numWeights = 1;
    return ctx;
  };
  auto attend = [&](helm::rt::StageContext &ctx, int32_t dtype, int64_t kvHeadsOfCall) {
    helm_rt_attention(&ctx, 0, q.data(), k.data(), v.data(), out.data(), dtype, 1, 1, heads,
                      kvHeadsOfCall, hd, 0.5f, 0);
  };

  helm::rt::StageContext ctx = context();
  EXPECT_EQ(helm_rt_weight(&ctx, 0), q.data());
  attend(ctx, HELM_DTYPE_F32, kvHeads);
  EXPECT_EQ(ctx.status, HELM_STATUS_OK) << ctx.message;
  // A dtype code the contract lacks.
  attend(ctx, 7, kvHeads);
  EXPECT_EQ(ctx.status, HELM_STATUS_BAD_ARGUMENT);
  EXPECT_EQ(ctx.message, "the stage's attention call has a bad dtype code or size");
  // Later refusals do not replace the first.
  helm_rt_weight(&ctx, 5);
  EXPECT_EQ(ctx.status, HELM_STATUS_BAD_ARGUMENT);

  helm::rt::StageContext badWeight = context();
  helm_rt_weight(&badWeight, -1);
  EXPECT_EQ(badWeight.status, HELM_STATUS_WEIGHT_ID);
  EXPECT_EQ(badWeight.message, "the stage asks for a weight id outside the package's tensor table");

  // Two KV heads where the cache holds one: the call must not write past the cache's rows.
  helm::rt::StageContext geometry = context();
  attend(geometry, HELM_DTYPE_F32, 2);
  EXPECT_EQ(geometry.status, HELM_STATUS_KV_GEOMETRY);
}

} // namespace
