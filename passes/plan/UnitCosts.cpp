//===- UnitCosts.cpp - per-unit costs as attributes and back --------------------===//
#include "passes/plan/UnitCosts.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace helm {

SmallVector<UnitOp> unitsOf(ModuleOp module) {
  SmallVector<UnitOp> units;
  module.walk([&](UnitOp u) { units.push_back(u); });
  return units;
}

std::string unitName(UnitOp unit) {
  switch (unit.getKind()) {
  case UnitKind::embedding: return "embedding";
  case UnitKind::head: return "head";
  case UnitKind::block: return "block." + std::to_string(unit.getIndex() - 1);
  }
  return "unit";
}

std::vector<std::pair<std::string, int64_t>> unitTensors(UnitOp unit) {
  std::vector<std::pair<std::string, int64_t>> tensors;
  SymbolTableCollection symbols;
  llvm::SmallDenseSet<StringAttr> seen;
  unit.walk([&](WeightOp w) {
    if (!seen.insert(w.getNameAttr().getAttr()).second)
      return;
    if (auto decl = symbols.lookupNearestSymbolFrom<WeightDeclOp>(w, w.getNameAttr()))
      tensors.emplace_back(decl.getSymName().str(), decl.getStoredBytes());
  });
  int64_t constants = 0;
  unit.walk([&](ConstantOp k) {
    auto t = cast<ShapedType>(k.getType());
    constants += t.getNumElements() * ((t.getElementType().getIntOrFloatBitWidth() + 7) / 8);
  });
  if (constants)
    tensors.emplace_back("constants of " + unitName(unit), constants);
  return tensors;
}

bool readUnitCost(UnitOp unit, UnitCost &c) {
  UnitCostAttr cost = HelmDialect::CostAttrHelper(unit.getContext()).getAttr(unit);
  if (!cost)
    return false;
  c = UnitCost();
  c.name = unitName(unit);
  c.kind = stringifyUnitKind(unit.getKind()).str();
  c.paramBytes = cost.getParamBytes();
  c.residentBytes = cost.getResidentBytes();
  c.actBytes = cost.getActBytes();
  c.kvBytesPerToken = cost.getKvBytesPerToken();
  c.flopsDecode = double(cost.getFlopsDecode());
  c.flopsPrefill = double(cost.getFlopsPrefill());
  c.projFlopsDecode = cost.getProjFlopsDecode();
  c.attnFlopsPerToken = cost.getAttnFlopsPerToken();
  c.projFlopsPrefill = cost.getProjFlopsPrefill();
  c.attnFlopsPrefill = cost.getAttnFlopsPrefill();
  c.prefillParamBytes = cost.getPrefillParamBytes();
  c.prefillActBytes = cost.getPrefillActBytes();
  c.attnIoBytes = cost.getAttnIoBytes();
  c.ffnBytes = cost.getFfnBytes();
  c.ffnWeightElems = cost.getFfnWeightElems();
  c.kvElemsPerToken = cost.getKvElemsPerToken();
  c.tensors = unitTensors(unit);
  return true;
}

} // namespace helm
