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
      tensors.emplace_back(decl.getSymName().str(), decl.getLengthAttr().getInt());
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
  auto i64 = [&](llvm::StringRef name, int64_t &out) {
    auto a = unit->getAttrOfType<IntegerAttr>(name);
    if (a)
      out = a.getInt();
    return bool(a);
  };
  auto terms = unit->getAttrOfType<DictionaryAttr>(HelmDialect::CostTermsAttrHelper::getNameStr());
  if (!terms)
    return false;
  auto f64 = [&](llvm::StringRef name, double &out) {
    auto a = terms.getAs<FloatAttr>(name);
    if (a)
      out = a.getValueAsDouble();
    return bool(a);
  };
  int64_t flopsDecode = 0, flopsPrefill = 0;
  c = UnitCost();
  c.name = unitName(unit);
  c.kind = stringifyUnitKind(unit.getKind()).str();
  if (!i64("param_bytes", c.paramBytes) || !i64("resident_bytes", c.residentBytes) ||
      !i64("act_bytes", c.actBytes) || !i64("kv_bytes_per_token", c.kvBytesPerToken) ||
      !i64("flops_decode", flopsDecode) || !i64("flops_prefill", flopsPrefill) ||
      !f64("proj_flops_decode", c.projFlopsDecode) || !f64("attn_flops_per_token", c.attnFlopsPerToken) ||
      !f64("proj_flops_prefill", c.projFlopsPrefill) || !f64("attn_flops_prefill", c.attnFlopsPrefill))
    return false;
  c.flopsDecode = double(flopsDecode);
  c.flopsPrefill = double(flopsPrefill);
  double prefillParam = 0, prefillAct = 0;
  f64("prefill_param_bytes", prefillParam);
  f64("prefill_act_bytes", prefillAct);
  c.prefillParamBytes = int64_t(prefillParam);
  c.prefillActBytes = int64_t(prefillAct);
  c.tensors = unitTensors(unit);
  return true;
}

} // namespace helm
