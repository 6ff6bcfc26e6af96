//===- Pipeline.h - helmc's compile steps ----------------------------------------===//
#ifndef HELM_COMPILER_PIPELINE_H
#define HELM_COMPILER_PIPELINE_H

#include "compiler/onnx/OnnxImporter.h"
#include "compiler/target/CostModel.h"

#include <string>

namespace helm {

/// Runs the `helm-raise` pipeline on an imported module. On failure returns false and sets `error` to
/// the first diagnostic, one line, prefixed with the model path.
bool raiseModule(mlir::ModuleOp module, const std::string &modelPath, std::string &error);

/// Attaches `target` as the module's `helm.target` and runs helm-annotate-costs and helm-partition
/// with `options`. Same error convention as raiseModule.
bool planModule(mlir::ModuleOp module, const TargetProfile &target, const PlanOptions &options,
                const std::string &modelPath, std::string &error);

} // namespace helm

#endif
