//===- OnnxImporter.h - ONNX ModelProto to the HELM dialect ----------------------===//
//
// Parses an ONNX model (with size limits), checks its opsets, external data and types, and emits one
// `func.func @main` whose body is a `helm.onnx` op per node. Initializers become `helm.weight_decl`
// symbols (bytes stay in the file) unless they are tiny, in which case they become `helm.constant`.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_ONNX_ONNXIMPORTER_H
#define HELM_COMPILER_ONNX_ONNXIMPORTER_H

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

/// Source bytes of the weights of one imported model. The ModelProto (and the inline initializer
/// bytes it owns) stays alive here; external-data files are only stat-ed, never read, by the import.
class WeightSource;

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::shared_ptr<WeightSource> weights;
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

/// Little-endian bytes of the initializer (or Constant value) named `onnxName` of an imported model,
/// without a copy where possible: the parsed model's inline raw data, or `storage` after reading
/// external data or decoding typed fields into it (the view lives as long as both). An error names
/// the tensor when there is no such tensor or its data cannot be read.
llvm::Expected<llvm::ArrayRef<char>> weightBytes(const WeightSource &source,
                                                 llvm::StringRef onnxName,
                                                 std::vector<char> &storage);

} // namespace helm

#endif
