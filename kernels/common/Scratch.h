//===- Scratch.h - per-thread buffers that only grow --------------------------------===//
#ifndef HELM_KERNELS_COMMON_SCRATCH_H
#define HELM_KERNELS_COMMON_SCRATCH_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace helm::kernels {

/// `buffer`'s data, grown to at least n floats first; it never shrinks, so a thread_local buffer
/// stops allocating once it has seen the largest call.
inline float *grownTo(std::vector<float> &buffer, int64_t n) {
  if (buffer.size() < size_t(n))
    buffer.resize(size_t(n));
  return buffer.data();
}

} // namespace helm::kernels

#endif
