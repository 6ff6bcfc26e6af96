//===- OnnxImporter.h - ONNX ModelProto to the HELM dialect ----------------------===//
//
// Parses an ONNX model (with size limits), checks its opsets, external data and types, and emits one
// `func.func @main` whose body is a `helm.onnx` op per node. Initializers become `helm.weight_decl`
// symbols (bytes stay in the file) unless they are tiny, in which case they become `helm.constant`.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_ONNX_ONNXIMPORTER_H
#define HELM_COMPILER_ONNX_ONNXIMPORTER_H

#include "compiler/WeightSource.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace helm {

struct ImportOptions {
  /// Largest accepted .onnx file (protobuf itself cannot parse more than 2 GiB).
  int64_t maxModelBytes = (int64_t(2) << 30) - 1;
  /// Initializers and Constant values with at most this many elements become `helm.constant`.
  int64_t maxInlineConstantElements = 64;
  /// Check that external-data files exist and are long enough. Shape-only planning turns it off.
  bool requireWeightData = true;
};

/// Imports `path`. The error is a one-line message that names the file and the problem (node, op,
/// sizes) without a trailing newline.
llvm::Expected<ImportedModel> importOnnxFile(mlir::MLIRContext &ctx, const std::string &path,
                                             const ImportOptions &options);

/// Same, from bytes in memory (used by the fuzzer). `baseDir` resolves external-data locations.
llvm::Expected<ImportedModel> importOnnxBytes(mlir::MLIRContext &ctx, const void *data,
                                              size_t size, const std::string &displayName,
                                              const std::string &baseDir,
                                              const ImportOptions &options);

} // namespace helm

#endif
