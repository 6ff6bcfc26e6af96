//===- Isa.cpp --------------------------------------------------------------------===//
#include "kernels/cpu/Isa.h"

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
  const char *env = std::getenv("HELM_KERNEL_ISA");
  if (!env || !*env)
    return best;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (std::strcmp(env, isaName(isa)) != 0)
      continue;
    if (isaSupported(isa))
      return isa;
    std::fprintf(stderr, "helm: HELM_KERNEL_ISA=%s is not supported by this CPU; using %s\n", env,
                 isaName(best));
    return best;
  }
  std::fprintf(stderr, "helm: unknown HELM_KERNEL_ISA=%s (expected scalar, avx2 or avx512); using %s\n",
               env, isaName(best));
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
