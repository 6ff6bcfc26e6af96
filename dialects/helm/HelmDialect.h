//===- HelmDialect.h - the HELM dialect ----------------------------------------===//
#ifndef HELM_DIALECTS_HELM_HELMDIALECT_H
#define HELM_DIALECTS_HELM_HELMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"

#include <functional>
#include <vector>

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/bit.h"

namespace helm {
class WeightDeclOp;

/// A double as an attribute parameter (the planning attributes' rates, sizes and times): compared and
/// hashed bit by bit, as the uniquer needs (LLVM has no hash_value for double), read as a double.
struct F64 {
  double value = 0;
  F64() = default;
  F64(double v) : value(v) {}
  operator double() const { return value; }
  bool operator==(const F64 &other) const {
    return llvm::bit_cast<uint64_t>(value) == llvm::bit_cast<uint64_t>(other.value);
  }
  friend llvm::hash_code hash_value(const F64 &f) { return llvm::hash_value(llvm::bit_cast<uint64_t>(f.value)); }
};

/// F64 in attribute syntax: the shortest decimal that reads back to the same bits, always with a
/// '.' (MLIR reads `10` as an integer), e.g. `10.0`, `2.5E-4`.
mlir::FailureOr<F64> parseF64(mlir::AsmParser &parser);
void printF64(mlir::AsmPrinter &printer, F64 value);
} // namespace helm

// The enums and attributes first: the dialect's discardable-attribute helpers name them.
#include "dialects/helm/HelmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/helm/HelmAttrs.h.inc"

#include "dialects/helm/HelmDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/helm/HelmOps.h.inc"

#endif
