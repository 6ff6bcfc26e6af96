//===- KvCacheTest.cpp - host and device KV caches: round trips, layers/sequences, growth ===//
#include "runtime/core/KvCache.h"

#include <gtest/gtest.h>

#include <vector>

using helm::rt::ContiguousKvCache;

namespace {

/// A value that identifies (layer, seq, pos, element, K or V) so misplaced rows are detected.
float tag(int64_t layer, int32_t seq, int64_t pos, int64_t e, bool isV) {
  return float(layer * 1000000 + seq * 100000 + pos * 100 + e) * (isV ? -1.0f : 1.0f) + 0.25f;
}

void writeRange(helm::rt::KvCache &kv, int64_t layer, int32_t seq, int64_t pos, int64_t count) {
  int64_t w = kv.rowWidth();
  std::vector<float> k(size_t(count * w)), v(size_t(count * w));
  for (int64_t t = 0; t < count; ++t)
    for (int64_t e = 0; e < w; ++e) {
      k[size_t(t * w + e)] = tag(layer, seq, pos + t, e, false);
      v[size_t(t * w + e)] = tag(layer, seq, pos + t, e, true);
    }
  ASSERT_TRUE(kv.write(layer, seq, pos, count, k.data(), v.data())) << kv.error();
}

/// Reads [from, to) through forEachSpan: spans must be in order, contiguous and exactly cover it.
void expectRange(const helm::rt::KvCache &kv, int64_t layer, int32_t seq, int64_t from, int64_t to) {
  SCOPED_TRACE("layer " + std::to_string(layer) + " seq " + std::to_string(seq) + " [" +
               std::to_string(from) + ", " + std::to_string(to) + ")");
  int64_t w = kv.rowWidth();
  int64_t next = from;
  kv.forEachSpan(layer, seq, from, to, [&](const float *k, const float *v, int64_t first, int64_t count) {
    ASSERT_EQ(first, next) << "spans out of order or with a gap";
    ASSERT_GT(count, 0);
    ASSERT_LE(first + count, to);
    for (int64_t t = 0; t < count; ++t)
      for (int64_t e = 0; e < w; ++e) {
        ASSERT_EQ(k[t * w + e], tag(layer, seq, first + t, e, false)) << "K pos " << first + t << " e " << e;
        ASSERT_EQ(v[t * w + e], tag(layer, seq, first + t, e, true)) << "V pos " << first + t << " e " << e;
      }
    next = first + count;
  });
  EXPECT_EQ(next, std::max(from, to)) << "spans do not reach the end";
}

TEST(ContiguousKvCache, WriteThenReadBack) {
  ContiguousKvCache kv(/*layers=*/3, /*sequences=*/2, /*rowWidth=*/24);
  EXPECT_EQ(kv.rowWidth(), 24);
  EXPECT_EQ(kv.bytes(), 0u);
  for (int64_t l = 0; l < 3; ++l)
    for (int32_t s = 0; s < 2; ++s)
      writeRange(kv, l, s, 0, 5 + l + s);
  for (int64_t l = 0; l < 3; ++l)
    for (int32_t s = 0; s < 2; ++s) {
      int64_t len = 5 + l + s;
      expectRange(kv, l, s, 0, len);
      expectRange(kv, l, s, 2, len);   // a suffix (sliding window)
      expectRange(kv, l, s, 1, 3);     // a middle part
      expectRange(kv, l, s, len - 1, len);
    }
}

TEST(ContiguousKvCache, EmptyRangesVisitNothing) {
  ContiguousKvCache kv(1, 1, 4);
  writeRange(kv, 0, 0, 0, 3);
  int visits = 0;
  kv.forEachSpan(0, 0, 2, 2, [&](const float *, const float *, int64_t, int64_t) { ++visits; });
  kv.forEachSpan(0, 0, 3, 1, [&](const float *, const float *, int64_t, int64_t) { ++visits; });
  EXPECT_EQ(visits, 0);
}

TEST(ContiguousKvCache, GrowsTokenByTokenWithoutLosingData) {
  const int64_t layers = 2, width = 16;
  const int32_t seqs = 3;
  ContiguousKvCache kv(layers, seqs, width);
  // Interleaved appends of different lengths, as batched decoding does: prefill, then one token at a
  // time (reallocations in between must keep every earlier row).
  int64_t len[3] = {0, 0, 0};
  for (int32_t s = 0; s < seqs; ++s)
    for (int64_t l = 0; l < layers; ++l)
      writeRange(kv, l, s, 0, 3 * (s + 1));
  for (int32_t s = 0; s < seqs; ++s)
    len[s] = 3 * (s + 1);
  for (int step = 0; step < 300; ++step)
    for (int32_t s = 0; s < seqs; ++s) {
      if (s == 1 && step >= 100)
        continue; // sequence 1 stopped early
      for (int64_t l = 0; l < layers; ++l)
        writeRange(kv, l, s, len[s], 1);
      ++len[s];
    }
  uint64_t needed = 0;
  for (int32_t s = 0; s < seqs; ++s)
    for (int64_t l = 0; l < layers; ++l) {
      expectRange(kv, l, s, 0, len[s]);
      needed += uint64_t(len[s] * width) * 4 * 2; // K and V
    }
  EXPECT_GE(kv.bytes(), needed);
  EXPECT_LE(kv.bytes(), 2 * needed) << "growth should not over-allocate wildly";
}

TEST(ContiguousKvCache, BytesOfASingleWrite) {
  ContiguousKvCache kv(2, 2, 8);
  writeRange(kv, 1, 1, 0, 10);
  // K and V of 10 rows of 8 floats.
  EXPECT_GE(kv.bytes(), 2u * 10 * 8 * 4);
  EXPECT_LE(kv.bytes(), 2u * 2 * 10 * 8 * 4);
  writeRange(kv, 0, 0, 0, 10);
  EXPECT_GE(kv.bytes(), 4u * 10 * 8 * 4);
}

TEST(ContiguousKvCache, OverwriteKeepsOtherRows) {
  ContiguousKvCache kv(1, 1, 4);
  writeRange(kv, 0, 0, 0, 6);
  // Rewrite positions 2..3 with the same tags: the rest stays; then read everything back.
  writeRange(kv, 0, 0, 2, 2);
  expectRange(kv, 0, 0, 0, 6);
}

TEST(ContiguousKvCache, ResetForgetsOneSequence) {
  ContiguousKvCache kv(2, 3, 8);
  for (int32_t s = 0; s < 3; ++s)
    for (int64_t l = 0; l < 2; ++l)
      writeRange(kv, l, s, 0, 7);
  kv.reset(1);
  // The other sequences are intact.
  for (int32_t s : {0, 2})
    for (int64_t l = 0; l < 2; ++l)
      expectRange(kv, l, s, 0, 7);
  // Sequence 1 starts over: a shorter new sequence reads back as written.
  for (int64_t l = 0; l < 2; ++l)
    writeRange(kv, l, 1, 0, 3);
  for (int64_t l = 0; l < 2; ++l)
    expectRange(kv, l, 1, 0, 3);
  // A reused slot grows again past its old length.
  for (int64_t l = 0; l < 2; ++l)
    writeRange(kv, l, 1, 3, 20);
  for (int64_t l = 0; l < 2; ++l)
    expectRange(kv, l, 1, 0, 23);
}

TEST(ContiguousKvCache, UsableThroughTheInterface) {
  std::unique_ptr<helm::rt::KvCache> kv = std::make_unique<ContiguousKvCache>(1, 1, 2);
  float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8};
  kv->write(0, 0, 0, 2, k, v);
  std::vector<float> ks, vs;
  kv->forEachSpan(0, 0, 0, 2, [&](const float *kp, const float *vp, int64_t, int64_t count) {
    ks.insert(ks.end(), kp, kp + count * 2);
    vs.insert(vs.end(), vp, vp + count * 2);
  });
  EXPECT_EQ(ks, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(vs, (std::vector<float>{5, 6, 7, 8}));
  EXPECT_GE(kv->bytes(), 32u);
  EXPECT_LE(kv->bytes(), 64u);
}

// The device stage's cache: chunks of device memory, one span per chunk.
TEST(DeviceKvCache, SpansFollowTheChunksAcrossBoundaries) {
  helm::rt::EmuOptions o;
  o.arenaBytes = 1 << 20;
  auto device = helm::rt::createEmuDevice(o);
  ASSERT_TRUE(bool(device));
  {
    helm::rt::DeviceKvCache kv(**device, /*layers=*/2, /*sequences=*/2, /*rowWidth=*/12,
                               /*chunkTokens=*/5);
    // A prefill that straddles two chunk boundaries, then decode steps one token at a time.
    for (int64_t l = 0; l < 2; ++l)
      for (int32_t s = 0; s < 2; ++s)
        writeRange(kv, l, s, 0, 12 + s);
    for (int step = 0; step < 9; ++step)
      for (int64_t l = 0; l < 2; ++l)
        for (int32_t s = 0; s < 2; ++s)
          writeRange(kv, l, s, 12 + s + step, 1);
    for (int64_t l = 0; l < 2; ++l)
      for (int32_t s = 0; s < 2; ++s) {
        expectRange(kv, l, s, 0, 21 + s);
        expectRange(kv, l, s, 4, 11); // a window starting inside a chunk
      }
    int spans = 0;
    kv.forEachSpan(0, 0, 0, 21, [&](const float *, const float *, int64_t, int64_t) { ++spans; });
    EXPECT_EQ(spans, 5) << "positions 0..20 lie in five chunks of five";
    // Device memory: 2 layers x 2 sequences x 5 chunks of K and V.
    EXPECT_EQ(kv.bytes(), 2u * 2 * 5 * 2 * 5 * 12 * 4);
    EXPECT_GE((*device)->bytesInUse(), kv.bytes());
    kv.reset(0);
    for (int64_t l = 0; l < 2; ++l)
      expectRange(kv, l, 1, 0, 22);
    EXPECT_EQ(kv.bytes(), 2u * 1 * 5 * 2 * 5 * 12 * 4);
  }
  EXPECT_EQ((*device)->bytesInUse(), 0u) << "the cache frees its chunks";
}

TEST(DeviceKvCache, FullDeviceFailsTheWriteWithTheReason) {
  helm::rt::EmuOptions o;
  o.targetName = "tiny";
  o.arenaBytes = 4096;
  auto device = helm::rt::createEmuDevice(o);
  ASSERT_TRUE(bool(device));
  // One chunk is 2 x 8 x 32 x 4 = 2 KiB: two fit, the third does not.
  helm::rt::DeviceKvCache kv(**device, 1, 1, 32, 8);
  std::vector<float> rows(size_t(24 * 32), 1.0f);
  EXPECT_TRUE(kv.write(0, 0, 0, 16, rows.data(), rows.data()));
  EXPECT_FALSE(kv.write(0, 0, 16, 1, rows.data(), rows.data()));
  EXPECT_NE(kv.error().find("cannot allocate 2.0 KiB (2048 bytes) for the device stage's KV cache"),
            std::string::npos)
      << kv.error();
}

} // namespace
