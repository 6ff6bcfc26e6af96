//===- RaiseRope.cpp - rotary embedding to helm.rope -----------------------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace helm {
#define GEN_PASS_DEF_RAISEROPE
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;


namespace {

/// Walks back from `v` (at most `budget` ops) and collects the first rotary-frequency-like constant
/// (1-D float starting at 1, decreasing) and an integer graph input named like position ids.
/// `unreadable` receives the length of a 1-D float weight that looks like inv_freq but whose bytes
/// are not available (shape-only import), 0 otherwise.
void findRotarySources(Value v, std::optional<SmallVector<double>> &invFreq, int &precisionBits,
                       Value &positions, int64_t *unreadable = nullptr) {
  SmallVector<Value> stack{v};
  llvm::SmallPtrSet<Operation *, 32> seen;
  int budget = 64;
  while (!stack.empty() && budget-- > 0) {
    Value cur = stack.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(cur)) {
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      auto name = func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), HelmDialect::NameAttrHelper::getNameStr()) : StringAttr();
      if (name && name.getValue().contains("position") && isa_and_nonnull<IntegerType>(elementTypeOf(cur)))
        positions = cur;
      continue;
    }
    Operation *def = cur.getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (isa<ConstantOp, WeightOp>(def)) {
      // inv_freq: a constant, or a weight when head_dim > 128 puts it over the constant limit.
      auto values = isa<ConstantOp>(def) ? constantValues(cur)
                    : shapeOf(cur).size() == 1 ? weightValues(cast<WeightOp>(def), 1024)
                                               : std::nullopt;
      if (!values && unreadable && isa<WeightOp>(def) && shapeOf(cur).size() == 1 &&
          isa_and_nonnull<FloatType>(elementTypeOf(cur)))
        *unreadable = shapeOf(cur)[0];
      if (!invFreq && values && values->size() >= 2 && isa_and_nonnull<FloatType>(elementTypeOf(cur)) &&
          std::fabs((*values)[0] - 1.0) < 1e-6 && (*values)[1] < (*values)[0])
      {
        invFreq = values;
        auto ft = cast<FloatType>(elementTypeOf(cur));
        precisionBits = int(ft.getFPMantissaWidth()) - 1;
      }
      continue;
    }
    for (Value operand : def->getOperands())
      stack.push_back(operand);
  }
}

/// True if `axis` (a constant) names the last axis of `x`; for an unranked `x` the 4-D
/// [batch, heads, seq, head_dim] layout every exporter uses at this point is assumed.
bool isLastAxis(Value axisValue, Value x) {
  auto axis = constantScalar(axisValue);
  if (!axis)
    return false;
  auto rank = int64_t(shapeOf(x).size());
  bool ranked = isa<RankedTensorType>(x.getType());
  return *axis == -1 || (ranked && *axis == double(rank - 1)) || (!ranked && *axis == 3);
}

/// Slice(x, start, end[, axes[, steps]]) along the last axis with step 1, bounds evaluated for a
/// last dimension of `d` (end clamped to d).
bool lastAxisSlice(OnnxNodeOp slice, Value x, int64_t d, int64_t &start, int64_t &end) {
  auto in = slice.getInputs();
  if (in.size() < 3 || in[0] != x)
    return false;
  if (in.size() > 3 && !isLastAxis(in[3], x))
    return false;
  if (in.size() > 4 && !isConstant(in[4], 1.0))
    return false;
  auto s = evalIndex(in[1], x, d), e = evalIndex(in[2], x, d);
  if (!s || !e)
    return false;
  start = *s < 0 ? std::max<int64_t>(*s, -d) + d : std::min(*s, d);
  end = *e < 0 ? std::max<int64_t>(*e, -d) + d : std::min(*e, d);
  return true;
}

/// A recognised rotated copy of x, checked once the rotary width d is known.
struct RotatedForm {
  Value x;
  RopeStyle style = RopeStyle::half;
  OnnxNodeOp first, second; // the two Slices: (upper half, lower half) or (odd lanes, even lanes)
  int64_t concatAxis = 0, concatRank = 0;

  bool check(int64_t d) const {
    bool ranked = isa<RankedTensorType>(x.getType());
    int64_t rank = int64_t(shapeOf(x).size());
    if (style == RopeStyle::half) {
      // Concat(-x[..., d/2:], x[..., :d/2]) on the last axis.
      if (!(concatAxis == -1 || (ranked && concatAxis == rank - 1) || (!ranked && concatAxis == 3)))
        return false;
      int64_t hs, he, ls, le;
      return lastAxisSlice(first, x, d, hs, he) && lastAxisSlice(second, x, d, ls, le) && ls == 0 &&
             le == d / 2 && hs == d / 2 && he == d;
    }
    // Concat(Unsqueeze(-x[..., 1::2], -1), Unsqueeze(x[..., ::2], -1), -1), flattened back.
    if (!(concatAxis == -1 || (ranked && concatAxis == rank)))
      return false;
    return strided(first, 1, d) && strided(second, 0, d);
  }

  /// Slice(x, start, to the end, last axis, step 2).
  bool strided(OnnxNodeOp slice, int64_t start, int64_t d) const {
    auto in = slice.getInputs();
    if (in.size() != 5 || in[0] != x || !isLastAxis(in[3], x) || !isConstant(in[4], 2.0))
      return false;
    auto s = evalIndex(in[1], x, d), e = evalIndex(in[2], x, d);
    return s && e && *s == start && *e >= d;
  }
};

/// rotate_half(x) = Concat(-x[..., h:], x[..., :h]).
bool matchRotateHalf(Value v, RotatedForm &form) {
  OnnxNodeOp concat = producer(v, "Concat");
  if (!concat || concat.getInputs().size() != 2)
    return false;
  OnnxNodeOp neg = producer(concat.getInputs()[0], "Neg");
  OnnxNodeOp hi = neg ? producer(neg.getInputs()[0], "Slice") : OnnxNodeOp();
  OnnxNodeOp lo = producer(concat.getInputs()[1], "Slice");
  if (!hi || !lo || hi.getInputs()[0] != lo.getInputs()[0])
    return false;
  form = {hi.getInputs()[0], RopeStyle::half, hi, lo, concat.getIntAttr("axis", 0), 0};
  return true;
}

/// rotate_every_two(x) = stack(-x[..., 1::2], x[..., ::2]) flattened: Reshape/Flatten of a Concat of
/// two Unsqueezed lanes.
bool matchRotateEveryTwo(Value v, RotatedForm &form) {
  OnnxNodeOp flat = producer(v, "Reshape");
  flat = flat ? flat : producer(v, "Flatten");
  OnnxNodeOp concat = flat ? producer(flat.getInputs()[0], "Concat") : OnnxNodeOp();
  if (!concat || concat.getInputs().size() != 2)
    return false;
  OnnxNodeOp u0 = producer(concat.getInputs()[0], "Unsqueeze");
  OnnxNodeOp u1 = producer(concat.getInputs()[1], "Unsqueeze");
  OnnxNodeOp neg = u0 ? producer(u0.getInputs()[0], "Neg") : OnnxNodeOp();
  OnnxNodeOp odd = neg ? producer(neg.getInputs()[0], "Slice") : OnnxNodeOp();
  OnnxNodeOp even = u1 ? producer(u1.getInputs()[0], "Slice") : OnnxNodeOp();
  if (!odd || !even || odd.getInputs()[0] != even.getInputs()[0])
    return false;
  form = {odd.getInputs()[0], RopeStyle::interleaved, odd, even, concat.getIntAttr("axis", 0), 0};
  return true;
}

struct RaiseRopePass : helm::impl::RaiseRopeBase<RaiseRopePass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> candidates;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Add") || op.is("RotaryEmbedding") || op.is("RotaryEmbedding", "com.microsoft"))
        candidates.push_back(op);
    });
    for (OnnxNodeOp op : candidates)
      if (failed(op.is("Add") ? raiseDecomposed(op) : raiseFused(op)))
        return signalPassFailure();
  }

  RopeOp create(OnnxNodeOp at, Value x, Value positions, int64_t headDim, int64_t rotaryDim,
                std::optional<double> theta, RopeStyle style) {
    OpBuilder b(at);
    auto rope = RopeOp::create(b, at.getLoc(), x.getType(), x, positions,
                                 b.getI64IntegerAttr(headDim), b.getI64IntegerAttr(rotaryDim),
                                 theta ? b.getF64FloatAttr(*theta) : FloatAttr(),
                                 RopeStyleAttr::get(b.getContext(), style), DenseF32ArrayAttr());
    replaceValue(at.getResult(0), rope.getResult());
    return rope;
  }

  /// x * cos + rotate_half(x) * sin, in any operand order.
  LogicalResult raiseDecomposed(OnnxNodeOp add) {
    for (int swapAdd = 0; swapAdd < 2; ++swapAdd) {
      OnnxNodeOp cosMul = producer(add.getInputs()[swapAdd], "Mul");
      OnnxNodeOp sinMul = producer(add.getInputs()[1 - swapAdd], "Mul");
      if (!cosMul || !sinMul)
        continue;
      for (int swapSin = 0; swapSin < 2; ++swapSin) {
        // The rotated copy: rotate_half (Concat of halves) or rotate_every_two (stacked lanes).
        Value rotated = sinMul.getInputs()[swapSin];
        RotatedForm form;
        if (!matchRotateHalf(rotated, form) && !matchRotateEveryTwo(rotated, form))
          continue;
        Value x = form.x;
        Value cos;
        if (cosMul.getInputs()[0] == x)
          cos = cosMul.getInputs()[1];
        else if (cosMul.getInputs()[1] == x)
          cos = cosMul.getInputs()[0];
        else
          continue;
        std::optional<SmallVector<double>> invFreq;
        Value positions;
        int precisionBits = 23;
        int64_t unreadable = 0;
        findRotarySources(cos, invFreq, precisionBits, positions, &unreadable);
        if (!invFreq && !unreadable)
          return nodeError(add, "rotary embedding whose frequencies are not a constant inv_freq");
        int64_t rotaryDim = 2 * (invFreq ? int64_t(invFreq->size()) : unreadable);
        auto shape = shapeOf(x);
        if (!shape.empty() && !ShapedType::isDynamic(shape.back()) && shape.back() != rotaryDim)
          return nodeError(add, "partial rotary embedding (" + llvm::Twine(rotaryDim) + " of " +
                                    llvm::Twine(shape.back()) + " channels) is not supported in "
                                    "decomposed form");
        if (!form.check(rotaryDim))
          continue;
        // Without the weight bytes (shape-only import) theta stays unknown; planning needs none.
        std::optional<double> theta;
        if (invFreq) {
          theta = thetaFromInvFreq(*invFreq, rotaryDim, precisionBits);
          if (!theta)
            return nodeError(add, "rotary frequencies do not follow theta^(-2i/d); scaled rotary "
                                  "embeddings are not supported");
        }
        create(add, x, positions, rotaryDim, rotaryDim, theta, form.style);
        return success();
      }
    }
    return success();
  }

  /// ONNX 23 RotaryEmbedding(X, cos, sin[, position_ids]) and com.microsoft
  /// RotaryEmbedding(X, position_ids, cos_cache, sin_cache).
  LogicalResult raiseFused(OnnxNodeOp op) {
    bool contrib = op.getDomain() == "com.microsoft";
    auto in = op.getInputs();
    if (in.size() < (contrib ? 4u : 3u))
      return nodeError(op, "RotaryEmbedding needs its cos and sin inputs");
    Value x = in[0];
    Value cos = contrib ? in[2] : in[1], sin = contrib ? in[3] : in[2];
    Value positions = contrib ? in[1] : in.size() > 3 ? in[3] : Value();
    if (positions && isa<NoneType>(positions.getType()))
      positions = Value();
    auto shape = shapeOf(x);
    auto cacheShape = shapeOf(skipCasts(cos)); // [positions, rotary_dim / 2]
    int64_t headDim = 0;
    if (!shape.empty() && !ShapedType::isDynamic(shape.back())) {
      headDim = shape.back();
    } else if (cacheShape.size() == 2 && op.getIntAttr("rotary_embedding_dim", 0) == 0) {
      // Unranked input (no value_info): a full-width rotation over [batch, heads, seq, head_dim].
      headDim = 2 * cacheShape[1];
      shape = {};
    } else {
      return nodeError(op, "RotaryEmbedding input needs a static last dimension");
    }
    if (shape.size() == 3) {
      int64_t heads = op.getIntAttr("num_heads", 0);
      // Without num_heads (ONNX Runtime GenAI's fp16 models) the contrib op rotates whole heads of
      // twice the cache's width: head size = 2 * cos_cache.shape[1], num_heads = hidden / that.
      if (contrib && heads == 0 && op.getIntAttr("rotary_embedding_dim", 0) == 0 && cacheShape.size() == 2 &&
          !ShapedType::isDynamic(cacheShape[1]) && cacheShape[1] > 0 && cacheShape[1] <= headDim &&
          headDim % (2 * cacheShape[1]) == 0)
        heads = headDim / (2 * cacheShape[1]);
      if (heads <= 0 || headDim % heads)
        return nodeError(op, "3-D RotaryEmbedding input needs num_heads");
      headDim /= heads;
    }
    int64_t rotaryDim = op.getIntAttr("rotary_embedding_dim", 0);
    rotaryDim = rotaryDim ? rotaryDim : headDim;
    if (rotaryDim <= 0 || rotaryDim > headDim || rotaryDim % 2)
      return nodeError(op, "rotary_embedding_dim " + llvm::Twine(rotaryDim) +
                               " must be even and at most the head dimension " + llvm::Twine(headDim));
    RopeStyle style = op.getIntAttr("interleaved", 0) ? RopeStyle::interleaved : RopeStyle::half;
    if (contrib && op.getFloatAttr("scale", 1.0) != 1.0)
      return nodeError(op, "RotaryEmbedding with a position scale is not supported");

    std::optional<double> theta;
    if (positions) {
      // cos/sin are caches indexed by position.
      int64_t half = rotaryDim / 2;
      auto c = cacheValues(cos, 3 * half), s = cacheValues(sin, 3 * half);
      if (!c || !s) {
        if (!traceWeight(cos) || !traceWeight(sin))
          return nodeError(op, "cannot read the rotary cos/sin caches");
        create(op, x, positions, headDim, rotaryDim, std::nullopt, style); // shape-only import
        return success();
      }
      theta = thetaFromCaches(*c, *s, half, mantissaBits(cos));
    } else {
      // cos/sin were computed from positions in the graph.
      std::optional<SmallVector<double>> invFreq;
      int precisionBits = 23;
      int64_t unreadable = 0;
      findRotarySources(cos, invFreq, precisionBits, positions, &unreadable);
      if (!invFreq && unreadable * 2 == rotaryDim) {
        create(op, x, positions, headDim, rotaryDim, std::nullopt, style); // shape-only import
        return success();
      }
      if (!invFreq || int64_t(invFreq->size()) * 2 != rotaryDim)
        return nodeError(op, "rotary cos/sin do not come from a constant inv_freq of " +
                                 llvm::Twine(rotaryDim / 2) + " entries");
      theta = thetaFromInvFreq(*invFreq, rotaryDim, precisionBits);
    }
    if (!theta)
      return nodeError(op, "rotary frequencies do not follow theta^(-2i/d); scaled rotary "
                           "embeddings are not supported");
    create(op, x, positions, headDim, rotaryDim, *theta, style);
    return success();
  }
};
} // namespace
