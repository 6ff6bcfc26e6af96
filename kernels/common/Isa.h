//===- Isa.h - run-time choice of the instruction set the CPU kernels use ---------===//
//
// The kernels library is compiled for baseline x86-64; the vector paths are functions with
// `__attribute__((target(...)))` chosen once, at the first call, from CPUID
// (`__builtin_cpu_supports`). HELM_KERNEL_ISA=scalar|avx2|avx512 forces a path; an unknown value
// or a path this CPU lacks falls back to the best supported one with a one-time warning on stderr.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_COMMON_ISA_H
#define HELM_KERNELS_COMMON_ISA_H

namespace helm::kernels {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char *isaName(Isa isa);
/// Whether this CPU (and OS) can run the path: avx2 = AVX2+FMA+F16C, avx512 = AVX-512 F/BW/VL
/// plus the AVX2 set.
bool isaSupported(Isa isa);
/// The best path this CPU supports.
Isa bestIsa();
/// The path the kernels use now: the testing override if set, else HELM_KERNEL_ISA or bestIsa()
/// (decided once).
Isa activeIsa();
/// Forces a path (tests, benchmarks). Returns false, changing nothing, if the CPU lacks it.
bool setIsaForTesting(Isa isa);
/// Drops the override: back to the HELM_KERNEL_ISA / CPUID choice.
void resetIsaForTesting();

} // namespace helm::kernels

#endif
