//===- GemmNone.cpp - Gemm.h without oneDNN ---------------------------------------===//
//
// The prefill GEMM left out, for binaries that must start where oneDNN is not installed
// (helm-rt-portable, which runs on GPU machines that have CUDA but none of our host libraries:
// docs/devices.md). Linked ahead of HelmKernelsCpu, it stands in for GemmOnednn.cpp, so the
// archive's oneDNN object is never pulled in and every helm_k_linear runs on the GEMV kernels
// (the same f32 products and sums, one rounding per output; prefill is slower, results are
// those of the GEMV path).
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Gemm.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace helm::kernels {

namespace {
std::atomic<int> forcedPath{int(PrefillPath::gemv)};
} // namespace

void setPrefillPathForTesting(PrefillPath path) {
  forcedPath.store(int(path), std::memory_order_relaxed);
}
PrefillPath prefillPathForTesting() { return PrefillPath(forcedPath.load()); }
int64_t gemmFallbackPanelsForTesting() { return 0; }

// No row count makes a GEMM worth it when there is none.
int64_t gemmMinRows(DType, DType, bool) { return std::numeric_limits<int64_t>::max(); }

bool gemmWanted(Isa, DType, DType, bool, int64_t, int64_t, int64_t) { return false; }

void linearGemm(const void *, const float *, DType, const void *, DType, bool, void *, DType,
                int64_t, int64_t, int64_t) {
  // gemmWanted is always false, so helm_k_linear never gets here.
  std::fputs("helm: internal error: linearGemm called in a build without oneDNN\n", stderr);
  std::abort();
}

} // namespace helm::kernels
