//===- Passes.h - every HELM pass and pipeline, by phase --------------------------===//
//
// passes/raise    generic helm.onnx ops -> block-level ops in partition units (helm-raise)
// passes/plan     per-unit costs and the CPU/GPU split; cost model and target profiles (helm-plan)
// passes/codegen  stage split and the lowering of each stage (helm-cpu-bufferize,
//                 helm-device-calls-bufferize, helm-cpu-to-llvm)
// compiler/Pipeline.h runs them in order for helmc; helm-opt registers them all.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_PASSES_PASSES_H
#define HELM_PASSES_PASSES_H

#include "passes/codegen/Passes.h"
#include "passes/plan/Passes.h"
#include "passes/raise/Passes.h"

namespace helm {

/// Registers every HELM pass and the phase pipelines with the global registry.
inline void registerHelmPasses() {
  registerRaisePasses();
  registerPlanPasses();
  registerCodegenPasses();
}

} // namespace helm

#endif
