//===- HelmDialect.cpp - the HELM dialect ---------------------------------------===//
#include "dialects/helm/HelmDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace helm;

#include "dialects/helm/HelmDialect.cpp.inc"
#include "dialects/helm/HelmEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/helm/HelmAttrs.cpp.inc"

void HelmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/helm/HelmOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/helm/HelmAttrs.cpp.inc"
      >();
}

Operation *HelmDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  if (auto elements = dyn_cast<ElementsAttr>(value))
    return ConstantOp::create(builder, loc, type, elements);
  return nullptr;
}
