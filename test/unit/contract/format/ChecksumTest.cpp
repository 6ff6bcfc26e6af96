// checksum64 (XXH64): published test vectors, agreement with LLVM's own XXH64 (an implementation
// independent of ours), incremental == one-shot for every split, and the vector shared with
// docs/package-format.md and test/fuzz/make_package_seeds.py.
#include "contract/format/Checksum.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/xxhash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using helm::pkg::Checksum64;
using helm::pkg::checksum64;

namespace {

// Bytes 0, 1, ..., 255, 0, 1, ... (the pattern of docs/package-format.md's test vector).
std::vector<char> pattern(size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = char(i & 0xff);
  return v;
}

TEST(Checksum, PublishedVectors) {
  EXPECT_EQ(checksum64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(checksum64("a", 1), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(checksum64("abc", 3), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(checksum64("Hello, World!", 13), 0xC49AACF8080FE47FULL);
}

TEST(Checksum, SpecVector) {
  // docs/package-format.md: the 1000 bytes i mod 256 (covers stripes, 8-, 4- and 1-byte tails).
  std::vector<char> v = pattern(1000);
  EXPECT_EQ(checksum64(v.data(), v.size()), 0x6EF436B00EBA4078ULL);
}

// llvm::xxHash64 is XXH64 with seed 0, written independently of Checksum.cpp: every length up to a
// few stripes past 1 KiB (all tail shapes, all stripe counts) over varied bytes, one-shot and fed in
// uneven pieces.
TEST(Checksum, AgreesWithLlvmXxHash64) {
  std::vector<char> v(1100);
  uint64_t x = 0x243F6A8885A308D3ULL;
  for (char &c : v) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    c = char(x >> 56);
  }
  for (size_t len = 0; len <= v.size(); ++len) {
    uint64_t want = llvm::xxHash64(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), len));
    ASSERT_EQ(checksum64(v.data(), len), want) << len;
    Checksum64 h;
    for (size_t at = 0, piece = 1; at < len; at += piece, piece = piece % 37 + 5)
      h.update(v.data() + at, std::min(piece, len - at));
    ASSERT_EQ(h.digest(), want) << len;
  }
}

TEST(Checksum, IncrementalEqualsOneShotForEverySplit) {
  std::vector<char> v = pattern(300);
  for (size_t len : {0u, 1u, 3u, 4u, 7u, 8u, 31u, 32u, 33u, 63u, 64u, 65u, 100u, 300u}) {
    uint64_t want = checksum64(v.data(), len);
    for (size_t a = 0; a <= len; a += 1 + len / 17) {
      for (size_t b = a; b <= len; b += 1 + len / 13) {
        Checksum64 h;
        h.update(v.data(), a);
        h.update(v.data() + a, b - a);
        h.update(v.data() + b, len - b);
        ASSERT_EQ(h.digest(), want) << len << " split " << a << "," << b;
        ASSERT_EQ(h.totalSize(), len);
      }
    }
    Checksum64 bytewise;
    for (size_t i = 0; i < len; ++i)
      bytewise.update(v.data() + i, 1);
    EXPECT_EQ(bytewise.digest(), want) << len;
  }
}

TEST(Checksum, SeedAndUnalignedInput) {
  std::vector<char> v = pattern(4096 + 7);
  EXPECT_NE(checksum64(v.data(), 4096, 0), checksum64(v.data(), 4096, 1));
  std::vector<char> copy(v.begin() + 3, v.begin() + 3 + 4000);
  EXPECT_EQ(checksum64(v.data() + 3, 4000), checksum64(copy.data(), copy.size()));
  Checksum64 seeded(42);
  seeded.update(v.data(), 1000);
  EXPECT_EQ(seeded.digest(), checksum64(v.data(), 1000, 42));
}

// Throughput over 1 GiB; run with --gtest_also_run_disabled_tests (prints GB/s).
TEST(Checksum, DISABLED_Throughput1GiB) {
  std::vector<char> v(size_t(1) << 30);
  for (size_t i = 0; i < v.size(); i += 4096)
    v[i] = char(i >> 12);
  uint64_t sink = 0;
  double best = 1e9;
  for (int r = 0; r < 3; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    sink ^= checksum64(v.data(), v.size());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  std::printf("checksum64: %.2f GB/s over 1 GiB (digest %016llx)\n", double(v.size()) / best / 1e9,
              (unsigned long long)sink);
}

} // namespace
