//===- LowerToLinalg.cpp - HELM ops to linalg on tensors and kernel calls --------===//
//
// Glue is generated code: linalg.generic on tensors, computed in f32, rounded to the model's
// activation dtype after every step where the source framework rounds (so fp16 models follow the
// same sequence of roundings as the reference). Matrix products and attention are calls into the
// contract (contract/helm_contract.h) on raw pointers of contiguous buffers: the
// microkernel boundary, as IREE draws it.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Passes.h"
#include "passes/codegen/StageAbi.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

namespace helm {
#define GEN_PASS_DEF_LOWERTOLINALG
#include "passes/codegen/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

/// What a rope's pair frequencies derive from: theta and the optional per-pair divisors
/// (RopeOp's freq_factors; null: all 1). Equal values give equal tables.
struct RopeFrequencies {
  double theta;
  DenseF32ArrayAttr factors;
  bool operator==(const RopeFrequencies &o) const { return theta == o.theta && factors == o.factors; }
  static RopeFrequencies of(RopeOp r) { return {r.getTheta()->convertToDouble(), r.getFreqFactorsAttr()}; }
};

/// Rope tables a unit function takes as arguments instead of computing them: its caller computes
/// them once per stage call for all the calls (as for the ropes of the stage itself).
struct TableArguments {
  RopeFrequencies freq;
  int64_t rotary;
  Type elem;
  RankedTensorType type; // [B, S, rotary / 2] f32
};
using HoistedTables = llvm::DenseMap<Operation *, SmallVector<TableArguments>>;

class StageLowering : StageLoweringBase {
public:
  StageLowering(func::FuncOp stage, llvm::DenseMap<StringAttr, int64_t> &tensorIds,
                HoistedTables &hoisted)
      : StageLoweringBase(stage, tensorIds), hoisted(hoisted) {}

  LogicalResult run() {
    Block &entry = stage.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(entry.without_terminator())) {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        b.setInsertionPoint(call);
        loc = call.getLoc();
        passTables(call);
        continue;
      }
      if (!isa<HelmDialect>(op.getDialect()))
        continue;
      b.setInsertionPoint(&op);
      loc = op.getLoc();
      FailureOr<SmallVector<Value>> results = lower(op);
      if (failed(results))
        return failure();
      op.replaceAllUsesWith(*results);
      op.erase();
    }
    return isUnitFunction() ? success() : rewriteSignature();
  }

private:
  //===--------------------------------------------------------------------===//
  // Small builders
  //===--------------------------------------------------------------------===//

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// Sizes of `t` as OpFoldResults (static sizes as attributes).
  SmallVector<OpFoldResult> sizesOf(Value t) {
    auto type = cast<RankedTensorType>(t.getType());
    SmallVector<OpFoldResult> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      sizes.push_back(type.isDynamicDim(i) ? OpFoldResult(tensor::DimOp::create(b, loc, t, i))
                                           : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
    return sizes;
  }
  SmallVector<Value> dynamicSizesOf(Value t) {
    auto type = cast<RankedTensorType>(t.getType());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        sizes.push_back(tensor::DimOp::create(b, loc, t, i));
    return sizes;
  }

  Value toF32(OpBuilder &nb, Location l, Value v) {
    if (v.getType().isF32())
      return v;
    return arith::ExtFOp::create(nb, l, nb.getF32Type(), v);
  }
  Value fromF32(OpBuilder &nb, Location l, Value v, Type t) {
    if (t.isF32())
      return v;
    return arith::TruncFOp::create(nb, l, t, v);
  }
  /// Rounds an f32 value to `t` and back: one step of arithmetic in the model's dtype.
  Value roundTo(OpBuilder &nb, Location l, Value v, Type t) {
    if (t.isF32())
      return v;
    return toF32(nb, l, fromF32(nb, l, v, t));
  }

  /// A contiguous, identity-layout pointer to `tensor`'s buffer. Slices are copied first.
  Value rawPointer(Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    Value source = tensor;
    while (Operation *def = source.getDefiningOp()) {
      if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp>(def)) {
        source = def->getOperand(0);
        continue;
      }
      break;
    }
    if (source.getDefiningOp<tensor::ExtractSliceOp>())
      tensor = bufferization::AllocTensorOp::create(b, loc, type, ValueRange{}, tensor);
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    Value buffer = bufferization::ToBufferOp::create(b, loc, memrefType, tensor, /*read_only=*/true);
    return pointerOf(buffer);
  }
  /// A fresh 64-byte aligned buffer for a kernel to write (viewed as a tensor with asTensor).
  Value allocOutput(RankedTensorType type, ValueRange dynamicSizes) {
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    return memref::AllocOp::create(b, loc, memrefType, dynamicSizes, b.getI64IntegerAttr(64));
  }
  Value memrefFromPointer(Value ptr, MemRefType type, ArrayRef<Value> dynamicSizesI64) {
    return helm::memrefFromPointer(b, loc, ptr, type, dynamicSizesI64);
  }

  /// `outType`-shaped elementwise generic over `inputs` (each of the output's shape, or with the
  /// given indexing maps). The body receives the block arguments converted to f32 (floats only).
  Value elementwise(ValueRange inputs, ArrayRef<AffineMap> inputMaps, RankedTensorType outType,
                    Value shapeSource,
                    llvm::function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    int64_t rank = outType.getRank();
    Value init = tensor::EmptyOp::create(b, loc, outType, dynamicSizesOf(shapeSource));
    SmallVector<AffineMap> maps(inputMaps.begin(), inputMaps.end());
    while (maps.size() < inputs.size())
      maps.push_back(b.getMultiDimIdentityMap(rank));
    maps.push_back(b.getMultiDimIdentityMap(rank));
    SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
    Type outElem = outType.getElementType();
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{outType}, inputs, ValueRange{init}, maps, iters,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          SmallVector<Value> floats;
          for (Value a : args.drop_back())
            floats.push_back(isa<FloatType>(a.getType()) ? toF32(nb, l, a) : a);
          Value r = body(nb, l, floats);
          linalg::YieldOp::create(nb, l, fromF32(nb, l, r, outElem));
        });
    return generic.getResult(0);
  }

  //===--------------------------------------------------------------------===//
  // Op lowerings
  //===--------------------------------------------------------------------===//

  FailureOr<SmallVector<Value>> lower(Operation &op) {
    if (auto w = dyn_cast<WeightOp>(op))
      return SmallVector<Value>{lowerWeight(w)};
    if (auto c = dyn_cast<ConstantOp>(op))
      return SmallVector<Value>{
          arith::ConstantOp::create(b, loc, cast<TypedAttr>(c.getValue())).getResult()};
    if (auto e = dyn_cast<EmbedOp>(op))
      return SmallVector<Value>{lowerEmbed(e)};
    if (auto n = dyn_cast<RmsNormOp>(op))
      return lowerRmsNorm(n);
    if (auto l = dyn_cast<LinearOp>(op))
      return lowerLinear(l.getInput(), l.getWeight(), l.getBias(), l.getTransposeWeight(),
                         cast<RankedTensorType>(l.getResult().getType()));
    if (auto h = dyn_cast<LmHeadOp>(op))
      return lowerLinear(h.getInput(), h.getWeight(), Value(), h.getTransposeWeight(),
                         cast<RankedTensorType>(h.getResult().getType()));
    if (auto s = dyn_cast<SplitOp>(op))
      return lowerSplit(s);
    if (auto r = dyn_cast<RopeOp>(op))
      return lowerRope(r);
    if (auto a = dyn_cast<AttentionOp>(op))
      return lowerAttention(a);
    if (auto s = dyn_cast<SwigluOp>(op))
      return SmallVector<Value>{lowerSwiglu(s)};
    if (auto g = dyn_cast<GegluOp>(op))
      return SmallVector<Value>{lowerGeglu(g)};
    if (auto s = dyn_cast<ScaleOp>(op)) {
      float factor = float(s.getFactor().convertToDouble());
      return SmallVector<Value>{elementwise({s.getInput()}, {}, cast<RankedTensorType>(s.getType()), s.getInput(),
                                            [&](OpBuilder &nb, Location l, ValueRange v) {
                                              return arith::MulFOp::create(nb, l, v[0], f32(nb, l, factor))
                                                  .getResult();
                                            })};
    }
    if (auto c = dyn_cast<SoftcapOp>(op)) {
      float cap = float(c.getCap().convertToDouble()), inverse = 1.0f / cap;
      return SmallVector<Value>{elementwise({c.getInput()}, {}, cast<RankedTensorType>(c.getType()), c.getInput(),
                                            [&](OpBuilder &nb, Location l, ValueRange v) {
                                              Value t = arith::MulFOp::create(nb, l, v[0], f32(nb, l, inverse));
                                              return arith::MulFOp::create(nb, l, math::TanhOp::create(nb, l, t),
                                                                           f32(nb, l, cap))
                                                  .getResult();
                                            })};
    }
    // The stage's result is the boundary activation; the runtime moves it across the link
    // (Device::copyToDevice) after the stage returns, so inside the stage it is the value itself.
    if (auto t = dyn_cast<TransferOp>(op))
      return SmallVector<Value>{t.getInput()};
    if (auto a = dyn_cast<AddOp>(op))
      return SmallVector<Value>{elementwise(
          {a.getLhs(), a.getRhs()}, {}, cast<RankedTensorType>(a.getType()), a.getLhs(),
          [&](OpBuilder &nb, Location l, ValueRange v) {
            return arith::AddFOp::create(nb, l, v[0], v[1]).getResult();
          })};
    return op.emitError() << "no CPU lowering for " << op.getName();
  }

  Value lowerEmbed(EmbedOp e) {
    auto outType = cast<RankedTensorType>(e.getType());
    auto tableType = cast<RankedTensorType>(e.getTable().getType());
    Value table = e.getTable();
    Value ids = e.getIds();
    int64_t rank = outType.getRank();
    int64_t vocab = tableType.getDimSize(0);
    if (blockWeights.count(table)) {
      // A table in blocks: the kernel dequantizes the rows the ids pick.
      Value rows = idx(1);
      for (int64_t i = 0; i < rank - 1; ++i)
        rows = arith::MulIOp::create(b, loc, rows, tensor::DimOp::create(b, loc, ids, i));
      Value out = allocOutput(outType, dynamicSizesOf(ids));
      func::FuncOp kernel = declare(HELM_CONTRACT_SYMBOL(helm_k_embed_blocks),
                                    {ptrType, ptrType, b.getI32Type(), ptrType, b.getI32Type(),
                                     b.getI64Type(), b.getI64Type(), b.getI64Type()},
                                    {});
      func::CallOp::create(b, loc, kernel,
                           ValueRange{rawPointer(ids), rawPointer(table), i32(dtypeCodeOf(table)),
                                      pointerOf(out), i32(kernelDtypeCode(outType.getElementType())),
                                      toI64(rows), i64(vocab), i64(tableType.getDimSize(1))});
      return asTensor(out, /*writable=*/true);
    }
    Value init = tensor::EmptyOp::create(b, loc, outType, dynamicSizesOf(ids));
    SmallVector<AffineExpr> idExprs;
    for (int64_t i = 0; i < rank - 1; ++i)
      idExprs.push_back(b.getAffineDimExpr(i));
    SmallVector<AffineMap> maps{AffineMap::get(rank, 0, idExprs, b.getContext()),
                                b.getMultiDimIdentityMap(rank)};
    SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
    return linalg::GenericOp::create(
               b, loc, TypeRange{outType}, ValueRange{ids}, ValueRange{init}, maps, iters,
               [&](OpBuilder &nb, Location l, ValueRange args) {
                 // Clamp so that a bad id can never read outside the table; the runtime rejects
                 // out-of-vocabulary ids before they get here.
                 Value id = arith::IndexCastOp::create(nb, l, nb.getIndexType(), args[0]);
                 Value zero = arith::ConstantIndexOp::create(nb, l, 0);
                 Value maxId = arith::ConstantIndexOp::create(nb, l, vocab - 1);
                 id = arith::MaxSIOp::create(nb, l, id, zero);
                 id = arith::MinSIOp::create(nb, l, id, maxId);
                 Value col = linalg::IndexOp::create(nb, l, rank - 1);
                 Value v = tensor::ExtractOp::create(nb, l, table, ValueRange{id, col});
                 if (v.getType() != outType.getElementType()) // a 16-bit table widened to f32
                   v = arith::ExtFOp::create(nb, l, outType.getElementType(), v);
                 linalg::YieldOp::create(nb, l, v);
               })
        .getResult(0);
  }

  /// The rope that an RMSNorm can be fused into: Qwen3's per-head q/k norm (group = head_dim)
  /// whose only user is a rope over its result. Fusing saves the normalised tensor's write and
  /// re-read: the rotation normalises its two input elements itself.
  RopeOp fusableRope(RmsNormOp n) {
    if (!n.getResult().hasOneUse())
      return nullptr;
    auto rope = dyn_cast<RopeOp>(*n.getResult().getUsers().begin());
    if (!rope || rope.getInput() != n.getResult() || !rope.getPositions() || !rope.getTheta())
      return nullptr;
    auto type = cast<RankedTensorType>(n.getInput().getType());
    auto gammaType = cast<RankedTensorType>(n.getGamma().getType());
    int64_t width = type.getRank() == 3 ? type.getDimSize(2) : ShapedType::kDynamic;
    if (ShapedType::isDynamic(width) || gammaType.getRank() != 1 ||
        gammaType.getNumElements() != int64_t(rope.getHeadDim()) ||
        width % int64_t(rope.getHeadDim()) != 0)
      return nullptr;
    return rope;
  }

  /// RMSNorm's scale for a group of `group` values: rsqrt(sum of squares / group + eps). The
  /// RMSNorm lowering and the per-head norm fused into both rope forms all use it, so they compute
  /// the same values ...
  Value inverseRms(OpBuilder &nb, Location l, Value sumsq, int64_t group, float eps) {
    Value mean = arith::DivFOp::create(nb, l, sumsq,
                                       arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(float(group))));
    Value var = arith::AddFOp::create(nb, l, mean, arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(eps)));
    return math::RsqrtOp::create(nb, l, var);
  }
  /// ... and, for the per-head norm, v (f32) normalised with it as the separate ops round it: round(v * inv) times gamma,
  /// rounded to the dtype.
  Value headNormalise(OpBuilder &nb, Location l, Value v, Value inv, Value gamma, Type elem) {
    Value y = roundTo(nb, l, arith::MulFOp::create(nb, l, v, inv), elem);
    return roundTo(nb, l, arith::MulFOp::create(nb, l, y, toF32(nb, l, gamma)), elem);
  }

  /// RMSNorm (group = head_dim) and the rope after it as two passes: the sums of squares per
  /// head, then the rotation, which normalises self and partner on the fly with the same
  /// rounding steps as the separate ops (round(x * rsqrt(mean + eps)), times gamma, rounded to
  /// the dtype, then rotated).
  Value lowerRmsNormIntoRope(RmsNormOp n, RopeOp r) {
    Value x = n.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    Type elem = type.getElementType();
    int64_t headDim = r.getHeadDim();
    Value sumsq = sumOfSquares(x, headDim);
    Value gamma = n.getGamma();
    float eps = float(n.getEpsilon().convertToDouble());
    auto normalise = [&](OpBuilder &nb, Location l, Value v, Value bi, Value si, Value d) {
      Value hd = arith::ConstantIndexOp::create(nb, l, headDim);
      Value head = arith::DivUIOp::create(nb, l, d, hd);
      Value i = arith::RemUIOp::create(nb, l, d, hd);
      Value ss = tensor::ExtractOp::create(nb, l, sumsq, ValueRange{bi, si, head});
      Value g = tensor::ExtractOp::create(nb, l, gamma, ValueRange{i});
      return headNormalise(nb, l, v, inverseRms(nb, l, ss, headDim, eps), g, elem);
    };
    auto [cosT, sinT] = ropeTables(r.getPositions(), x, type, RopeFrequencies::of(r), r.getRotaryDim(), elem);
    bool interleaved = r.getStyle() == RopeStyle::interleaved;
    Value rotated =
        halvesRotatable(type, headDim, r.getRotaryDim(), interleaved)
            ? buildHalfRotation(x, type, headDim, elem, cosT, sinT, HalfNorm{sumsq, gamma, eps})
            : buildRotation(x, type, headDim, r.getRotaryDim(), interleaved, elem, cosT, sinT, normalise);
    fusedRopes[r.getOperation()] = rotated;
    return rotated;
  }
  llvm::DenseMap<Operation *, Value> fusedRopes;

  /// Sum of squares of x over consecutive groups of `group` elements of its last dimension, in
  /// f32: [..., width] -> [..., width / group]. `xe` receives x viewed as [..., groups, group].
  Value sumOfSquares(Value x, int64_t group, Value *xe = nullptr) {
    auto type = cast<RankedTensorType>(x.getType());
    int64_t rank = type.getRank();
    int64_t groups = type.getDimSize(rank - 1) / group;
    Type elem = type.getElementType();
    SmallVector<ReassociationIndices> reassoc;
    for (int64_t i = 0; i < rank - 1; ++i)
      reassoc.push_back({i});
    reassoc.push_back({rank - 1, rank});
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = groups;
    shape.push_back(group);
    auto expandedType = RankedTensorType::get(shape, elem);
    SmallVector<OpFoldResult> outShape = sizesOf(x);
    outShape.back() = b.getIndexAttr(groups);
    outShape.push_back(b.getIndexAttr(group));
    Value expanded = tensor::ExpandShapeOp::create(b, loc, expandedType, x, reassoc, outShape);
    if (xe)
      *xe = expanded;

    SmallVector<int64_t> sumShape(shape.begin(), shape.end() - 1);
    auto sumType = RankedTensorType::get(sumShape, b.getF32Type());
    SmallVector<Value> sumDyn;
    for (int64_t i = 0; i < rank - 1; ++i)
      if (type.isDynamicDim(i))
        sumDyn.push_back(tensor::DimOp::create(b, loc, x, i));
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    Value sumInit = tensor::EmptyOp::create(b, loc, sumType, sumDyn);
    sumInit = linalg::FillOp::create(b, loc, zero, sumInit).getResult(0);
    int64_t erank = rank + 1;
    SmallVector<AffineExpr> lead;
    for (int64_t i = 0; i < erank - 1; ++i)
      lead.push_back(b.getAffineDimExpr(i));
    AffineMap dropLast = AffineMap::get(erank, 0, lead, b.getContext());
    SmallVector<utils::IteratorType> redIters(erank - 1, utils::IteratorType::parallel);
    redIters.push_back(utils::IteratorType::reduction);
    return linalg::GenericOp::create(
               b, loc, TypeRange{sumType}, ValueRange{expanded}, ValueRange{sumInit},
               SmallVector<AffineMap>{b.getMultiDimIdentityMap(erank), dropLast}, redIters,
               [&](OpBuilder &nb, Location l, ValueRange args) {
                 Value v = toF32(nb, l, args[0]);
                 Value sq = arith::MulFOp::create(nb, l, v, v);
                 linalg::YieldOp::create(nb, l,
                                         arith::AddFOp::create(nb, l, args[1], sq).getResult());
               })
        .getResult(0);
  }

  FailureOr<SmallVector<Value>> lowerRmsNorm(RmsNormOp n) {
    Value x = n.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    auto gammaType = cast<RankedTensorType>(n.getGamma().getType());
    int64_t rank = type.getRank();
    int64_t width = type.getDimSize(rank - 1);
    int64_t group = gammaType.getNumElements();
    if (ShapedType::isDynamic(width) || group <= 0 || width % group != 0)
      return n.emitError() << "rms_norm: last dimension must be a static multiple of gamma's size";
    if (RopeOp rope = fusableRope(n))
      return SmallVector<Value>{lowerRmsNormIntoRope(n, rope)};
    Type elem = type.getElementType();
    double eps = n.getEpsilon().convertToDouble();

    // x as [..., groups, group] and the sum of squares per group, in f32.
    Value xe;
    Value sumsq = sumOfSquares(x, group, &xe);
    auto expandedType = cast<RankedTensorType>(xe.getType());
    int64_t erank = rank + 1;
    SmallVector<AffineExpr> lead;
    for (int64_t i = 0; i < erank - 1; ++i)
      lead.push_back(b.getAffineDimExpr(i));
    AffineMap dropLast = AffineMap::get(erank, 0, lead, b.getContext());
    SmallVector<ReassociationIndices> reassoc;
    for (int64_t i = 0; i < rank - 1; ++i)
      reassoc.push_back({i});
    reassoc.push_back({rank - 1, rank});

    // y = round(x * rsqrt(mean + eps)) * gamma
    AffineMap gammaMap = AffineMap::get(erank, 0, {b.getAffineDimExpr(erank - 1)}, b.getContext());
    Value gamma = n.getGamma();
    Value normed = elementwise(
        {xe, sumsq, gamma}, {b.getMultiDimIdentityMap(erank), dropLast, gammaMap}, expandedType, xe,
        [&](OpBuilder &nb, Location l, ValueRange v) {
          Value inv = inverseRms(nb, l, v[1], group, float(eps));
          Value y = roundTo(nb, l, arith::MulFOp::create(nb, l, v[0], inv), elem);
          return arith::MulFOp::create(nb, l, y, v[2]).getResult();
        });
    Value y = tensor::CollapseShapeOp::create(b, loc, type, normed, reassoc);
    return SmallVector<Value>{y};
  }

  FailureOr<SmallVector<Value>> lowerLinear(Value x, Value weight, Value bias, bool transposed,
                                            RankedTensorType outType) {
    auto xType = cast<RankedTensorType>(x.getType());
    auto wType = cast<RankedTensorType>(weight.getType());
    int64_t rank = xType.getRank();
    int64_t k = xType.getDimSize(rank - 1);
    int64_t n = outType.getDimSize(rank - 1);
    Type xElem = xType.getElementType(), wElem = wType.getElementType(),
         yElem = outType.getElementType();
    int32_t wCode = dtypeCodeOf(weight);
    if (kernelDtypeCode(xElem) < 0 || wCode < 0 || kernelDtypeCode(yElem) < 0)
      return emitError(loc) << "linear: unsupported element types " << xElem << ", " << wElem;
    // Rows M = product of the leading dimensions.
    Value m = idx(1);
    for (int64_t i = 0; i < rank - 1; ++i)
      m = arith::MulIOp::create(b, loc, m, tensor::DimOp::create(b, loc, x, i));
    Value xp = rawPointer(x);
    Value wp = rawPointer(weight);
    // The kernel sees x and y as M contiguous rows; the buffers keep their rank (no reshapes).
    Value out = allocOutput(outType, dynamicSizesOf(x));
    func::FuncOp kernel = declare(
        HELM_CONTRACT_SYMBOL(helm_k_linear),
        {ptrType, b.getI32Type(), ptrType, b.getI32Type(), b.getI32Type(), ptrType, b.getI32Type(),
         b.getI64Type(), b.getI64Type(), b.getI64Type()},
        {});
    func::CallOp::create(b, loc, kernel,
                         ValueRange{xp, i32(kernelDtypeCode(xElem)), wp, i32(wCode),
                                    i32(transposed ? 1 : 0), pointerOf(out), i32(kernelDtypeCode(yElem)),
                                    toI64(m), i64(k), i64(n)});
    Value y = asTensor(out, /*writable=*/true);
    if (bias) {
      AffineMap biasMap = AffineMap::get(rank, 0, {b.getAffineDimExpr(rank - 1)}, b.getContext());
      y = elementwise({y, bias}, {b.getMultiDimIdentityMap(rank), biasMap}, outType, y,
                      [&](OpBuilder &nb, Location l, ValueRange v) {
                        return arith::AddFOp::create(nb, l, v[0], v[1]).getResult();
                      });
    }
    return SmallVector<Value>{y};
  }

  FailureOr<SmallVector<Value>> lowerSplit(SplitOp s) {
    Value x = s.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    int64_t rank = type.getRank();
    SmallVector<Value> results;
    int64_t offset = 0;
    for (auto [size, result] : llvm::zip(s.getSizes(), s.getResults())) {
      SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
      offsets.back() = b.getIndexAttr(offset);
      SmallVector<OpFoldResult> sizes = sizesOf(x);
      sizes.back() = b.getIndexAttr(size);
      SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
      results.push_back(tensor::ExtractSliceOp::create(
          b, loc, cast<RankedTensorType>(result.getType()), x, offsets, sizes, strides));
      offset += size;
    }
    return results;
  }

  struct RopeTables {
    Value positions;
    RopeFrequencies freq;
    int64_t rotary;
    Type elem;
    Value cos, sin;
  };
  SmallVector<RopeTables> ropeTableCache;
  HoistedTables &hoisted;

  /// Appends to a call of a unit function the rope tables it takes as arguments, from this
  /// function's cache (so computed once for all calls with the same positions).
  void passTables(func::CallOp call) {
    auto it = hoisted.find(module.lookupSymbol(call.getCalleeAttr()));
    if (it == hoisted.end())
      return;
    // The unit function's positions: its argument 1 (helm-stage-split's signature).
    Value pos = call.getOperand(1);
    for (const TableArguments &t : it->second) {
      auto [cosT, sinT] = ropeTables(pos, pos, t.type, t.freq, t.rotary, t.elem);
      call.getOperandsMutable().append(ValueRange{cosT, sinT});
    }
  }

  /// The [B, S, rotary/2] cos and sin tables for `pos` (f32, rounded to `elem`), built at the
  /// first rope that needs them; `x` (that rope's input) gives B and S. All ops of the stage are
  /// in one block, so the first rope's tables dominate every later rope.
  std::pair<Value, Value> ropeTables(Value pos, Value x, RankedTensorType type, RopeFrequencies freq,
                                     int64_t rotary, Type elem) {
    for (const RopeTables &t : ropeTableCache)
      if (t.positions == pos && t.freq == freq && t.rotary == rotary && t.elem == elem)
        return {t.cos, t.sin};
    int64_t half = rotary / 2;
    if (isUnitFunction() && pos == stage.getArgument(1)) {
      // In a unit function the tables of its positions argument (argument 1, as passTables reads
      // it from each call) are two more arguments, which the caller computes.
      auto tableType = RankedTensorType::get({type.getDimSize(0), type.getDimSize(1), half},
                                             b.getF32Type());
      unsigned index = stage.getNumArguments();
      if (failed(stage.insertArguments({index, index}, {tableType, tableType}, {nullptr, nullptr},
                                       {loc, loc})))
        llvm::report_fatal_error("cannot add the rope table arguments to a unit function");
      hoisted[stage].push_back({freq, rotary, elem, tableType});
      Value cosT = stage.getArgument(index), sinT = stage.getArgument(index + 1);
      ropeTableCache.push_back({pos, freq, rotary, elem, cosT, sinT});
      return {cosT, sinT};
    }
    // inv_freq[j] = 1 / (theta^(2j/rotary) * factor_j): the exponent's ratio in f32, the power and
    // the product in f64 (runtime/device/DeviceOps.h, rope: the device stages compute the same).
    SmallVector<float> invFreq;
    for (int64_t j = 0; j < half; ++j)
      invFreq.push_back(float(1.0 / (std::pow(freq.theta, double(float(2 * j) / float(rotary))) *
                                     (freq.factors ? double(freq.factors[j]) : 1.0))));
    auto freqType = RankedTensorType::get({half}, b.getF32Type());
    Value freqs = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(freqType, ArrayRef<float>(invFreq)));
    auto tableType = RankedTensorType::get({type.getDimSize(0), type.getDimSize(1), half},
                                           b.getF32Type());
    SmallVector<Value> dyn;
    for (int64_t i = 0; i < 2; ++i)
      if (type.isDynamicDim(i))
        dyn.push_back(tensor::DimOp::create(b, loc, x, i));
    Value cosInit = tensor::EmptyOp::create(b, loc, tableType, dyn);
    Value sinInit = tensor::EmptyOp::create(b, loc, tableType, dyn);
    AffineMap posMap = AffineMap::get(3, 0, {b.getAffineDimExpr(0), b.getAffineDimExpr(1)},
                                      b.getContext());
    AffineMap freqMap = AffineMap::get(3, 0, {b.getAffineDimExpr(2)}, b.getContext());
    SmallVector<utils::IteratorType> iters(3, utils::IteratorType::parallel);
    auto tables = linalg::GenericOp::create(
        b, loc, TypeRange{tableType, tableType}, ValueRange{pos, freqs},
        ValueRange{cosInit, sinInit},
        SmallVector<AffineMap>{posMap, freqMap, b.getMultiDimIdentityMap(3),
                               b.getMultiDimIdentityMap(3)},
        iters, [&](OpBuilder &nb, Location l, ValueRange args) {
          Value p = arith::SIToFPOp::create(nb, l, nb.getF32Type(), args[0]);
          Value angle = arith::MulFOp::create(nb, l, p, args[1]);
          Value c = roundTo(nb, l, math::CosOp::create(nb, l, angle), elem);
          Value s = roundTo(nb, l, math::SinOp::create(nb, l, angle), elem);
          linalg::YieldOp::create(nb, l, ValueRange{c, s});
        });
    ropeTableCache.push_back({pos, freq, rotary, elem, tables.getResult(0), tables.getResult(1)});
    return {tables.getResult(0), tables.getResult(1)};
  }

  FailureOr<SmallVector<Value>> lowerRope(RopeOp r) {
    Value x = r.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    if (type.getRank() != 3)
      return r.emitError() << "rope: input must be [batch, sequence, heads*head_dim]";
    if (!r.getPositions())
      return r.emitError() << "rope: positions missing (run helm-stage-split first)";
    if (!r.getTheta())
      return r.emitError() << "rope: theta unknown (the model was imported without weight data)";
    if (Value fused = fusedRopes.lookup(r.getOperation()))
      return SmallVector<Value>{fused};
    int64_t headDim = r.getHeadDim(), rotary = r.getRotaryDim();
    bool interleaved = r.getStyle() == RopeStyle::interleaved;
    Type elem = type.getElementType();

    // cos/sin tables [B, S, half] in f32 (rounded to the model dtype like the reference). Every
    // rope of the stage with the same positions, theta, rotary size and dtype shares one pair of
    // tables: computed once per call of the stage instead of twice per layer (q and k), which
    // removes 2 * layers - 1 passes of cos/sin over [B, S, half].
    Value pos = r.getPositions();
    auto [cosT, sinT] = ropeTables(pos, x, type, RopeFrequencies::of(r), rotary, elem);
    if (halvesRotatable(type, headDim, rotary, interleaved))
      return SmallVector<Value>{buildHalfRotation(x, type, headDim, elem, cosT, sinT, {})};
    return SmallVector<Value>{
        buildRotation(x, type, headDim, rotary, interleaved, elem, cosT, sinT, nullptr)};
  }

  /// Whether a rope can run as buildHalfRotation: rotate-half style over the whole head, on a
  /// static row of whole heads.
  static bool halvesRotatable(RankedTensorType type, int64_t headDim, int64_t rotary, bool interleaved) {
    int64_t width = type.getDimSize(2);
    return !interleaved && rotary == headDim && headDim % 2 == 0 && headDim > 0 &&
           !ShapedType::isDynamic(width) && width % headDim == 0;
  }

  /// The per-head RMSNorm a rope normalises its inputs with (sums of squares [B, S, heads], gamma
  /// [head_dim], epsilon); sumsq null: no norm.
  struct HalfNorm {
    Value sumsq, gamma;
    float eps = 0;
  };

  /// The rotate-half rope over whole heads without gathers, so that helm-vectorize-glue makes it
  /// vector code: x viewed as [B, S, heads, 2, half], the first halves rotated by one generic
  /// (x1 cos - x2 sin) and the second by another (x2 cos + x1 sin), each reading both halves
  /// through identity maps and the tables through broadcasts. The operations per element and their
  /// rounding are buildRotation's (and, with a norm, lowerRmsNormIntoRope's normalise), so the
  /// values are the same; buildRotation's form, one generic that fetches each element's partner
  /// with tensor.extract, stays scalar code (a 20% serial share of a 2-thread prefill).
  Value buildHalfRotation(Value x, RankedTensorType type, int64_t headDim, Type elem, Value cosT, Value sinT,
                          HalfNorm norm) {
    int64_t half = headDim / 2, heads = type.getDimSize(2) / headDim;
    auto x5Type = RankedTensorType::get({type.getDimSize(0), type.getDimSize(1), heads, 2, half}, elem);
    SmallVector<ReassociationIndices> reassoc{{0}, {1}, {2, 3, 4}};
    SmallVector<OpFoldResult> shape5 = sizesOf(x);
    shape5.pop_back();
    for (int64_t v : {heads, int64_t(2), half})
      shape5.push_back(b.getIndexAttr(v));
    Value x5 = tensor::ExpandShapeOp::create(b, loc, x5Type, x, reassoc, shape5);
    auto halfType = RankedTensorType::get({type.getDimSize(0), type.getDimSize(1), heads, half}, elem);
    auto sliceOffsets = [&](int64_t which) {
      SmallVector<OpFoldResult> offsets(5, b.getIndexAttr(0));
      offsets[3] = b.getIndexAttr(which);
      return offsets;
    };
    SmallVector<OpFoldResult> sliceSizes = shape5;
    sliceSizes[3] = b.getIndexAttr(1);
    SmallVector<OpFoldResult> unit(5, b.getIndexAttr(1));
    auto halfOf = [&](Value t, int64_t which) -> Value {
      return tensor::ExtractSliceOp::create(b, loc, halfType, t, sliceOffsets(which), sliceSizes, unit);
    };
    Value xFirst = halfOf(x5, 0), xSecond = halfOf(x5, 1);
    Value gammaHalves[2];
    if (norm.sumsq) {
      auto gType = RankedTensorType::get({half}, cast<RankedTensorType>(norm.gamma.getType()).getElementType());
      for (int64_t which = 0; which < 2; ++which)
        gammaHalves[which] = tensor::ExtractSliceOp::create(
            b, loc, gType, norm.gamma, ArrayRef<OpFoldResult>{b.getIndexAttr(which * half)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(half)}, ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    }
    auto dims = [&](std::initializer_list<unsigned> ds) {
      SmallVector<AffineExpr> e;
      for (unsigned d : ds)
        e.push_back(b.getAffineDimExpr(d));
      return AffineMap::get(4, 0, e, b.getContext());
    };
    AffineMap id = b.getMultiDimIdentityMap(4), table = dims({0, 1, 3}), head = dims({0, 1, 2}), lane = dims({3});
    SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
    Value out5 = tensor::EmptyOp::create(b, loc, x5Type, dynamicSizesOf(x));
    // which = 0: self the first half (x1 cos - x2 sin); 1: the second (x2 cos + x1 sin).
    for (int64_t which = 0; which < 2; ++which) {
      SmallVector<Value> inputs{which ? xSecond : xFirst, which ? xFirst : xSecond, cosT, sinT};
      SmallVector<AffineMap> maps{id, id, table, table};
      if (norm.sumsq) {
        inputs.append({norm.sumsq, gammaHalves[which], gammaHalves[1 - which]});
        maps.append({head, lane, lane});
      }
      maps.push_back(id);
      Value dest = halfOf(out5, which);
      Value rotated =
          linalg::GenericOp::create(
              b, loc, TypeRange{halfType}, inputs, ValueRange{dest}, maps, iters,
              [&](OpBuilder &nb, Location l, ValueRange args) {
                Value self = toF32(nb, l, args[0]), other = toF32(nb, l, args[1]);
                if (norm.sumsq) {
                  Value inv = inverseRms(nb, l, args[4], headDim, norm.eps);
                  self = headNormalise(nb, l, self, inv, args[5], elem);
                  other = headNormalise(nb, l, other, inv, args[6], elem);
                }
                Value t1 = roundTo(nb, l, arith::MulFOp::create(nb, l, self, args[2]), elem);
                Value t2 = roundTo(nb, l, arith::MulFOp::create(nb, l, other, args[3]), elem);
                if (which == 0)
                  t2 = arith::NegFOp::create(nb, l, t2);
                Value rot = arith::AddFOp::create(nb, l, t1, t2);
                linalg::YieldOp::create(nb, l, fromF32(nb, l, rot, elem));
              })
              .getResult(0);
      out5 = tensor::InsertSliceOp::create(b, loc, rotated, out5, sliceOffsets(which), sliceSizes, unit);
    }
    return tensor::CollapseShapeOp::create(b, loc, type, out5, reassoc);
  }

  /// Computes the f32 value the rotation reads for element `d` of its input, given that
  /// element's stored value widened to f32 (the identity for a plain rope; a per-head RMSNorm
  /// when the norm is fused into the rope).
  using RotationInput = llvm::function_ref<Value(OpBuilder &, Location, Value value, Value b,
                                                 Value s, Value d)>;

  /// The rope rotation of x [B, S, heads*head_dim] as one generic. `transform` (may be null)
  /// maps each input element before it is rotated, self and partner alike.
  Value buildRotation(Value x, RankedTensorType type, int64_t headDim, int64_t rotary,
                      bool interleaved, Type elem, Value cosT, Value sinT,
                      RotationInput transform) {
    int64_t half = rotary / 2;
    SmallVector<utils::IteratorType> iters(3, utils::IteratorType::parallel);

    Value init = tensor::EmptyOp::create(b, loc, type, dynamicSizesOf(x));
    auto rotated = linalg::GenericOp::create(
        b, loc, TypeRange{type}, ValueRange{x}, ValueRange{init},
        SmallVector<AffineMap>{b.getMultiDimIdentityMap(3), b.getMultiDimIdentityMap(3)}, iters,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          auto cidx = [&](int64_t v) { return arith::ConstantIndexOp::create(nb, l, v); };
          Value bi = linalg::IndexOp::create(nb, l, 0);
          Value si = linalg::IndexOp::create(nb, l, 1);
          Value d = linalg::IndexOp::create(nb, l, 2);
          Value i = arith::RemUIOp::create(nb, l, d, cidx(headDim));
          Value inRotary = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult, i, cidx(rotary));
          Value self = toF32(nb, l, args[0]);
          if (transform)
            self = transform(nb, l, self, bi, si, d);
          // Every lane computes the rotation (vectorizer friendly); lanes past rotary_dim keep x.
          Value j, partner, first;
          if (interleaved) {
            j = arith::DivUIOp::create(nb, l, i, cidx(2));
            Value odd = arith::RemUIOp::create(nb, l, i, cidx(2));
            first = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, odd, cidx(0));
            Value up = arith::AddIOp::create(nb, l, d, cidx(1));
            Value down = arith::SubIOp::create(nb, l, d, cidx(1));
            partner = arith::SelectOp::create(nb, l, first, up, down);
          } else {
            first = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult, i, cidx(half));
            Value jHigh = arith::SubIOp::create(nb, l, i, cidx(half));
            j = arith::SelectOp::create(nb, l, first, i, jHigh);
            Value up = arith::AddIOp::create(nb, l, d, cidx(half));
            Value down = arith::SubIOp::create(nb, l, d, cidx(half));
            partner = arith::SelectOp::create(nb, l, first, up, down);
          }
          j = arith::SelectOp::create(nb, l, inRotary, j, cidx(0));
          partner = arith::SelectOp::create(nb, l, inRotary, partner, d);
          Value c = tensor::ExtractOp::create(nb, l, cosT, ValueRange{bi, si, j});
          Value s = tensor::ExtractOp::create(nb, l, sinT, ValueRange{bi, si, j});
          Value other =
              toF32(nb, l, tensor::ExtractOp::create(nb, l, x, ValueRange{bi, si, partner}));
          if (transform)
            other = transform(nb, l, other, bi, si, partner);
          // First of a pair: x*cos - x_partner*sin; second: x*cos + x_partner*sin.
          Value t1 = roundTo(nb, l, arith::MulFOp::create(nb, l, self, c), elem);
          Value t2 = roundTo(nb, l, arith::MulFOp::create(nb, l, other, s), elem);
          Value neg = arith::NegFOp::create(nb, l, t2);
          Value t2s = arith::SelectOp::create(nb, l, first, neg, t2);
          Value rot = arith::AddFOp::create(nb, l, t1, t2s);
          Value result = arith::SelectOp::create(nb, l, inRotary, rot, self);
          linalg::YieldOp::create(nb, l, fromF32(nb, l, result, elem));
        });
    return rotated.getResult(0);
  }

  FailureOr<SmallVector<Value>> lowerAttention(AttentionOp a) {
    Value layer = kvLayerOf(a);
    if (!layer)
      return failure();
    if (!a.getScale())
      return a.emitError() << "attention: scale unknown (imported without weight data)";
    auto qType = cast<RankedTensorType>(a.getQ().getType());
    auto outType = cast<RankedTensorType>(a.getResult().getType());
    Type elem = qType.getElementType();
    if (qType.getRank() != 3 || kernelDtypeCode(elem) < 0)
      return a.emitError() << "attention: q must be a rank-3 float tensor";
    Value qp = rawPointer(a.getQ()), kp = rawPointer(a.getK()), vp = rawPointer(a.getV());
    Value batch = tensor::DimOp::create(b, loc, a.getQ(), 0);
    Value seq = tensor::DimOp::create(b, loc, a.getQ(), 1);
    Value out = allocOutput(outType, dynamicSizesOf(a.getQ()));
    SmallVector<Type> params{ptrType, b.getI64Type(), ptrType, ptrType, ptrType, ptrType, b.getI32Type(),
                             b.getI64Type(), b.getI64Type(), b.getI64Type(), b.getI64Type(), b.getI64Type(),
                             b.getF32Type(), b.getI64Type()};
    int64_t window = a.getSlidingWindow() ? int64_t(*a.getSlidingWindow()) : 0;
    SmallVector<Value> args{ctx, layer, qp, kp, vp, pointerOf(out), i32(kernelDtypeCode(elem)),
                            toI64(batch), toI64(seq), i64(a.getNumHeads()), i64(a.getNumKvHeads()),
                            i64(a.getHeadDim()),
                            arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(a.getScale()->convertToDouble()))),
                            i64(window)};
    // Soft-capped scores (Gemma 2) take the entry with the cap; the others keep the older one, so
    // that their code is what it was.
    std::optional<APFloat> cap = a.getSoftcap();
    if (cap) {
      params.push_back(b.getF32Type());
      args.push_back(arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(cap->convertToDouble()))));
    }
    func::FuncOp kernel = declare(cap ? HELM_CONTRACT_SYMBOL(helm_rt_attention_capped)
                                      : HELM_CONTRACT_SYMBOL(helm_rt_attention),
                                  params, {});
    func::CallOp::create(b, loc, kernel, args);
    return SmallVector<Value>{asTensor(out, /*writable=*/true)};
  }

  Value lowerSwiglu(SwigluOp s) {
    auto type = cast<RankedTensorType>(s.getType());
    Type elem = type.getElementType();
    return elementwise({s.getGate(), s.getUp()}, {}, type, s.getGate(),
                       [&](OpBuilder &nb, Location l, ValueRange v) {
                         Value one = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(1.0f));
                         Value e = math::ExpOp::create(nb, l, arith::NegFOp::create(nb, l, v[0]));
                         Value sig = arith::DivFOp::create(
                             nb, l, v[0], arith::AddFOp::create(nb, l, one, e));
                         Value act = roundTo(nb, l, sig, elem);
                         return arith::MulFOp::create(nb, l, act, v[1]).getResult();
                       });
  }

  static Value f32(OpBuilder &nb, Location l, float v) {
    return arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(v));
  }

  /// gelu_tanh(g) * up with the activation rounded to the dtype, as swiglu's.
  Value lowerGeglu(GegluOp g) {
    auto type = cast<RankedTensorType>(g.getType());
    Type elem = type.getElementType();
    return elementwise({g.getGate(), g.getUp()}, {}, type, g.getGate(),
                       [&](OpBuilder &nb, Location l, ValueRange v) {
                         Value x = v[0];
                         // 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
                         Value x2 = arith::MulFOp::create(nb, l, x, x);
                         Value inner = arith::AddFOp::create(
                             nb, l, f32(nb, l, 1.0f), arith::MulFOp::create(nb, l, f32(nb, l, 0.044715f), x2));
                         Value arg = arith::MulFOp::create(
                             nb, l, arith::MulFOp::create(nb, l, f32(nb, l, 0.7978845608028654f), x), inner);
                         Value t = arith::AddFOp::create(nb, l, f32(nb, l, 1.0f), math::TanhOp::create(nb, l, arg));
                         Value act = arith::MulFOp::create(nb, l, arith::MulFOp::create(nb, l, f32(nb, l, 0.5f), x), t);
                         return arith::MulFOp::create(nb, l, roundTo(nb, l, act, elem), v[1]).getResult();
                       });
  }

  //===--------------------------------------------------------------------===//
  // The C signature: (ctx, ids*, positions*, logits_out*, B, S) -> ()
  //===--------------------------------------------------------------------===//

  LogicalResult rewriteSignature() {
    return rewriteStageSignature(
        stage, [&](OpBuilder &, Location l, Value result, Value out, bool returnsLogits) {
          loc = l;
          auto type = cast<RankedTensorType>(result.getType());
          if (returnsLogits && !type.getElementType().isF32()) {
            auto f32Type = RankedTensorType::get(type.getShape(), b.getF32Type());
            b.setInsertionPoint(result.getParentBlock()->getTerminator());
            result = elementwise({result}, {}, f32Type, result,
                                 [](OpBuilder &, Location, ValueRange v) { return v[0]; });
          }
          b.setInsertionPoint(result.getParentBlock()->getTerminator());
          bufferization::MaterializeInDestinationOp::create(b, loc, TypeRange{}, result, out,
                                                            /*restrict=*/true, /*writable=*/true);
          return success();
        });
  }
};

struct LowerToLinalgPass : helm::impl::LowerToLinalgBase<LowerToLinalgPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseMap<StringAttr, int64_t> tensorIds = existingTensorIds(module);
    SmallVector<func::FuncOp> stages;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(HelmDialect::StageAttrHelper::getNameStr()))
        stages.push_back(f);
    if (stages.empty()) {
      module.emitError() << "no stage functions to lower; run helm-stage-split first";
      return signalPassFailure();
    }
    HoistedTables hoisted;
    for (func::FuncOp stage : stages) {
      for (func::FuncOp unit : unitFunctionsCalledBy(stage))
        if (failed(StageLowering(unit, tensorIds, hoisted).run()))
          return signalPassFailure();
      if (failed(StageLowering(stage, tensorIds, hoisted).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
