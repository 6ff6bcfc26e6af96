// Section checksums of the .helmpkg format: XXH64 (seed 0), implemented here from the published
// algorithm description. docs/package-format.md defines it and gives test vectors.
//
// Both a one-shot function and an incremental state are provided; feeding the same bytes in any split
// gives the same digest. Header-only consumers (runtime, compiler, fuzzer) link HelmFormat.
#pragma once

#include <cstddef>
#include <cstdint>

namespace helm::pkg {

/// XXH64 of `size` bytes at `data` with `seed`.
uint64_t checksum64(const void *data, size_t size, uint64_t seed = 0);

/// Incremental XXH64: update() any number of times, digest() at any point (it does not consume state).
class Checksum64 {
public:
  explicit Checksum64(uint64_t seed = 0);
  void update(const void *data, size_t size);
  uint64_t digest() const;
  uint64_t totalSize() const { return total_; }

private:
  uint64_t seed_;
  uint64_t acc_[4];
  uint64_t total_ = 0;
  unsigned char pending_[32]; // bytes of an incomplete 32-byte stripe
  unsigned pendingSize_ = 0;
};

} // namespace helm::pkg
