//===- KernelParams.h - by-value parameter structs shared by kernels and their host code ----===//
//
// Some kernels take a list of KV-cache spans or segments as ONE by-value struct parameter, so a
// launch carries up to a few dozen device pointers without a host-to-device copy (kernel
// parameters travel with the launch). The host code that fills them (runtime/core/
// CudaDeviceOps.cpp, a C++ file) and the kernels (nvcc) include this header, so both sides agree
// on the layout; the static_asserts pin it. Plain C++: no CUDA header needed.
//
// The kernels declare these parameters `const __grid_constant__`: they index the arrays with a
// run-time index, which without it would make every thread copy the whole struct to local memory.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_CUDA_KERNELPARAMS_H
#define HELM_KERNELS_CUDA_KERNELPARAMS_H

#include "contract/helm_contract.h"

#include <stdint.h>

namespace helm_cuda {

/// Element-type codes of helm_cuda_convert: the contract's helm_dtype.
enum : int32_t { kDTypeF32 = HELM_DTYPE_F32, kDTypeF16 = HELM_DTYPE_F16, kDTypeBf16 = HELM_DTYPE_BF16 };

// --- helm_cuda_qgemv, helm_cuda_qgemv_staged, helm_cuda_qgemv_q4k ----------------------------

/// Rows of x one launch of any block GEMV multiplies (the kernels' accumulators per thread).
constexpr int kQgemvMaxRows = 8;
/// helm_cuda_qgemv_staged's thread block, and the output rows it takes at a time.
constexpr int kQgemvStagedThreads = 256;
constexpr int kQgemvStagedRows = 4;
/// helm_cuda_qgemv_q4k's thread block, and the output rows each of its warps takes at a time
/// (sharing every load of x among them).
constexpr int kQgemvQ4KThreads = 256;
constexpr int kQgemvQ4KRowsPerWarp = 2;

// --- helm_cuda_kv_append -------------------------------------------------------------------

/// `rows` consecutive rows of the call's keys and values, starting at row `srcRow` of k and v
/// ([batch * seq, width] in the call's dtype), go to the f32 rows at `k` and `v` (one span of
/// the KV cache, already reserved).
struct KvAppendSegment {
  float *k;
  float *v;
  int64_t srcRow;
  int64_t rows;
};
constexpr int kKvAppendSegments = 32;
struct KvAppendBatch {
  KvAppendSegment segment[kKvAppendSegments];
  int32_t count; // segments used; the launch's grid.y
};

// --- helm_cuda_attention -------------------------------------------------------------------

/// `count` cached positions starting at position `first`: key row t is k + (t - first) * kv_width
/// (and likewise v), f32.
struct KvSpanDesc {
  const float *k;
  const float *v;
  int64_t first;
  int64_t count;
};
constexpr int kAttentionSpans = 64;
struct KvSpanBatch {
  KvSpanDesc span[kAttentionSpans];
  int32_t count; // spans used, in ascending position order
};

/// helm_cuda_attention's `flags`.
enum : int32_t {
  /// Merge the (m, s, o) state that the previous launch over the same queries saved in `state`.
  kAttentionResume = 1,
  /// Write out = o / s rounded to the dtype; without it, save (m, s, o) to `state` instead.
  kAttentionFinish = 2,
};
/// Threads per block of helm_cuda_attention (8 warps) and the largest head_dim it supports.
constexpr int kAttentionThreads = 256;
constexpr int kAttentionMaxHeadDim = 256;

static_assert(sizeof(KvAppendSegment) == 32 && sizeof(KvSpanDesc) == 32,
              "host and device must agree on the segment layout");
static_assert(sizeof(KvAppendBatch) == 32 * kKvAppendSegments + 8 &&
                  sizeof(KvSpanBatch) == 32 * kAttentionSpans + 8,
              "host and device must agree on the batch layout");
// Kernel parameters are limited to 4 KiB in all (the larger limit needs CUDA 12.1 drivers).
static_assert(sizeof(KvSpanBatch) + 128 <= 4096, "helm_cuda_attention's parameters exceed 4 KiB");

} // namespace helm_cuda

#endif
