//===- Knobs.h - the environment variables that change what kernels compute ------===//
//
// One table of every environment knob the kernels and the device ops read: its name, its values
// and what it does. A knob is read where it acts (most once per process, a device's when its ops
// are created); this file checks the value and reports one that is not among the knob's values.
//
//   HELM_KERNEL_ISA    scalar | avx2 | avx512     force the CPU kernels' instruction set (Isa.h)
//   HELM_KERNEL_GEMM   auto | always | never      the f32/f16/bf16 linear's prefill path (Gemm.h)
//   HELM_QUANT_PREFILL integer | dequantize       a block weight's prefill path (docs/quantization.md)
//   HELM_QUANT_EXACT   0 | 1                      1: every block linear dequantizes (exact f32)
//   HELM_CUDA_QGEMV    bytes | staged | lanes     the CUDA block GEMV's form
//
//===----------------------------------------------------------------------===//
#ifndef HELM_KERNELS_COMMON_KNOBS_H
#define HELM_KERNELS_COMMON_KNOBS_H

#include <optional>
#include <string>
#include <vector>

namespace helm::kernels {

enum class Knob { KernelIsa, KernelGemm, QuantPrefill, QuantExact, CudaQgemv };

struct KnobInfo {
  const char *name;                // the environment variable
  std::vector<const char *> values; // what it may be set to
  const char *effect;              // what it changes, for messages and --help texts
};
const KnobInfo &knobInfo(Knob knob);

/// The knob's value as the environment sets it now: one of its values, or nullopt when it is unset
/// or empty. Any other value is reported in one line on stderr ("helm: unknown NAME=VALUE (expected
/// a, b or c); using FALLBACK") and read as unset.
std::optional<std::string> knobValue(Knob knob, const char *fallback);

} // namespace helm::kernels

#endif
