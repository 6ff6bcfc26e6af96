// XXH64 as described in the xxHash specification (stripes of 32 bytes over four 64-bit lanes, then
// a tail of 8-, 4- and 1-byte steps and a final avalanche). Written for this project; the reference
// vectors in test/unit/contract/format/ChecksumTest.cpp and docs/package-format.md pin it.
#include "contract/format/Checksum.h"

#include "llvm/Support/Endian.h"

#include <cstring>

namespace helm::pkg {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads independent of the host byte order and of alignment.
using llvm::support::endian::read32le;
using llvm::support::endian::read64le;

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t mergeLane(uint64_t h, uint64_t lane) {
  h ^= round(0, lane);
  return h * kPrime1 + kPrime4;
}

// Consumes whole 32-byte stripes; returns the number of bytes consumed.
inline size_t stripes(uint64_t acc[4], const unsigned char *p, size_t size) {
  uint64_t a = acc[0], b = acc[1], c = acc[2], d = acc[3];
  const unsigned char *start = p;
  const unsigned char *limit = p + (size & ~size_t(31));
  while (p < limit) {
    a = round(a, read64le(p));
    b = round(b, read64le(p + 8));
    c = round(c, read64le(p + 16));
    d = round(d, read64le(p + 24));
    p += 32;
  }
  acc[0] = a, acc[1] = b, acc[2] = c, acc[3] = d;
  return size_t(p - start);
}

inline void initLanes(uint64_t acc[4], uint64_t seed) {
  acc[0] = seed + kPrime1 + kPrime2;
  acc[1] = seed + kPrime2;
  acc[2] = seed;
  acc[3] = seed - kPrime1;
}

// Folds the lanes (or the seed for short inputs), the length, the tail bytes; final avalanche.
uint64_t finish(const uint64_t acc[4], uint64_t seed, uint64_t total, const unsigned char *tail,
                size_t tailSize) {
  uint64_t h;
  if (total >= 32) {
    h = rotl(acc[0], 1) + rotl(acc[1], 7) + rotl(acc[2], 12) + rotl(acc[3], 18);
    for (int i = 0; i < 4; ++i)
      h = mergeLane(h, acc[i]);
  } else {
    h = seed + kPrime5;
  }
  h += total;
  const unsigned char *p = tail;
  while (tailSize >= 8) {
    h ^= round(0, read64le(p));
    h = rotl(h, 27) * kPrime1 + kPrime4;
    p += 8;
    tailSize -= 8;
  }
  if (tailSize >= 4) {
    h ^= uint64_t(read32le(p)) * kPrime1;
    h = rotl(h, 23) * kPrime2 + kPrime3;
    p += 4;
    tailSize -= 4;
  }
  while (tailSize > 0) {
    h ^= uint64_t(*p) * kPrime5;
    h = rotl(h, 11) * kPrime1;
    ++p;
    --tailSize;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

} // namespace

uint64_t checksum64(const void *data, size_t size, uint64_t seed) {
  const auto *p = static_cast<const unsigned char *>(data);
  uint64_t acc[4];
  initLanes(acc, seed);
  size_t done = size >= 32 ? stripes(acc, p, size) : 0;
  return finish(acc, seed, size, p + done, size - done);
}

Checksum64::Checksum64(uint64_t seed) : seed_(seed) { initLanes(acc_, seed); }

void Checksum64::update(const void *data, size_t size) {
  if (size == 0)
    return;
  const auto *p = static_cast<const unsigned char *>(data);
  total_ += size;
  if (pendingSize_ > 0) {
    size_t take = 32 - pendingSize_;
    if (take > size)
      take = size;
    std::memcpy(pending_ + pendingSize_, p, take);
    pendingSize_ += unsigned(take);
    p += take;
    size -= take;
    if (pendingSize_ < 32)
      return;
    stripes(acc_, pending_, 32);
    pendingSize_ = 0;
  }
  size_t done = stripes(acc_, p, size);
  if (done < size) {
    std::memcpy(pending_, p + done, size - done);
    pendingSize_ = unsigned(size - done);
  }
}

uint64_t Checksum64::digest() const { return finish(acc_, seed_, total_, pending_, pendingSize_); }

} // namespace helm::pkg
