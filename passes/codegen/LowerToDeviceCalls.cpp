//===- LowerToDeviceCalls.cpp - a device stage as host code that launches kernels --===//
//
// The GPU stage of a CUDA package is host code that orchestrates the device: every HELM op
// becomes one call of the device-kernel ABI (`helm_dev_*`, declared in contract/helm_contract.h, defined in runtime/abi/DeviceCalls.cpp) on raw
// pointers of device buffers, and nothing else touches the buffers. So this lowering emits no
// linalg: the only computation left in the host code is index arithmetic on B and S. Buffers are
// `memref.alloc`s, which the runtime serves from the device the stage runs on.
//
// The same code runs on the emu device (its ops are host implementations with the CPU stage's
// roundings), which is how this path is tested without a GPU.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"
#include "passes/codegen/StageAbi.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace helm {
#define GEN_PASS_DEF_LOWERTODEVICECALLS
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

class DeviceStageLowering : StageLoweringBase {
public:
  DeviceStageLowering(func::FuncOp stage, llvm::DenseMap<StringAttr, int64_t> &tensorIds)
      : StageLoweringBase(stage, tensorIds) {}

  LogicalResult run() {
    Block &entry = stage.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(entry.without_terminator())) {
      b.setInsertionPoint(&op);
      loc = op.getLoc();
      // Shape arithmetic on B and S, and views that only change a buffer's type (no data moves
      // when they bufferize), stay host code.
      if (isa<tensor::CastOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op))
        continue;
      // A call of a unit function (lowered the same way) passes buffers, it touches none.
      if (isa<func::CallOp>(op))
        continue;
      if (isa<tensor::DimOp>(op) || isa<arith::ArithDialect>(op.getDialect()))
        if (!isa<arith::ConstantOp>(op) || !isa<ShapedType>(op.getResult(0).getType()))
          continue;
      FailureOr<SmallVector<Value>> results = lower(op);
      if (failed(results))
        return failure();
      op.replaceAllUsesWith(*results);
      op.erase();
    }
    if (isUnitFunction())
      return success();
    return rewriteStageSignature(
        stage, [&](OpBuilder &, Location l, Value result, Value out, bool) {
          loc = l;
          b.setInsertionPoint(stage.getBody().front().getTerminator());
          auto type = cast<RankedTensorType>(result.getType());
          Type outElem = cast<MemRefType>(out.getType()).getElementType();
          call(HELM_CONTRACT_SYMBOL(helm_dev_convert),
               {rawPointer(result), i32(kernelDtypeCode(type.getElementType())), pointerOf(out),
                i32(kernelDtypeCode(outElem)), numElements(result)});
          return success();
        });
  }

private:
  Value dim(Value t, int64_t i) { return toI64(tensor::DimOp::create(b, loc, t, i)); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }

  /// Product of `t`'s dimensions [from, to) as i64.
  Value product(Value t, int64_t from, int64_t to) {
    auto type = cast<RankedTensorType>(t.getType());
    int64_t fixed = 1;
    Value dynamic;
    for (int64_t i = from; i < to; ++i) {
      if (!type.isDynamicDim(i)) {
        fixed *= type.getDimSize(i);
        continue;
      }
      Value d = dim(t, i);
      dynamic = dynamic ? mul(dynamic, d) : d;
    }
    return dynamic ? (fixed == 1 ? dynamic : mul(dynamic, i64(fixed))) : i64(fixed);
  }
  Value numElements(Value t) {
    return product(t, 0, cast<RankedTensorType>(t.getType()).getRank());
  }
  /// Rows of `t` seen as [rows, last dimension].
  Value rows(Value t) { return product(t, 0, cast<RankedTensorType>(t.getType()).getRank() - 1); }

  void call(StringRef name, ValueRange args, Type result = {}) {
    callValue(name, args, result);
  }
  Value callValue(StringRef name, ValueRange args, Type result) {
    SmallVector<Type> inputs{ptrType};
    for (Value a : args)
      inputs.push_back(a.getType());
    func::FuncOp f = declare(name, inputs, result ? TypeRange{result} : TypeRange{});
    SmallVector<Value> operands{ctx};
    operands.append(args.begin(), args.end());
    auto op = func::CallOp::create(b, loc, f, operands);
    return result ? op.getResult(0) : Value();
  }

  /// The address of `tensor`'s buffer (identity layout: nothing in a device stage makes views).
  Value rawPointer(Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    Value buffer = bufferization::ToBufferOp::create(b, loc, memrefType, tensor, /*read_only=*/true);
    return pointerOf(buffer);
  }
  /// A fresh device buffer of `type` (dynamic sizes from `shapeSource`, which has the same rank).
  Value allocOutput(RankedTensorType type, Value shapeSource) {
    SmallVector<Value> dynamicSizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        dynamicSizes.push_back(tensor::DimOp::create(b, loc, shapeSource, i));
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    return memref::AllocOp::create(b, loc, memrefType, dynamicSizes, b.getI64IntegerAttr(256));
  }
  /// `t` in element type `elem`: itself, or a converted copy (helm_dev_convert).
  Value convertTo(Value t, Type elem) {
    auto type = cast<RankedTensorType>(t.getType());
    if (type.getElementType() == elem)
      return t;
    auto outType = RankedTensorType::get(type.getShape(), elem);
    Value out = allocOutput(outType, t);
    call(HELM_CONTRACT_SYMBOL(helm_dev_convert), {rawPointer(t), i32(kernelDtypeCode(type.getElementType())),
                              pointerOf(out), i32(kernelDtypeCode(elem)), numElements(t)});
    return asTensor(out, /*writable=*/true);
  }
  bool floatTensor(Value t) {
    auto type = dyn_cast<RankedTensorType>(t.getType());
    return type && kernelDtypeCode(type.getElementType()) >= 0;
  }
  Value dtypeOf(Value t) {
    return i32(kernelDtypeCode(cast<RankedTensorType>(t.getType()).getElementType()));
  }

  FailureOr<SmallVector<Value>> lower(Operation &op) {
    if (auto w = dyn_cast<WeightOp>(op))
      return SmallVector<Value>{lowerWeight(w)};
    if (auto c = dyn_cast<ConstantOp>(op))
      return lowerConstant(op, c.getValue());
    if (auto c = dyn_cast<arith::ConstantOp>(op))
      return lowerConstant(op, c.getValue());
    if (auto e = dyn_cast<EmbedOp>(op))
      return lowerEmbed(e);
    if (auto n = dyn_cast<RmsNormOp>(op))
      return lowerRmsNorm(n);
    if (auto l = dyn_cast<LinearOp>(op))
      return lowerLinear(op, l.getInput(), l.getWeight(), l.getBias(), l.getTransposeWeight(),
                         cast<RankedTensorType>(l.getResult().getType()));
    if (auto h = dyn_cast<LmHeadOp>(op))
      return lowerLinear(op, h.getInput(), h.getWeight(), Value(), h.getTransposeWeight(),
                         cast<RankedTensorType>(h.getResult().getType()));
    if (auto s = dyn_cast<SplitOp>(op))
      return lowerSplit(s);
    if (auto s = dyn_cast<tensor::ExtractSliceOp>(op))
      return lowerSlice(s);
    if (auto r = dyn_cast<RopeOp>(op))
      return lowerRope(r);
    if (auto a = dyn_cast<AttentionOp>(op))
      return lowerAttention(a);
    if (auto s = dyn_cast<SwigluOp>(op))
      return lowerElementwise(op, HELM_CONTRACT_SYMBOL(helm_dev_swiglu), s.getGate(), s.getUp());
    if (auto g = dyn_cast<GegluOp>(op))
      return lowerElementwise(op, HELM_CONTRACT_SYMBOL(helm_dev_geglu), g.getGate(), g.getUp());
    if (auto a = dyn_cast<AddOp>(op))
      return lowerElementwise(op, HELM_CONTRACT_SYMBOL(helm_dev_add), a.getLhs(), a.getRhs());
    if (auto s = dyn_cast<ScaleOp>(op))
      return lowerScalar(op, HELM_CONTRACT_SYMBOL(helm_dev_scale), s.getInput(), s.getFactor().convertToDouble());
    if (auto c = dyn_cast<SoftcapOp>(op))
      return lowerScalar(op, HELM_CONTRACT_SYMBOL(helm_dev_softcap), c.getInput(), c.getCap().convertToDouble());
    // The stage's result is the boundary activation; the runtime moves it across the link.
    if (auto t = dyn_cast<TransferOp>(op))
      return SmallVector<Value>{t.getInput()};
    return op.emitError() << "no device kernel for " << op.getName()
                          << " (a device stage can only run HELM block ops)";
  }

  /// A small constant of the graph (a norm's gamma folded by the exporter): its bytes are in the
  /// stage's code; helm_dev_constant hands out a device copy, made once.
  FailureOr<SmallVector<Value>> lowerConstant(Operation &op, Attribute value) {
    auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    auto dense = dyn_cast<DenseElementsAttr>(value);
    if (!type || !type.hasStaticShape() || !dense || kernelDtypeCode(type.getElementType()) < 0)
      return op.emitError() << "device stage: only static float tensor constants are supported";
    Value host = arith::ConstantOp::create(b, loc, dense);
    int64_t bytes = type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
    Value ptr = callValue(HELM_CONTRACT_SYMBOL(helm_dev_constant), {rawPointer(host), i64(bytes)}, ptrType);
    return SmallVector<Value>{asTensor(
        memrefFromPointer(b, loc, ptr, MemRefType::get(type.getShape(), type.getElementType()), {}),
        /*writable=*/false)};
  }

  FailureOr<SmallVector<Value>> lowerEmbed(EmbedOp e) {
    auto outType = cast<RankedTensorType>(e.getType());
    auto tableType = cast<RankedTensorType>(e.getTable().getType());
    auto idsType = cast<RankedTensorType>(e.getIds().getType());
    if (blockWeights.count(e.getTable())) {
      // A table in blocks: the device dequantizes the rows the ids pick.
      if (!idsType.getElementType().isInteger(64) || kernelDtypeCode(outType.getElementType()) < 0)
        return e.emitError() << "device stage: embed needs i64 ids and a float result";
      Value out = allocOutput(outType, e.getIds());
      call(HELM_CONTRACT_SYMBOL(helm_dev_embed_blocks),
           {rawPointer(e.getIds()), rawPointer(e.getTable()), i32(dtypeCodeOf(e.getTable())),
            pointerOf(out), i32(kernelDtypeCode(outType.getElementType())), numElements(e.getIds()),
            i64(tableType.getDimSize(0)), i64(tableType.getDimSize(1))});
      return SmallVector<Value>{asTensor(out, /*writable=*/true)};
    }
    if (!idsType.getElementType().isInteger(64) || !floatTensor(e.getTable()) ||
        kernelDtypeCode(outType.getElementType()) < 0)
      return e.emitError() << "device stage: embed needs i64 ids, a float table and a float result";
    // Rows in the table's type, then widened (a 16-bit table feeding f32 activations).
    auto rowsType = RankedTensorType::get(outType.getShape(), tableType.getElementType());
    Value out = allocOutput(rowsType, e.getIds());
    call(HELM_CONTRACT_SYMBOL(helm_dev_embed), {rawPointer(e.getIds()), rawPointer(e.getTable()), pointerOf(out),
                            dtypeOf(e.getTable()), numElements(e.getIds()),
                            i64(tableType.getDimSize(0)), i64(tableType.getDimSize(1))});
    return SmallVector<Value>{convertTo(asTensor(out, /*writable=*/true), outType.getElementType())};
  }

  FailureOr<SmallVector<Value>> lowerRmsNorm(RmsNormOp n) {
    Value x = n.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    auto gammaType = cast<RankedTensorType>(n.getGamma().getType());
    int64_t width = type.getDimSize(type.getRank() - 1);
    int64_t group = gammaType.getNumElements();
    if (!floatTensor(x) || ShapedType::isDynamic(width) || group <= 0 || width % group != 0)
      return n.emitError() << "rms_norm: last dimension must be a static multiple of gamma's size";
    // The device kernels take gamma in x's type (a wider gamma is rounded to it once).
    Value gamma = convertTo(n.getGamma(), type.getElementType());
    Value out = allocOutput(cast<RankedTensorType>(n.getType()), x);
    Value groups = mul(rows(x), i64(width / group));
    call(HELM_CONTRACT_SYMBOL(helm_dev_rms_norm),
         {rawPointer(x), rawPointer(gamma), pointerOf(out), dtypeOf(x), groups, i64(group),
          arith::ConstantOp::create(b, loc,
                                    b.getF32FloatAttr(float(n.getEpsilon().convertToDouble())))});
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }

  FailureOr<SmallVector<Value>> lowerLinear(Operation &op, Value x, Value weight, Value bias,
                                            bool transposed, RankedTensorType outType) {
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t rank = xType.getRank();
    int64_t k = xType.getDimSize(rank - 1);
    int64_t n = outType.getDimSize(rank - 1);
    // A weight in blocks passes its format's code (dtypeCodeOf); it is N rows of K in blocks.
    if (!floatTensor(x) || dtypeCodeOf(weight) < 0 || kernelDtypeCode(outType.getElementType()) < 0 ||
        ShapedType::isDynamic(k) || ShapedType::isDynamic(n))
      return op.emitError() << "linear: unsupported element types or dynamic features";
    Value biasPtr = LLVM::ZeroOp::create(b, loc, ptrType);
    if (bias)
      biasPtr = rawPointer(convertTo(bias, outType.getElementType()));
    Value out = allocOutput(outType, x);
    call(HELM_CONTRACT_SYMBOL(helm_dev_linear), {rawPointer(x), dtypeOf(x), rawPointer(weight), i32(dtypeCodeOf(weight)),
                             i32(transposed ? 1 : 0), biasPtr, pointerOf(out),
                             i32(kernelDtypeCode(outType.getElementType())), rows(x), i64(k),
                             i64(n)});
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }

  /// `count` columns from `offset` of x seen as [rows, width]: the pieces of a split, or the
  /// last position of [B, S, H] (rows B, width S*H).
  Value copyColumns(Value x, RankedTensorType outType, Value rowCount, Value width, Value offset,
                    Value count, Value shapeSource) {
    Value out = allocOutput(outType, shapeSource);
    call(HELM_CONTRACT_SYMBOL(helm_dev_copy_columns),
         {rawPointer(x), pointerOf(out), dtypeOf(x), rowCount, width, offset, count});
    return asTensor(out, /*writable=*/true);
  }

  FailureOr<SmallVector<Value>> lowerSplit(SplitOp s) {
    Value x = s.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    int64_t width = type.getDimSize(type.getRank() - 1);
    if (!floatTensor(x) || ShapedType::isDynamic(width))
      return s.emitError() << "split: the split dimension must be static";
    SmallVector<Value> results;
    int64_t offset = 0;
    Value rowCount = rows(x);
    for (auto [size, result] : llvm::zip(s.getSizes(), s.getResults())) {
      results.push_back(copyColumns(x, cast<RankedTensorType>(result.getType()), rowCount,
                                    i64(width), i64(offset), i64(size), x));
      offset += size;
    }
    return results;
  }

  /// The slices stage split makes: the last position of [B, S, H] before the head. Any slice of
  /// one middle dimension over whole rows, or of the last dimension, is a column copy.
  FailureOr<SmallVector<Value>> lowerSlice(tensor::ExtractSliceOp s) {
    Value x = s.getSource();
    auto type = cast<RankedTensorType>(x.getType());
    auto outType = cast<RankedTensorType>(s.getType());
    int64_t rank = type.getRank();
    auto isZero = [](OpFoldResult r) { return isConstantIntValue(r, 0); };
    auto fullSize = [&](int64_t d) {
      OpFoldResult size = s.getMixedSizes()[d];
      if (!type.isDynamicDim(d))
        return isConstantIntValue(size, type.getDimSize(d));
      auto sizeValue = dyn_cast<Value>(size);
      auto dimOp = sizeValue ? sizeValue.getDefiningOp<tensor::DimOp>() : nullptr;
      return dimOp && dimOp.getSource() == x &&
             isConstantIntValue(dimOp.getIndex(), d);
    };
    bool ok = floatTensor(x) && s.hasUnitStride() && outType.getRank() == rank && rank >= 2 &&
              !ShapedType::isDynamic(type.getDimSize(rank - 1));
    // The one sliced dimension d: dimensions before it whole from 0, after it whole from 0.
    int64_t sliced = -1;
    for (int64_t d = 0; ok && d < rank; ++d) {
      if (fullSize(d) && isZero(s.getMixedOffsets()[d]))
        continue;
      if (sliced >= 0)
        ok = false;
      sliced = d;
    }
    if (!ok || sliced == 0)
      return s.emitError() << "device stage: unsupported slice (only one inner dimension, unit "
                              "strides)";
    if (sliced < 0)
      return SmallVector<Value>{x};
    // Rows: the dimensions before `sliced`; a row's width: the rest.
    Value inner = product(x, sliced + 1, rank);
    Value rowCount = product(x, 0, sliced);
    Value width = mul(product(x, sliced, sliced + 1), inner);
    auto offsetValue = [&](OpFoldResult r) -> Value {
      if (auto v = dyn_cast<Value>(r))
        return toI64(v);
      return i64(cast<IntegerAttr>(cast<Attribute>(r)).getInt());
    };
    Value offset = mul(offsetValue(s.getMixedOffsets()[sliced]), inner);
    Value count = mul(offsetValue(s.getMixedSizes()[sliced]), inner);
    // The result's dynamic sizes: those of the slice.
    Value out = allocOutputFromSizes(outType, s.getMixedSizes());
    call(HELM_CONTRACT_SYMBOL(helm_dev_copy_columns),
         {rawPointer(x), pointerOf(out), dtypeOf(x), rowCount, width, offset, count});
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }
  Value allocOutputFromSizes(RankedTensorType type, ArrayRef<OpFoldResult> sizes) {
    SmallVector<Value> dynamicSizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        dynamicSizes.push_back(cast<Value>(sizes[i]));
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    return memref::AllocOp::create(b, loc, memrefType, dynamicSizes, b.getI64IntegerAttr(256));
  }

  FailureOr<SmallVector<Value>> lowerRope(RopeOp r) {
    Value x = r.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    if (type.getRank() != 3 || !floatTensor(x))
      return r.emitError() << "rope: input must be [batch, sequence, heads*head_dim]";
    if (!r.getPositions())
      return r.emitError() << "rope: positions missing (run helm-stage-split first)";
    if (!r.getTheta())
      return r.emitError() << "rope: theta unknown (the model was imported without weight data)";
    int64_t width = type.getDimSize(2), headDim = r.getHeadDim();
    if (ShapedType::isDynamic(width) || headDim <= 0 || width % headDim != 0)
      return r.emitError() << "rope: width must be a static multiple of head_dim";
    Value pos = r.getPositions();
    if (!cast<RankedTensorType>(pos.getType()).getElementType().isInteger(64))
      return r.emitError() << "device stage: rope positions must be i64";
    // The frequency factors: a device copy of the constant (helm_dev_constant, made once), or null.
    Value factors = LLVM::ZeroOp::create(b, loc, ptrType);
    if (std::optional<ArrayRef<float>> f = r.getFreqFactors()) {
      auto factorType = RankedTensorType::get({int64_t(f->size())}, b.getF32Type());
      Value host = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(factorType, *f));
      factors = callValue(HELM_CONTRACT_SYMBOL(helm_dev_constant),
                          {rawPointer(host), i64(int64_t(f->size() * sizeof(float)))}, ptrType);
    }
    Value out = allocOutput(type, x);
    call(HELM_CONTRACT_SYMBOL(helm_dev_rope),
         {rawPointer(x), rawPointer(pos), pointerOf(out), dtypeOf(x), rows(x),
          i64(width / headDim), i64(headDim), i64(r.getRotaryDim()),
          arith::ConstantOp::create(b, loc, b.getF64FloatAttr(r.getTheta()->convertToDouble())), factors,
          i32(r.getStyle() == RopeStyle::interleaved ? 1 : 0)});
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }

  FailureOr<SmallVector<Value>> lowerAttention(AttentionOp a) {
    Value layer = kvLayerOf(a);
    if (!layer)
      return failure();
    if (!a.getScale())
      return a.emitError() << "attention: scale unknown (imported without weight data)";
    auto qType = cast<RankedTensorType>(a.getQ().getType());
    if (qType.getRank() != 3 || !floatTensor(a.getQ()))
      return a.emitError() << "attention: q must be a rank-3 float tensor";
    Value out = allocOutput(cast<RankedTensorType>(a.getResult().getType()), a.getQ());
    int64_t window = a.getSlidingWindow() ? int64_t(*a.getSlidingWindow()) : 0;
    SmallVector<Value> args{layer, rawPointer(a.getQ()), rawPointer(a.getK()), rawPointer(a.getV()),
                            pointerOf(out), dtypeOf(a.getQ()), dim(a.getQ(), 0), dim(a.getQ(), 1),
                            i64(a.getNumHeads()), i64(a.getNumKvHeads()), i64(a.getHeadDim()),
                            arith::ConstantOp::create(b, loc,
                                                      b.getF32FloatAttr(float(a.getScale()->convertToDouble()))),
                            i64(window)};
    // Soft-capped scores (Gemma 2) take the entry with the cap; the others keep the older one.
    if (std::optional<APFloat> cap = a.getSoftcap()) {
      args.push_back(arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(cap->convertToDouble()))));
      call(HELM_CONTRACT_SYMBOL(helm_dev_attention_capped), args);
    } else {
      call(HELM_CONTRACT_SYMBOL(helm_dev_attention), args);
    }
    // The present key/value results (when the op has a cache) live in the runtime's KV cache.
    SmallVector<Value> results{asTensor(out, /*writable=*/true)};
    for (Value present : a.getPresent())
      if (!present.use_empty())
        return a.emitError() << "device stage: attention's present key/value must be unused "
                                "(run helm-stage-split first)";
      else
        results.push_back(Value());
    return results;
  }

  FailureOr<SmallVector<Value>> lowerElementwise(Operation &op, StringRef kernel, Value lhs,
                                                 Value rhs) {
    if (!floatTensor(lhs))
      return op.emitError() << "device stage: " << op.getName() << " needs a float tensor";
    Value out = allocOutput(cast<RankedTensorType>(op.getResult(0).getType()), lhs);
    call(kernel, {rawPointer(lhs), rawPointer(rhs), pointerOf(out), dtypeOf(lhs), numElements(lhs)});
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }

  /// An elementwise op of one tensor and an f32 parameter: kernel(x, y, dtype, n, parameter).
  FailureOr<SmallVector<Value>> lowerScalar(Operation &op, StringRef kernel, Value x, double parameter) {
    if (!floatTensor(x))
      return op.emitError() << "device stage: " << op.getName() << " needs a float tensor";
    Value out = allocOutput(cast<RankedTensorType>(op.getResult(0).getType()), x);
    call(kernel, {rawPointer(x), pointerOf(out), dtypeOf(x), numElements(x),
                  arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(parameter)))});
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }
};

struct LowerToDeviceCallsPass : helm::impl::LowerToDeviceCallsBase<LowerToDeviceCallsPass> {
  using LowerToDeviceCallsBase::LowerToDeviceCallsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseMap<StringAttr, int64_t> tensorIds = existingTensorIds(module);
    SmallVector<func::FuncOp> stages;
    for (auto f : module.getOps<func::FuncOp>())
      if (auto device = f->getAttrOfType<StringAttr>(HelmDialect::StageAttrHelper::getNameStr()); device && device == stageDevice)
        stages.push_back(f);
    if (stages.empty()) {
      module.emitError() << "no " << stageDevice
                         << " stage function to lower; run helm-stage-split first";
      return signalPassFailure();
    }
    for (func::FuncOp stage : stages) {
      for (func::FuncOp unit : unitFunctionsCalledBy(stage)) {
        if (failed(DeviceStageLowering(unit, tensorIds).run()))
          return signalPassFailure();
        unit->setAttr(HelmDialect::DeviceCallsAttrHelper::getNameStr(), UnitAttr::get(&getContext()));
      }
      if (failed(DeviceStageLowering(stage, tensorIds).run()))
        return signalPassFailure();
      stage->setAttr(HelmDialect::DeviceCallsAttrHelper::getNameStr(), UnitAttr::get(&getContext()));
    }
  }
};

} // namespace
