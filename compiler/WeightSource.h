//===- WeightSource.h - where an imported model's weight bytes come from ------------===//
//
// Every front end (ONNX, GGUF) imports a model into a module that declares its weights
// (`helm.weight_decl`, never their bytes) and a WeightSource that hands out the bytes of a declared
// weight by its source name (`onnx_name`) when the package builder writes it.
//
//===----------------------------------------------------------------------===//
#ifndef HELM_COMPILER_WEIGHTSOURCE_H
#define HELM_COMPILER_WEIGHTSOURCE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <vector>

namespace helm {

/// Source bytes of the weights of one imported model.
class WeightSource {
public:
  virtual ~WeightSource() = default;
  /// Little-endian bytes of the tensor named `name`, without a copy where possible (a view of the
  /// parsed or mapped model), else in `storage` (the view lives as long as both). An error names
  /// the tensor when there is no such tensor or its data cannot be read.
  virtual llvm::Expected<llvm::ArrayRef<char>> bytes(llvm::StringRef name,
                                                     std::vector<char> &storage) const = 0;
  /// The package builder has written `name`'s bytes (it may still ask for them again: a tensor
  /// both stages hold). A source that maps its file gives the pages back to the kernel here, so
  /// the compiler's peak RSS does not grow with the model. Default: nothing.
  virtual void release(llvm::StringRef name) const {}
};

/// A module in the helm dialect and the source of its weights' bytes.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::shared_ptr<WeightSource> weights;
};

inline llvm::Expected<llvm::ArrayRef<char>> weightBytes(const WeightSource &source, llvm::StringRef name,
                                                        std::vector<char> &storage) {
  return source.bytes(name, storage);
}

} // namespace helm

#endif
