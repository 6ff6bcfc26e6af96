//===- RaiseRope.cpp - rotary embedding to helm.rope -----------------------------===//
#include "passes/OnnxMatchers.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace helm {
#define GEN_PASS_DEF_RAISEROPE
#include "passes/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace helm {

std::optional<double> thetaFromInvFreq(ArrayRef<double> invFreq, int64_t rotaryDim, int precisionBits) {
  if (invFreq.size() < 2 || std::fabs(invFreq[0] - 1.0) > 1e-6)
    return std::nullopt;
  // Least-squares fit of log(inv_freq[i]) = -(2i/d) log(theta) through the origin.
  double num = 0, den = 0;
  for (size_t i = 1; i < invFreq.size(); ++i) {
    if (invFreq[i] <= 0)
      return std::nullopt;
    double slope = -2.0 * double(i) / double(rotaryDim);
    num += slope * std::log(invFreq[i]);
    den += slope * slope;
  }
  double theta = std::exp(num / den);
  for (size_t i = 0; i < invFreq.size(); ++i) {
    double expected = std::pow(theta, -2.0 * double(i) / double(rotaryDim));
    if (std::fabs(invFreq[i] - expected) > std::ldexp(4.0, -precisionBits) * expected)
      return std::nullopt;
  }
  // Keep the significant digits the constant's precision can carry (float32: 5, float16: 3).
  int digits = precisionBits >= 23 ? 5 : precisionBits >= 10 ? 3 : 2;
  double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(theta)));
  return std::round(theta * scale) / scale;
}

} // namespace helm

namespace {

/// Walks back from `v` (at most `budget` ops) and collects the first rotary-frequency-like constant
/// (1-D float starting at 1, decreasing) and an integer graph input named like position ids.
void findRotarySources(Value v, std::optional<SmallVector<double>> &invFreq, int &precisionBits,
                       Value &positions) {
  SmallVector<Value> stack{v};
  llvm::SmallPtrSet<Operation *, 32> seen;
  int budget = 64;
  while (!stack.empty() && budget-- > 0) {
    Value cur = stack.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(cur)) {
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      auto name = func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "helm.name") : StringAttr();
      if (name && name.getValue().contains("position") && isa<IntegerType>(elementTypeOf(cur)))
        positions = cur;
      continue;
    }
    Operation *def = cur.getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (isa<ConstantOp>(def)) {
      auto values = constantValues(cur);
      if (!invFreq && values && values->size() >= 2 && isa<FloatType>(elementTypeOf(cur)) &&
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

/// Slice(x, start, end) on the last axis with step 1; returns start/end (end clamped to `dim`).
bool lastAxisSlice(OnnxNodeOp slice, Value x, int64_t dim, int64_t &start, int64_t &end) {
  if (!slice || !slice.is("Slice") || slice.getInputs()[0] != x || slice.getInputs().size() < 3)
    return false;
  auto s = constantScalar(slice.getInputs()[1]), e = constantScalar(slice.getInputs()[2]);
  if (!s || !e)
    return false;
  if (slice.getInputs().size() > 3) {
    auto axis = constantScalar(slice.getInputs()[3]);
    int64_t rank = int64_t(shapeOf(x).size());
    if (!axis || !(*axis == -1 || (rank > 0 && *axis == double(rank - 1))))
      return false;
  }
  if (slice.getInputs().size() > 4 && !isConstant(slice.getInputs()[4], 1.0))
    return false;
  start = int64_t(*s);
  end = std::min<double>(*e, double(dim)) < 0 ? int64_t(*e) + dim : int64_t(std::min<double>(*e, double(dim)));
  return true;
}

struct RaiseRopePass : helm::impl::RaiseRopeBase<RaiseRopePass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> adds;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Add"))
        adds.push_back(op);
    });
    for (OnnxNodeOp add : adds)
      if (failed(raise(add)))
        return signalPassFailure();
  }

  /// rotate_half(x) = Concat(-x[..., h:], x[..., :h]); returns x and h, or null.
  Value matchRotateHalf(Value v, int64_t &half) {
    OnnxNodeOp concat = producer(v, "Concat");
    if (!concat || concat.getInputs().size() != 2 || concat.getIntAttr("axis", 0) != -1)
      if (!concat || concat.getInputs().size() != 2 ||
          concat.getIntAttr("axis", 0) != int64_t(shapeOf(v).size()) - 1)
        return {};
    OnnxNodeOp neg = producer(concat.getInputs()[0], "Neg");
    if (!neg)
      return {};
    OnnxNodeOp hi = producer(neg.getInputs()[0], "Slice");
    OnnxNodeOp lo = producer(concat.getInputs()[1], "Slice");
    if (!hi || !lo || hi.getInputs()[0] != lo.getInputs()[0])
      return {};
    Value x = hi.getInputs()[0];
    auto shape = shapeOf(x);
    bool known = !shape.empty() && !ShapedType::isDynamic(shape.back());
    int64_t d = known ? shape.back() : INT64_MAX, hs, he, ls, le;
    if (!lastAxisSlice(hi, x, d, hs, he) || !lastAxisSlice(lo, x, d, ls, le))
      return {};
    if (ls != 0 || le != hs || hs <= 0 || (known && (he != d || 2 * hs != d)) || (!known && he < 2 * hs))
      return {};
    half = hs;
    return x;
  }

  LogicalResult raise(OnnxNodeOp add) {
    // x * cos + rotate_half(x) * sin, in any operand order.
    for (int swapAdd = 0; swapAdd < 2; ++swapAdd) {
      OnnxNodeOp cosMul = producer(add.getInputs()[swapAdd], "Mul");
      OnnxNodeOp sinMul = producer(add.getInputs()[1 - swapAdd], "Mul");
      if (!cosMul || !sinMul)
        continue;
      for (int swapSin = 0; swapSin < 2; ++swapSin) {
        int64_t half = 0;
        Value x = matchRotateHalf(sinMul.getInputs()[swapSin], half);
        if (!x)
          continue;
        Value sin = sinMul.getInputs()[1 - swapSin];
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
        findRotarySources(cos, invFreq, precisionBits, positions);
        if (!invFreq)
          return nodeError(add, "rotary embedding whose frequencies are not a constant inv_freq");
        int64_t rotaryDim = 2 * half;
        if (int64_t(invFreq->size()) * 2 != rotaryDim)
          return nodeError(add, "rotary inv_freq has " + llvm::Twine(invFreq->size()) +
                                    " entries for a rotation over " + llvm::Twine(rotaryDim) +
                                    " channels");
        auto theta = thetaFromInvFreq(*invFreq, rotaryDim, precisionBits);
        if (!theta)
          return nodeError(add, "rotary frequencies do not follow theta^(-2i/d); scaled rotary "
                                "embeddings are not supported");
        OpBuilder b(add);
        auto rope = b.create<RopeOp>(add.getLoc(), x.getType(), x, positions,
                                     b.getI64IntegerAttr(rotaryDim), b.getI64IntegerAttr(rotaryDim),
                                     b.getF64FloatAttr(*theta),
                                     RopeStyleAttr::get(b.getContext(), RopeStyle::half));
        replaceValue(add.getResult(0), rope.getResult());
        return success();
      }
    }
    return success();
  }
};
} // namespace
