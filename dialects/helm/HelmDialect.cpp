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

LogicalResult HelmDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  auto expect = [&](bool ok, StringRef what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "'" << name << "' must be " << what << ", got " << value;
  };
  auto nonNegative = [](Attribute a) {
    auto i = dyn_cast<IntegerAttr>(a);
    return i && i.getType().isSignlessInteger() && i.getInt() >= 0;
  };
  if (name == StageAttrHelper::getNameStr()) {
    auto side = dyn_cast<StringAttr>(value);
    return expect(side && (side.getValue() == "cpu" || side.getValue() == "gpu"),
                  "\"cpu\" or \"gpu\"");
  }
  if (name == DeviceAttrHelper::getNameStr())
    return expect(isa<DeviceAttr>(value), "a device (0 = cpu, 1 = gpu)");
  if (name == KvLayerAttrHelper::getNameStr() || name == KvLayersAttrHelper::getNameStr() ||
      name == TensorIdAttrHelper::getNameStr())
    return expect(nonNegative(value), "a non-negative integer");
  if (name == UnitsAttrHelper::getNameStr()) {
    auto range = dyn_cast<DenseI64ArrayAttr>(value);
    return expect(range && range.size() == 2 && range[0] >= 0 && range[0] <= range[1],
                  "[first, last] unit indices");
  }
  if (name == TargetAttrHelper::getNameStr() || name == CostOptionsAttrHelper::getNameStr() ||
      name == CostTermsAttrHelper::getNameStr() || name == PlanAttrHelper::getNameStr())
    return expect(isa<DictionaryAttr>(value), "a dictionary");
  if (name == SourceAttrHelper::getNameStr() || name == ProducerAttrHelper::getNameStr() ||
      name == NameAttrHelper::getNameStr())
    return expect(isa<StringAttr>(value), "a string");
  if (name == OpsetAttrHelper::getNameStr())
    return expect(nonNegative(value), "an opset version");
  if (name == DimsAttrHelper::getNameStr())
    return expect(isa<ArrayAttr>(value), "an array");
  if (name == DeviceCallsAttrHelper::getNameStr() || name == HasSubgraphAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(value), "a unit attribute");
  return op->emitError() << "unknown HELM attribute '" << name << "'";
}
