//===- KvCacheTest.cpp - host and paged KV caches: round trips, layers/sequences, paging ===//
#include "runtime/backends/host/HostBackend.h"
#include "runtime/kv/KvCache.h"
#include "runtime/kv/PagedKvCache.h"
#include "test/unit/Reference.h"

#include <gtest/gtest.h>

#include <random>
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
/// Element e of position t is where the cache's strides say: t * positionStride + e with the heads
/// side by side (headStride 0), t * positionStride + g * headStride + d for element d of head g
/// in a head-major cache (positionStride is then the head's size).
void expectRange(const helm::rt::KvCache &kv, int64_t layer, int32_t seq, int64_t from, int64_t to) {
  SCOPED_TRACE("layer " + std::to_string(layer) + " seq " + std::to_string(seq) + " [" +
               std::to_string(from) + ", " + std::to_string(to) + ")");
  int64_t w = kv.rowWidth();
  const int64_t ps = kv.positionStride(), hs = kv.headStride(layer, seq);
  auto index = [&](int64_t t, int64_t e) { return hs == 0 ? t * ps + e : t * ps + (e / ps) * hs + e % ps; };
  int64_t next = from;
  kv.forEachSpan(layer, seq, from, to, [&](const void *kRows, const void *vRows, int64_t first, int64_t count) {
          auto *k = static_cast<const float *>(kRows);
          auto *v = static_cast<const float *>(vRows);
    ASSERT_EQ(first, next) << "spans out of order or with a gap";
    ASSERT_GT(count, 0);
    ASSERT_LE(first + count, to);
    for (int64_t t = 0; t < count; ++t)
      for (int64_t e = 0; e < w; ++e) {
        ASSERT_EQ(k[index(t, e)], tag(layer, seq, first + t, e, false)) << "K pos " << first + t << " e " << e;
        ASSERT_EQ(v[index(t, e)], tag(layer, seq, first + t, e, true)) << "V pos " << first + t << " e " << e;
      }
    next = first + count;
  });
  EXPECT_EQ(next, std::max(from, to)) << "spans do not reach the end";
}

// Position-major rows (kvHeads 1) and head-major ones (4 heads: every growth moves each
// head's rows to their new place).
class ContiguousLayouts : public testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(KvHeads, ContiguousLayouts, testing::Values(int64_t(1), int64_t(4)));

TEST_P(ContiguousLayouts, WriteThenReadBack) {
  ContiguousKvCache kv(/*layers=*/3, /*sequences=*/2, /*rowWidth=*/24, 0, helm::kernels::DType::f32, GetParam());
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

// A session sized for maxPositions holds no more than that: growth (x1.5) stops at the cap, where
// without one it overshoots (what newSession's host-RAM check counts would then be wrong).
TEST_P(ContiguousLayouts, GrowthStopsAtMaxPositions) {
  const int64_t width = 8, positions = 100;
  ContiguousKvCache capped(/*layers=*/1, /*sequences=*/1, width, /*maxPositions=*/positions,
                           helm::kernels::DType::f32, GetParam());
  ContiguousKvCache uncapped(1, 1, width, 0, helm::kernels::DType::f32, GetParam());
  for (int64_t p = 0; p < positions; ++p) {
    writeRange(capped, 0, 0, p, 1);
    writeRange(uncapped, 0, 0, p, 1);
  }
  expectRange(capped, 0, 0, 0, positions);
  EXPECT_EQ(capped.bytes(), uint64_t(positions * width) * 4 * 2);
  EXPECT_GT(uncapped.bytes(), capped.bytes()) << "the uncapped growth should overshoot here";
  // Past the cap it still grows (exactly), never loses rows.
  writeRange(capped, 0, 0, positions, 3);
  expectRange(capped, 0, 0, 0, positions + 3);
}

TEST(ContiguousKvCache, EmptyRangesVisitNothing) {
  ContiguousKvCache kv(1, 1, 4);
  writeRange(kv, 0, 0, 0, 3);
  int visits = 0;
  kv.forEachSpan(0, 0, 2, 2, [&](const void *, const void *, int64_t, int64_t) { ++visits; });
  kv.forEachSpan(0, 0, 3, 1, [&](const void *, const void *, int64_t, int64_t) { ++visits; });
  EXPECT_EQ(visits, 0);
}

TEST_P(ContiguousLayouts, GrowsTokenByTokenWithoutLosingData) {
  const int64_t layers = 2, width = 16;
  const int32_t seqs = 3;
  ContiguousKvCache kv(layers, seqs, width, 0, helm::kernels::DType::f32, GetParam());
  EXPECT_EQ(kv.positionStride(), width / GetParam());
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

TEST_P(ContiguousLayouts, OverwriteKeepsOtherRows) {
  ContiguousKvCache kv(1, 1, 4, 0, helm::kernels::DType::f32, GetParam());
  writeRange(kv, 0, 0, 0, 6);
  // Rewrite positions 2..3 with the same tags: the rest stays; then read everything back.
  writeRange(kv, 0, 0, 2, 2);
  expectRange(kv, 0, 0, 0, 6);
}

TEST_P(ContiguousLayouts, ResetForgetsOneSequence) {
  ContiguousKvCache kv(2, 3, 8, 0, helm::kernels::DType::f32, GetParam());
  for (int32_t s = 0; s < 3; ++s)
    for (int64_t l = 0; l < 2; ++l)
      writeRange(kv, l, s, 0, 7);
  uint64_t before = kv.bytes();
  kv.reset(1);
  // Its memory is given back (a server's slot frees what a finished request held).
  EXPECT_EQ(kv.bytes(), before * 2 / 3);
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

// An f16 cache stores each row rounded to half precision (round to nearest even: the test's own
// rounding, Reference.h) at half the bytes, in the same places as the f32 cache: across sequences,
// layers, appends and rewrites.
TEST(ContiguousKvCache, HalfPrecisionRowsAreTheRoundedValues) {
  const int64_t width = 5;
  ContiguousKvCache f16(2, 2, width, 0, helm::kernels::DType::f16), f32(2, 2, width);
  EXPECT_EQ(f16.rowType(), helm::kernels::DType::f16);
  EXPECT_EQ(f32.rowType(), helm::kernels::DType::f32);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-70000.0f, 70000.0f); // beyond f16's range too
  std::vector<std::vector<float>> keys(4), values(4);           // [layer * 2 + seq] rows
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int32_t seq = 0; seq < 2; ++seq)
      for (int64_t pos = 0; pos < 9; pos += 3) {
        std::vector<float> k(size_t(3 * width)), v(k.size());
        for (size_t i = 0; i < k.size(); ++i) {
          // Small values too, where f16 is subnormal.
          k[i] = i % 4 == 0 ? uni(rng) * 1e-9f : uni(rng) / 1000.0f;
          v[i] = uni(rng);
        }
        ASSERT_TRUE(f16.write(layer, seq, pos, 3, k.data(), v.data()));
        ASSERT_TRUE(f32.write(layer, seq, pos, 3, k.data(), v.data()));
        auto &ks = keys[size_t(layer * 2 + seq)], &vs = values[size_t(layer * 2 + seq)];
        ks.insert(ks.end(), k.begin(), k.end());
        vs.insert(vs.end(), v.begin(), v.end());
      }
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int32_t seq = 0; seq < 2; ++seq) {
      int64_t seen = 0;
      f16.forEachSpan(layer, seq, 2, 9, [&](const void *kRows, const void *vRows, int64_t first, int64_t count) {
        EXPECT_EQ(first, 2);
        for (int64_t i = 0; i < count * width; ++i) {
          const size_t at = size_t(first * width + i);
          const auto *k = static_cast<const uint16_t *>(kRows), *v = static_cast<const uint16_t *>(vRows);
          ASSERT_EQ(k[i], helm::test::refFloatToHalf(keys[size_t(layer * 2 + seq)][at])) << "K element " << at;
          ASSERT_EQ(v[i], helm::test::refFloatToHalf(values[size_t(layer * 2 + seq)][at])) << "V element " << at;
        }
        seen += count;
      });
      EXPECT_EQ(seen, 7);
    }
  EXPECT_EQ(f16.bytes() * 2, f32.bytes());
}

TEST(ContiguousKvCache, UsableThroughTheInterface) {
  std::unique_ptr<helm::rt::KvCache> kv = std::make_unique<ContiguousKvCache>(1, 1, 2);
  float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8};
  kv->write(0, 0, 0, 2, k, v);
  std::vector<float> ks, vs;
  kv->forEachSpan(0, 0, 0, 2, [&](const void *kpRows, const void *vpRows, int64_t, int64_t count) {
          auto *kp = static_cast<const float *>(kpRows);
          auto *vp = static_cast<const float *>(vpRows);
    ks.insert(ks.end(), kp, kp + count * 2);
    vs.insert(vs.end(), vp, vp + count * 2);
  });
  EXPECT_EQ(ks, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(vs, (std::vector<float>{5, 6, 7, 8}));
  EXPECT_GE(kv->bytes(), 32u);
  EXPECT_LE(kv->bytes(), 64u);
}

// The device stage's paged cache, on the emulated GPU and on the cpu device.
std::unique_ptr<helm::rt::PagedKvCache> paged(helm::rt::Device &device, int64_t layers,
                                              int32_t sequences, int64_t width,
                                              int64_t pageTokens, int64_t devicePages,
                                              bool offload = true,
                                              uint64_t hostLimit = UINT64_MAX) {
  helm::rt::PagedKvOptions o;
  o.pageTokens = pageTokens;
  o.devicePages = devicePages;
  o.offload = offload;
  o.hostLimitBytes = hostLimit;
  auto kv = helm::rt::PagedKvCache::create(device, layers, sequences, width, o);
  if (!kv) {
    ADD_FAILURE() << llvm::toString(kv.takeError());
    return nullptr;
  }
  return std::move(*kv);
}

std::unique_ptr<helm::rt::Device> emu(uint64_t arena) {
  helm::rt::EmuOptions o;
  o.targetName = "tiny";
  o.arenaBytes = arena;
  auto device = helm::rt::createEmuDevice(o);
  EXPECT_TRUE(bool(device));
  return device ? std::move(*device) : nullptr;
}

TEST(PagedKvCache, SpansFollowThePagesAcrossBoundaries) {
  std::unique_ptr<helm::rt::Device> devices[] = {emu(1 << 20), helm::rt::createCpuDevice()};
  for (auto &device : devices) {
    SCOPED_TRACE(helm::rt::deviceKindName(device->kind()).str());
    {
      auto kv = paged(*device, /*layers=*/2, /*sequences=*/2, /*width=*/12, /*page=*/5,
                      /*devicePages=*/100);
      ASSERT_TRUE(kv);
      // A prefill that straddles two page boundaries, then decode steps one token at a time.
      for (int64_t l = 0; l < 2; ++l)
        for (int32_t s = 0; s < 2; ++s)
          writeRange(*kv, l, s, 0, 12 + s);
      for (int step = 0; step < 9; ++step)
        for (int64_t l = 0; l < 2; ++l)
          for (int32_t s = 0; s < 2; ++s)
            writeRange(*kv, l, s, 12 + s + step, 1);
      for (int64_t l = 0; l < 2; ++l)
        for (int32_t s = 0; s < 2; ++s) {
          expectRange(*kv, l, s, 0, 21 + s);
          expectRange(*kv, l, s, 4, 11); // a window starting inside a page
        }
      int spans = 0;
      kv->forEachSpan(0, 0, 0, 21, [&](const void *, const void *, int64_t, int64_t) { ++spans; });
      EXPECT_EQ(spans, 5) << "positions 0..20 lie in five pages of five";
      // Pages hold both layers: 2 sequences x 5 pages x (2 layers x K, V x 5 rows x 12 floats).
      EXPECT_EQ(kv->bytes(), 2u * 5 * helm::rt::PagedKvCache::pageBytes(2, 12, 5));
      EXPECT_EQ(kv->paging().evicted, 0u);
      EXPECT_EQ(kv->paging().devicePagesPeak, 10);
      kv->reset(0);
      for (int64_t l = 0; l < 2; ++l)
        expectRange(*kv, l, 1, 0, 22);
      EXPECT_EQ(kv->paging().devicePages, 5);
    }
    EXPECT_EQ(device->bytesInUse(), 0u) << "the cache frees its pages and staging buffers";
  }
}

// Two device pages: the oldest full pages go to host memory (one counted copy each), and
// reading them streams each page's layer back (one counted copy per page and layer), rows
// intact. Pages are full only once the last layer has written them.
TEST(PagedKvCache, EvictsTheOldestFullPageAndStreamsItBack) {
  auto device = emu(1 << 20);
  ASSERT_TRUE(device);
  const int64_t W = 8, T = 4;
  const uint64_t page = helm::rt::PagedKvCache::pageBytes(2, W, T), slice = page / 2;
  auto kv = paged(*device, 2, 1, W, T, 2);
  ASSERT_TRUE(kv);
  // Page by page, layer 0 then layer 1 (as a stage call does): 6 pages.
  for (int64_t p = 0; p < 6; ++p)
    for (int64_t l = 0; l < 2; ++l)
      writeRange(*kv, l, 0, p * T, T);
  helm::rt::PagingCounters c = kv->paging();
  EXPECT_EQ(c.evicted, 4u) << "pages 0..3 left; 4 and 5 stay";
  EXPECT_EQ(c.devicePagesPeak, 2);
  EXPECT_EQ(c.hostPages, 4);
  EXPECT_EQ(c.prefetched, 0u);
  EXPECT_EQ(device->counters().deviceToHostBytes, 4 * page);
  EXPECT_EQ(device->counters().deviceToHostTransfers, 4u);
  // Attention over everything: 4 streamed pages per layer.
  for (int64_t l = 0; l < 2; ++l)
    expectRange(*kv, l, 0, 0, 6 * T);
  EXPECT_EQ(kv->paging().prefetched, 8u);
  EXPECT_EQ(device->counters().hostToDeviceBytes, 8 * slice);
  // A window that starts in page 3 streams only page 3.
  expectRange(*kv, 1, 0, 3 * T + 1, 6 * T);
  EXPECT_EQ(kv->paging().prefetched, 9u);
  // Resident pages only: nothing streamed.
  expectRange(*kv, 0, 0, 4 * T, 6 * T);
  EXPECT_EQ(kv->paging().prefetched, 9u);
  // Bytes: 2 device slots and 4 host pages.
  EXPECT_EQ(kv->bytes(), 6 * page);
}

TEST(PagedKvCache, PagesStillBeingWrittenAreNeverEvicted) {
  auto device = emu(1 << 20);
  ASSERT_TRUE(device);
  auto kv = paged(*device, 2, 3, 8, 4, 2);
  ASSERT_TRUE(kv);
  writeRange(*kv, 0, 0, 0, 2);
  writeRange(*kv, 0, 1, 0, 2);
  // The third sequence's first page needs a slot; both pages are half written.
  std::vector<float> rows(8, 1.0f);
  EXPECT_FALSE(kv->write(0, 2, 0, 1, rows.data(), rows.data()));
  EXPECT_NE(kv->error().find("taken by pages still being written (a batch of 3 sequences needs "
                             "at least 3)"),
            std::string::npos)
      << kv->error();
  // Layer 0 filling a page does not make it full: layer 1 has not written it yet.
  writeRange(*kv, 0, 0, 2, 2);
  EXPECT_FALSE(kv->write(0, 2, 0, 1, rows.data(), rows.data()));
  writeRange(*kv, 1, 0, 0, 4);
  EXPECT_TRUE(kv->write(0, 2, 0, 1, rows.data(), rows.data())) << kv->error();
  EXPECT_EQ(kv->paging().evicted, 1u);
}

// A budget larger than the device can give (the stage's own buffers took memory since the session
// was sized): with offload the cache lives with the slots it got and evicts instead of failing.
TEST(PagedKvCache, DeviceFullerThanTheBudgetSaidFallsBackToEviction) {
  const int64_t W = 8, T = 4;
  const uint64_t page = helm::rt::PagedKvCache::pageBytes(2, W, T); // 512 B
  auto device = emu(page + 2 * page); // the staging buffers (one page in all) and two pages
  ASSERT_TRUE(device);
  {
    auto kv = paged(*device, 2, 1, W, T, /*devicePages=*/4);
    ASSERT_TRUE(kv);
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t l = 0; l < 2; ++l)
        writeRange(*kv, l, 0, p * T, T);
    EXPECT_EQ(kv->paging().devicePagesPeak, 2);
    EXPECT_EQ(kv->paging().evicted, 2u);
    for (int64_t l = 0; l < 2; ++l)
      expectRange(*kv, l, 0, 0, 4 * T);
  }
  // Without offload the same shortfall is the device's error.
  auto kv = paged(*device, 2, 1, W, T, 4, /*offload=*/false);
  ASSERT_TRUE(kv);
  std::vector<float> rows(size_t(T * W), 1.0f);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t l = 0; l < 2; ++l)
      EXPECT_TRUE(kv->write(l, 0, p * T, T, rows.data(), rows.data())) << kv->error();
  EXPECT_FALSE(kv->write(0, 0, 2 * T, 1, rows.data(), rows.data()));
  EXPECT_NE(kv->error().find("cannot allocate"), std::string::npos) << kv->error();
}

TEST(PagedKvCache, OffloadOffAndHostLimitFailWithTheReason) {
  auto device = emu(1 << 20);
  ASSERT_TRUE(device);
  std::vector<float> rows(size_t(16 * 8), 1.0f);
  {
    auto kv = paged(*device, 1, 1, 8, 4, 2, /*offload=*/false);
    ASSERT_TRUE(kv);
    EXPECT_TRUE(kv->write(0, 0, 0, 8, rows.data(), rows.data()));
    EXPECT_FALSE(kv->write(0, 0, 8, 1, rows.data(), rows.data()));
    EXPECT_NE(kv->error().find("the device KV budget (2 pages of 4 tokens, 512 B) is full and KV "
                               "offload is off"),
              std::string::npos)
        << kv->error();
  }
  {
    // Room on the host for one evicted page.
    uint64_t page = helm::rt::PagedKvCache::pageBytes(1, 8, 4);
    auto kv = paged(*device, 1, 1, 8, 4, 2, true, page);
    ASSERT_TRUE(kv);
    for (int64_t pos = 0; pos < 12; pos += 4)
      EXPECT_TRUE(kv->write(0, 0, pos, 4, rows.data(), rows.data())) << kv->error();
    EXPECT_FALSE(kv->write(0, 0, 12, 1, rows.data(), rows.data()));
    EXPECT_NE(kv->error().find("the KV cache's pages in host memory would exceed 256 B"),
              std::string::npos)
        << kv->error();
  }
  {
    // One write that spans more pages than the device holds cannot evict its own pages.
    auto kv = paged(*device, 1, 1, 8, 4, 2);
    ASSERT_TRUE(kv);
    EXPECT_FALSE(kv->write(0, 0, 0, 12, rows.data(), rows.data()));
    EXPECT_NE(kv->error().find("taken by pages still being written"), std::string::npos)
        << kv->error();
  }
  // Staging buffers that do not fit the device: creation fails with the device's message.
  auto tiny = emu(256);
  ASSERT_TRUE(tiny);
  helm::rt::PagedKvOptions o;
  o.pageTokens = 512;
  auto kv = helm::rt::PagedKvCache::create(*tiny, 2, 1, 64, o);
  ASSERT_FALSE(bool(kv));
  EXPECT_NE(llvm::toString(kv.takeError()).find("for the KV cache's attention staging buffers"),
            std::string::npos);
}

} // namespace
