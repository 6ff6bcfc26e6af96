// parseByteSize: every form people type for a memory size, the two unit systems kept apart, and
// the refusals (no number, unknown unit, too large, negative).
#include "contract/format/ByteSize.h"

#include <gtest/gtest.h>

using helm::parseByteSize;

namespace {

constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;

TEST(ByteSizeTest, BinaryUnitsInEveryCommonSpelling) {
  for (const char *text : {"8G", "8g", "8GiB", "8gib", "8 GiB", "8192M", "8192MiB", "8388608K",
                           "8388608KiB", "8589934592", "8589934592B"})
    EXPECT_EQ(parseByteSize(text), 8 * GiB) << text;
  EXPECT_EQ(parseByteSize("1.5GiB"), 3 * GiB / 2);
  EXPECT_EQ(parseByteSize("512m"), 512 * MiB);
  EXPECT_EQ(parseByteSize("2T"), 2 * TiB);
  EXPECT_EQ(parseByteSize("64k"), 64 * KiB);
}

TEST(ByteSizeTest, DecimalUnitsArePowersOfAThousand) {
  EXPECT_EQ(parseByteSize("8GB"), uint64_t(8'000'000'000));
  EXPECT_EQ(parseByteSize("8gb"), uint64_t(8'000'000'000));
  EXPECT_EQ(parseByteSize("512MB"), uint64_t(512'000'000));
  EXPECT_EQ(parseByteSize("64KB"), uint64_t(64'000));
  EXPECT_EQ(parseByteSize("1TB"), uint64_t(1'000'000'000'000));
}

TEST(ByteSizeTest, RefusesWhatIsNotASize) {
  for (const char *text : {"", "G", "GiB", "-1G", "8X", "8Gi", "8GiBs", "8 G B", "8iB", "1e3",
                           "nan", "8P", "2000000000G", ".", "1..5G"})
    EXPECT_FALSE(parseByteSize(text).has_value()) << text;
}

} // namespace
