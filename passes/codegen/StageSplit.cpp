//===- StageSplit.cpp - outline placed units into per-device stage functions ------===//
//
// The stage function is the contract between generated code and the runtime: token ids and
// positions in, last-position logits out, KV cache owned by the runtime (reached through the
// context pointer). Everything the ONNX graph did to manage its own cache is dropped here.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"
#include "contract/helm_contract.h"
#include "contract/manifest_schema.h"
#include "passes/plan/UnitCosts.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <optional>

namespace helm {
#define GEN_PASS_DEF_STAGESPLIT
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

/// The `main` argument whose `helm.name` is `name`, if any.
BlockArgument namedArgument(func::FuncOp main, llvm::ArrayRef<llvm::StringRef> names) {
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    if (auto attr = main.getArgAttrOfType<StringAttr>(i, HelmDialect::NameAttrHelper::getNameStr()))
      if (llvm::is_contained(names, attr.getValue()))
        return main.getArgument(i);
  return {};
}

struct StageSplitPass : helm::impl::StageSplitBase<StageSplitPass> {
  using StageSplitBase::StageSplitBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError() << "no @main function to split into stages";
      return signalPassFailure();
    }
    SmallVector<UnitOp> units = unitsOf(module);
    if (units.empty()) {
      main.emitError() << "@main has no partition units; run helm-raise first";
      return signalPassFailure();
    }
    // The plan is a split point: units [0, k) on the CPU, [k, N) on the GPU (thesis 4.1.4). Units
    // without a placement (no plan attached) run on the CPU.
    int64_t numUnits = int64_t(units.size()), split = numUnits;
    for (int64_t i = 0; i < numUnits; ++i) {
      auto device = units[i]->getAttrOfType<DeviceAttr>(HelmDialect::DeviceAttrHelper::getNameStr());
      bool onGpu = device && device.getValue() == Device::gpu;
      if (onGpu && split == numUnits)
        split = i;
      if (!onGpu && split != numUnits) {
        units[i].emitError() << "unit " << unitName(units[i]) << " is placed on the CPU after unit "
                             << unitName(units[split])
                             << " on the GPU; a plan is one CPU prefix and one GPU suffix";
        return signalPassFailure();
      }
    }

    BlockArgument idsArg = namedArgument(main, {"input_ids"});
    if (!idsArg) {
      main.emitError() << "@main has no 'input_ids' argument";
      return signalPassFailure();
    }
    BlockArgument positionsArg = namedArgument(main, {"position_ids"});

    UnitOp head = units.back();
    if (head.getKind() != UnitKind::head || head.getNumResults() != 1) {
      head.emitError() << "the last unit must be the output head with one result";
      return signalPassFailure();
    }
    auto headType = dyn_cast<RankedTensorType>(head.getResult(0).getType());
    if (!headType || headType.getRank() != 3) {
      head.emitError() << "the head must return rank-3 logits [batch, sequence, vocab]";
      return signalPassFailure();
    }

    // The one activation that crosses the boundary: a value of the CPU units that the GPU units
    // use. The units' own KV-cache outputs never cross (each stage keeps its cache).
    Value boundary;
    if (split > 0 && split < numUnits) {
      llvm::SetVector<Value> crossing;
      for (int64_t i = split; i < numUnits; ++i)
        for (Value v : unitOperandsFromOutside(units[i]))
          if (auto producer = v.getDefiningOp<UnitOp>())
            if (producer.getIndex() < units[split].getIndex())
              crossing.insert(v);
      if (crossing.size() != 1) {
        units[split].emitError() << "the boundary before unit " << unitName(units[split])
                                 << " carries " << crossing.size()
                                 << " activations; a split point must carry exactly one";
        return signalPassFailure();
      }
      boundary = crossing.front();
    }

    OpBuilder b(&getContext());
    b.setInsertionPoint(main);
    StageBuilder builder{b, module, idsArg, positionsArg, shareUnitCode};
    MutableArrayRef<UnitOp> all(units);
    if (split > 0 &&
        failed(builder.build(HELM_CPU_STAGE_ENTRY, helm_stage_side_name(HELM_STAGE_CPU), all.take_front(split), Value(), boundary)))
      return signalPassFailure();
    if (split < numUnits &&
        failed(builder.build(HELM_GPU_STAGE_ENTRY, helm_stage_side_name(HELM_STAGE_GPU), all.drop_front(split), boundary, Value())))
      return signalPassFailure();
    main.erase();
  }

  /// Clones a run of units into one stage function `(ctx, input, positions) -> output`. The input
  /// is the token ids (first stage) or the boundary activation (`input`); the output is the
  /// last position's logits (last stage) or the boundary activation (`output`), handed over
  /// through one helm.transfer to the GPU. Block units that share their code call it.
  struct StageBuilder {
    OpBuilder &b;
    ModuleOp module;
    BlockArgument idsArg, positionsArg;
    bool shareUnitCode;

    LogicalResult build(StringRef name, StringRef device, MutableArrayRef<UnitOp> units, Value input,
                        Value output) {
      MLIRContext *ctx = b.getContext();
      Location loc = units.front().getLoc();
      auto idsType = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                           b.getI64Type());
      Type inputType = input ? input.getType() : Type(idsType);
      Type outputType;
      if (output) {
        outputType = output.getType();
      } else {
        auto headType = cast<RankedTensorType>(units.back().getResult(0).getType());
        outputType = RankedTensorType::get({ShapedType::kDynamic, 1, headType.getDimSize(2)},
                                           headType.getElementType());
      }
      auto stageType = b.getFunctionType({LLVM::LLVMPointerType::get(ctx), inputType, idsType},
                                         {outputType});
      auto stage = func::FuncOp::create(b, loc, name, stageType);
      stage->setAttr(HelmDialect::StageAttrHelper::getNameStr(), b.getStringAttr(device));
      stage.setArgAttr(0, HelmDialect::NameAttrHelper::getNameStr(), b.getStringAttr("context"));
      stage.setArgAttr(1, HelmDialect::NameAttrHelper::getNameStr(), b.getStringAttr(input ? "activation" : "input_ids"));
      stage.setArgAttr(2, HelmDialect::NameAttrHelper::getNameStr(), b.getStringAttr("positions"));

      llvm::DenseMap<Operation *, OutlinedUnit> shared;
      if (shareUnitCode)
        shared = outlineEqualUnits(stage, units, idsType);

      Block *entry = stage.addEntryBlock();
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(entry);
      Value positions = entry->getArgument(2);

      IRMapping map;
      map.map(input ? input : Value(idsArg), entry->getArgument(1));
      if (positionsArg)
        map.map(positionsArg, positions);

      int64_t kvLayer = 0;
      for (UnitOp unit : units) {
        if (auto it = shared.find(unit); it != shared.end()) {
          const OutlinedUnit &code = it->second;
          SmallVector<Value> operands{
              entry->getArgument(0), positions,
              arith::ConstantIntOp::create(b, unit.getLoc(), b.getI64Type(), kvLayer)};
          for (Value v : code.inputs) {
            Value mapped = map.lookupOrNull(v);
            if (!mapped)
              return unit.emitError() << "unit " << unitName(unit)
                                      << " uses a value from outside the stage's units";
            operands.push_back(mapped);
          }
          for (WeightOp w : code.weights)
            operands.push_back(b.clone(*w)->getResult(0));
          auto call = func::CallOp::create(b, unit.getLoc(), code.function, operands);
          for (auto [i, result] : llvm::enumerate(code.results))
            map.map(unit.getResult(result), call.getResult(i));
          kvLayer += code.kvLayers;
          continue;
        }
        Block &body = unit.getBody().front();
        if (unit.getKind() == UnitKind::head) {
          // Only the last position's logits are needed: slice the head's input once.
          for (Value operand : unitOperandsFromOutside(unit)) {
            Value mapped = map.lookupOrNull(operand);
            if (!mapped)
              continue;
            auto type = dyn_cast<RankedTensorType>(mapped.getType());
            if (!type || type.getRank() != 3)
              continue;
            map.map(operand, lastPosition(b, loc, mapped));
          }
        }
        for (Operation &op : body.without_terminator()) {
          for (Value operand : op.getOperands())
            if (!map.contains(operand) && operand.getParentBlock() != &body) {
              if (isReplacedOperand(op, operand))
                continue;
              op.emitError() << "operand of " << op.getName() << " in unit " << unitName(unit)
                             << " comes from outside the stage's units and is not a known input";
              return failure();
            }
          cloneUnitOp(b, op, map, positions, kvLayer);
        }
        auto yield = cast<YieldOp>(body.getTerminator());
        for (auto [result, yielded] : llvm::zip(unit.getResults(), yield.getValues()))
          if (Value mapped = map.lookupOrNull(yielded))
            map.map(result, mapped);
      }
      Value result;
      if (output) {
        result = TransferOp::create(b, loc, output.getType(), map.lookup(output), Device::cpu,
                                    Device::gpu);
      } else {
        result = map.lookup(units.back().getResult(0));
        if (result.getType() != outputType)
          result = tensor::CastOp::create(b, loc, outputType, result);
      }
      func::ReturnOp::create(b, loc, result);
      stage->setAttr(HelmDialect::KvLayersAttrHelper::getNameStr(), b.getI64IntegerAttr(kvLayer));
      stage->setAttr(HelmDialect::UnitsAttrHelper::getNameStr(), b.getDenseI64ArrayAttr({int64_t(units.front().getIndex()),
                                                           int64_t(units.back().getIndex())}));
      return success();
    }

    /// A block unit's code as a private function: `(ctx, positions, first KV layer, inputs...,
    /// weights...) -> results`.
    struct OutlinedUnit {
      func::FuncOp function;
      SmallVector<Value> inputs;         // values of @main the unit reads
      SmallVector<WeightOp> weights;     // one per distinct weight, in order of first use
      SmallVector<unsigned> results;     // the unit's results the function returns, in order
      int64_t kvLayers = 0;
    };

    /// Outlines every block unit and keeps one function per group of units whose functions are
    /// structurally equal (OperationEquivalence, locations aside: equal up to weights and KV
    /// layers), for groups of two or more; the other candidates are erased. Returns the units
    /// that call a shared function.
    llvm::DenseMap<Operation *, OutlinedUnit> outlineEqualUnits(func::FuncOp stage,
                                                                ArrayRef<UnitOp> units,
                                                                Type positionsType) {
      SmallVector<std::pair<UnitOp, OutlinedUnit>> candidates;
      SmallVector<SmallVector<size_t>> groups; // in first-use order, so names follow the layers
      for (UnitOp unit : units) {
        if (unit.getKind() != UnitKind::block)
          continue;
        std::optional<OutlinedUnit> code = outline(unit, stage, positionsType);
        if (!code)
          continue;
        auto group = llvm::find_if(groups, [&](const SmallVector<size_t> &members) {
          return OperationEquivalence::isEquivalentTo(candidates[members.front()].second.function,
                                                      code->function,
                                                      OperationEquivalence::IgnoreLocations);
        });
        if (group == groups.end()) {
          groups.emplace_back();
          group = std::prev(groups.end());
        }
        group->push_back(candidates.size());
        candidates.push_back({unit, std::move(*code)});
      }
      llvm::DenseMap<Operation *, OutlinedUnit> shared;
      int64_t next = 0;
      for (const SmallVector<size_t> &members : groups) {
        if (members.size() < 2) {
          candidates[members.front()].second.function.erase();
          continue;
        }
        func::FuncOp function = candidates[members.front()].second.function;
        function.setName((stage.getName() + "_unit" + llvm::Twine(next++)).str());
        for (size_t m : members) {
          OutlinedUnit &code = candidates[m].second;
          if (code.function != function)
            code.function.erase();
          code.function = function;
          shared[candidates[m].first] = std::move(code);
        }
      }
      return shared;
    }

    /// The candidate function of `unit`, placed before `stage` and named "unit"; none when the
    /// unit yields a value it does not compute (it stays inline).
    std::optional<OutlinedUnit> outline(UnitOp unit, func::FuncOp stage, Type positionsType) {
      MLIRContext *ctx = b.getContext();
      Block &body = unit.getBody().front();
      OutlinedUnit code;
      llvm::DenseMap<StringAttr, unsigned> weightIndex;
      for (Operation &op : body.without_terminator()) {
        if (auto w = dyn_cast<WeightOp>(op)) {
          if (weightIndex.try_emplace(w.getNameAttr().getAttr(), code.weights.size()).second)
            code.weights.push_back(w);
          continue;
        }
        for (Value operand : op.getOperands())
          if (operand.getParentBlock() != &body && !isReplacedOperand(op, operand) &&
              !llvm::is_contained(code.inputs, operand))
            code.inputs.push_back(operand);
      }
      Type i64 = IntegerType::get(ctx, 64);
      SmallVector<Type> argTypes{LLVM::LLVMPointerType::get(ctx), positionsType, i64};
      for (Value v : code.inputs)
        argTypes.push_back(v.getType());
      for (WeightOp w : code.weights)
        argTypes.push_back(w.getType());

      OpBuilder fb(stage);
      auto function = func::FuncOp::create(fb, unit.getLoc(), "unit",
                                           fb.getFunctionType(argTypes, {}));
      function.setPrivate();
      function->setAttr(HelmDialect::UnitFunctionAttrHelper::getNameStr(), fb.getUnitAttr());
      function->setAttr("no_inline", fb.getUnitAttr());
      const unsigned firstInput = 3, firstWeight = firstInput + code.inputs.size();
      function.setArgAttr(2, HelmDialect::KvLayerBaseAttrHelper::getNameStr(), fb.getUnitAttr());
      for (auto [i, w] : llvm::enumerate(code.weights))
        if (auto decl = module.lookupSymbol<WeightDeclOp>(w.getNameAttr()))
          if (BlocksAttr blocks = decl.getBlocksAttr())
            function.setArgAttr(firstWeight + i, HelmDialect::WeightBlocksAttrHelper::getNameStr(),
                                blocks);
      Block *entry = function.addEntryBlock();
      fb.setInsertionPointToStart(entry);
      IRMapping map;
      for (auto [i, v] : llvm::enumerate(code.inputs))
        map.map(v, entry->getArgument(firstInput + i));
      int64_t kvLayer = 0;
      for (Operation &op : body.without_terminator()) {
        if (auto w = dyn_cast<WeightOp>(op)) {
          map.map(w.getResult(), entry->getArgument(firstWeight + weightIndex[w.getNameAttr().getAttr()]));
          continue;
        }
        cloneUnitOp(fb, op, map, entry->getArgument(1), kvLayer);
      }
      SmallVector<Value> returned;
      for (auto [i, yielded] : llvm::enumerate(cast<YieldOp>(body.getTerminator()).getValues())) {
        if (yielded.getParentBlock() != &body) {
          function.erase();
          return std::nullopt;
        }
        if (Value mapped = map.lookupOrNull(yielded)) {
          code.results.push_back(i);
          returned.push_back(mapped);
        }
      }
      func::ReturnOp::create(fb, unit.getLoc(), returned);
      function.setType(fb.getFunctionType(argTypes, ValueRange(returned).getTypes()));
      code.function = function;
      code.kvLayers = kvLayer;
      return code;
    }

    /// Clones one op of a unit into `b`'s block: an attention reads the runtime's KV cache of
    /// layer `kvLayer` (then counted up) instead of the model's own cache operands, a rotary
    /// embedding reads `positions`.
    static void cloneUnitOp(OpBuilder &b, Operation &op, IRMapping &map, Value positions,
                            int64_t &kvLayer) {
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        auto cloned = AttentionOp::create(
            b, attention.getLoc(), TypeRange{attention.getResult().getType()},
            map.lookup(attention.getQ()), map.lookup(attention.getK()),
            map.lookup(attention.getV()), Value(), Value(), attention.getNumHeadsAttr(),
            attention.getNumKvHeadsAttr(), attention.getHeadDimAttr(),
            attention.getScaleAttr(), attention.getSlidingWindowAttr(), attention.getSoftcapAttr());
        cloned->setAttr(HelmDialect::KvLayerAttrHelper::getNameStr(), b.getI64IntegerAttr(kvLayer++));
        map.map(attention.getResult(), cloned.getResult());
        return;
      }
      if (auto rope = dyn_cast<RopeOp>(op)) {
        IRMapping ropeMap = map;
        if (Value original = rope.getPositions())
          ropeMap.map(original, positions);
        auto cloned = cast<RopeOp>(b.clone(op, ropeMap));
        if (!cloned.getPositions())
          cloned.getPositionsMutable().append(positions);
        map.map(rope.getResult(), cloned.getResult());
        return;
      }
      b.clone(op, map);
    }
  };

  /// Values used in `unit` that are defined outside it.
  static SmallVector<Value> unitOperandsFromOutside(UnitOp unit) {
    llvm::SetVector<Value> outside;
    unit.getBody().walk([&](Operation *op) {
      for (Value v : op->getOperands())
        if (!unit->isAncestor(v.getParentBlock()->getParentOp()))
          outside.insert(v);
    });
    return outside.takeVector();
  }

  /// Operands the stage replaces with its own inputs, wherever the model computed them: the
  /// model's KV-cache tensors (the runtime's cache) and rotary positions (the stage's positions).
  static bool isReplacedOperand(Operation &op, Value operand) {
    if (auto attention = dyn_cast<AttentionOp>(op))
      return operand == attention.getPastKey() || operand == attention.getPastValue();
    if (auto rope = dyn_cast<RopeOp>(op))
      return operand == rope.getPositions();
    return false;
  }

  /// x[:, S-1:S, :], cast back to x's (dynamic) type so cloned ops keep their types.
  static Value lastPosition(OpBuilder &b, Location loc, Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value batch = tensor::DimOp::create(b, loc, x, 0);
    Value seq = tensor::DimOp::create(b, loc, x, 1);
    Value last = arith::SubIOp::create(b, loc, seq, c1);
    SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), OpFoldResult(last), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes{OpFoldResult(batch), b.getIndexAttr(1),
                                    b.getIndexAttr(type.getDimSize(2))};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    Value slice = tensor::ExtractSliceOp::create(b, loc, x, offsets, sizes, strides);
    return tensor::CastOp::create(b, loc, type, slice);
  }
};

} // namespace
