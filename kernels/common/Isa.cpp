//===- Isa.cpp --------------------------------------------------------------------===//
#include "kernels/common/Isa.h"
#include "kernels/common/Knobs.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace helm::kernels {

const char *isaName(Isa isa) {
  switch (isa) {
  case Isa::scalar: return "scalar";
  case Isa::avx2: return "avx2";
  case Isa::avx512: return "avx512";
  }
  return "?";
}

bool isaSupported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }();
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  switch (isa) {
  case Isa::scalar: return true;
  case Isa::avx2: return avx2;
  case Isa::avx512: return avx512;
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa bestIsa() {
  if (isaSupported(Isa::avx512))
    return Isa::avx512;
  if (isaSupported(Isa::avx2))
    return Isa::avx2;
  return Isa::scalar;
}

namespace {
std::atomic<int> overrideIsa{-1};

Isa chooseFromEnvironment() {
  Isa best = bestIsa();
  std::optional<std::string> forced = knobValue(Knob::KernelIsa, isaName(best));
  if (!forced)
    return best;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (*forced != isaName(isa))
      continue;
    if (isaSupported(isa))
      return isa;
    std::fprintf(stderr, "helm: HELM_KERNEL_ISA=%s is not supported by this CPU; using %s\n", forced->c_str(),
                 isaName(best));
  }
  return best;
}
} // namespace

Isa activeIsa() {
  int o = overrideIsa.load(std::memory_order_relaxed);
  if (o >= 0)
    return Isa(o);
  static const Isa chosen = chooseFromEnvironment();
  return chosen;
}

bool setIsaForTesting(Isa isa) {
  if (!isaSupported(isa))
    return false;
  overrideIsa.store(int(isa), std::memory_order_relaxed);
  return true;
}

void resetIsaForTesting() { overrideIsa.store(-1, std::memory_order_relaxed); }

} // namespace helm::kernels
