//===- Knobs.cpp - the environment variables that change what kernels compute ----===//
#include "kernels/common/Knobs.h"

#include <cstdio>
#include <cstdlib>

namespace helm::kernels {

const KnobInfo &knobInfo(Knob knob) {
  static const KnobInfo knobs[] = {
      {"HELM_KERNEL_ISA", {"scalar", "avx2", "avx512"}, "the CPU kernels' instruction set (default: the best this CPU has)"},
      {"HELM_KERNEL_GEMM", {"auto", "always", "never"}, "the linear's prefill path: oneDNN's GEMM, the GEMV, or chosen by rows"},
      {"HELM_QUANT_PREFILL", {"integer", "dequantize"}, "a block weight's prefill path"},
      {"HELM_QUANT_EXACT", {"0", "1"}, "1: every block linear dequantizes its weight (exact f32 arithmetic)"},
      {"HELM_CUDA_QGEMV", {"bytes", "staged", "lanes"}, "the CUDA block GEMV's form"},
  };
  return knobs[int(knob)];
}

std::optional<std::string> knobValue(Knob knob, const char *fallback) {
  const KnobInfo &info = knobInfo(knob);
  const char *value = std::getenv(info.name);
  if (!value || !*value)
    return std::nullopt;
  std::string expected;
  for (size_t i = 0; i < info.values.size(); ++i) {
    if (std::string(value) == info.values[i])
      return std::string(value);
    expected += (i == 0 ? "" : i + 1 == info.values.size() ? " or " : ", ") + std::string(info.values[i]);
  }
  std::fprintf(stderr, "helm: unknown %s=%s (expected %s); using %s\n", info.name, value, expected.c_str(), fallback);
  return std::nullopt;
}

} // namespace helm::kernels
