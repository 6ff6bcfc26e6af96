//===- HelmDialect.h - the HELM dialect ----------------------------------------===//
#ifndef HELM_DIALECTS_HELM_HELMDIALECT_H
#define HELM_DIALECTS_HELM_HELMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"

#include <functional>
#include <vector>

namespace helm {
class WeightDeclOp;
}

// The enums first: the dialect's discardable-attribute helpers name DeviceAttr.
#include "dialects/helm/HelmEnums.h.inc"
#include "dialects/helm/HelmDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/helm/HelmAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/helm/HelmOps.h.inc"

#endif
