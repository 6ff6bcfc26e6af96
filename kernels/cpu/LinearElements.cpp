//===- LinearElements.cpp - y = x . W for f32/f16/bf16 weights: GEMV or GEMM --------===//
//
// The element-weight half of helm_k_linear (kernels/linear/Linear.cpp).
// x is widened to f32 once per call; the kernels of the active instruction set (Isa.h: AVX-512,
// AVX2+FMA+F16C or scalar, chosen once from CPUID or HELM_KERNEL_ISA) compute y with f32
// accumulation and round each output once. The N output columns are split over the persistent
// pool. For M <= 8 nothing is allocated per call: x's f32 copy and the [K, N] kernels'
// accumulators live in per-thread buffers that only grow. Design: docs/kernels.md.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Gemm.h"
#include "kernels/cpu/Gemv.h"
#include "kernels/common/Isa.h"
#include "kernels/common/Numeric.h"
#include "kernels/common/ThreadPool.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace helm::kernels;

const LinearKernels &helm::kernels::linearKernelsFor(Isa isa) {
  switch (isa) {
  case Isa::avx512: return linearKernelsAvx512();
  case Isa::avx2: return linearKernelsAvx2();
  case Isa::scalar: break;
  }
  return linearKernelsScalar();
}

namespace {

/// Below this many multiply-adds a call runs on the calling thread: waking the pool costs more.
constexpr int64_t kParallelMinMacs = int64_t(1) << 16;

} // namespace

float *helm::kernels::gemvThreadScratch() {
  thread_local std::vector<float> buffer;
  if (buffer.empty())
    buffer.resize(size_t(kGemvScratchFloats) + 16);
  auto addr = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<float *>((addr + 63) & ~uintptr_t(63));
}

void helm::kernels::linearElements(const void *x, DType xd, const void *w, DType wd, bool wTransposed, void *y,
                                   DType yd, int64_t M, int64_t K, int64_t N) {
  if (M <= 0 || N <= 0)
    return;
  // Both paths compute in f32: x widened once (kept aligned for oneDNN).
  const float *xf = static_cast<const float *>(x);
  if (xd != DType::f32) {
    thread_local std::vector<float> xBuffer;
    if (xBuffer.size() < size_t(M * K) + 16)
      xBuffer.resize(size_t(M * K) + 16);
    auto addr = reinterpret_cast<uintptr_t>(xBuffer.data());
    float *buf = reinterpret_cast<float *>((addr + 63) & ~uintptr_t(63));
    widen(x, xd, buf, M * K);
    xf = buf;
  }
  if (gemmWanted(activeIsa(), xd, wd, wTransposed, M, K, N)) { // prefill: oneDNN (Gemm.h)
    linearGemm(x, xf, xd, w, wd, wTransposed, y, yd, M, K, N);
    return;
  }
  const LinearKernels &kernels = linearKernelsFor(activeIsa());

  LinearProblem problem{xf, w, y, yd, M, K, N};
  LinearRangeFn fn = wTransposed ? kernels.nk[int(wd)] : kernels.kn[int(wd)];

  ThreadPool &threads = pool();
  if (threads.threads() == 1 || M * K * N < kParallelMinMacs) {
    fn(problem, 0, N, gemvThreadScratch());
    return;
  }
  if (!wTransposed && M <= kGemvMaxRows && M * N <= kGemvScratchFloats) {
    // A narrow [K, N] weight (rows of a few KB, as in decode): splitting the columns would give
    // each thread short strided pieces of every row, which the prefetchers follow poorly
    // (measured: 40-60% of the triad on 2 threads). Each thread instead streams whole rows of its
    // own slice of K into private sums, and the caller adds the slices.
    int slices = threads.threads();
    thread_local std::vector<float> partials;
    if (partials.size() < size_t(slices * M * N))
      partials.resize(size_t(slices * M * N));
    struct SliceJob {
      const LinearProblem *problem;
      LinearKSliceFn fn;
      float *partials;
      int slices;
    } job{&problem, kernels.knSlice[int(wd)], partials.data(), slices};
    threads.parallelFor(slices, 1, [&job](int64_t s0, int64_t s1) {
      const LinearProblem &p = *job.problem;
      for (int64_t s = s0; s < s1; ++s)
        job.fn(p, p.K * s / job.slices, p.K * (s + 1) / job.slices,
               job.partials + s * p.M * p.N);
    });
    float *total = partials.data();
    for (int s = 1; s < slices; ++s)
      for (int64_t i = 0; i < M * N; ++i)
        total[i] += partials[size_t(s * M * N + i)];
    narrow(total, yd, y, M * N);
    return;
  }
  // Chunks of whole cache lines of weights: 16 rows of [N, K], 64 columns of [K, N].
  struct Job {
    const LinearProblem *problem;
    LinearRangeFn fn;
  } job{&problem, fn};
  // One captured pointer: std::function keeps it inline, no allocation.
  threads.parallelFor(N, wTransposed ? 16 : 64, [&job](int64_t n0, int64_t n1) {
    job.fn(*job.problem, n0, n1, gemvThreadScratch());
  });
}
