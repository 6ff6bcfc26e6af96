//===- RaiseSplit.cpp - slices of a fused projection to helm.split ---------------===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace helm {
#define GEN_PASS_DEF_RAISESPLIT
#include "passes/raise/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

bool isLastAxis(double axis, Value x) {
  auto rank = int64_t(shapeOf(x).size());
  return axis == -1 || (rank > 0 && axis == double(rank - 1));
}

struct RaiseSplitPass : helm::impl::RaiseSplitBase<RaiseSplitPass> {
  void runOnOperation() override {
    SmallVector<LinearOp> linears;
    getOperation().walk([&](LinearOp op) { linears.push_back(op); });
    for (LinearOp linear : linears) {
      raiseSlices(linear);
      raiseSplitOps(linear);
    }
  }

  /// Slice users that tile [0, N) of the last axis.
  void raiseSlices(LinearOp linear) {
    Value x = linear.getResult();
    int64_t n = linear.getOutFeatures();
    std::map<int64_t, std::pair<int64_t, OnnxNodeOp>> pieces; // start -> (end, slice)
    for (Operation *user : x.getUsers()) {
      auto slice = dyn_cast<OnnxNodeOp>(user);
      if (!slice || !slice.is("Slice"))
        continue;
      auto in = slice.getInputs();
      if (in.size() < 4 || in[0] != x)
        return;
      auto start = constantScalar(in[1]), end = constantScalar(in[2]), axis = constantScalar(in[3]);
      if (!start || !end || !axis || !isLastAxis(*axis, x) ||
          (in.size() > 4 && !isConstant(in[4], 1.0)))
        return;
      auto s0 = asIndex(*start), e0 = asIndex(*end);
      if (!s0 || !e0)
        return;
      int64_t s = *s0, e = std::min(*e0, n);
      if (s < 0 || e <= s || pieces.count(s))
        return;
      pieces[s] = {e, slice};
    }
    if (pieces.size() < 2)
      return;
    SmallVector<int64_t> sizes;
    SmallVector<OnnxNodeOp> slices;
    int64_t at = 0;
    for (auto &[start, piece] : pieces) {
      if (start != at)
        return;
      sizes.push_back(piece.first - start);
      slices.push_back(piece.second);
      at = piece.first;
    }
    if (at != n)
      return;
    SmallVector<Value> results(slices.size());
    for (auto [i, s] : llvm::enumerate(slices))
      results[i] = s.getResult(0);
    emitSplit(linear, sizes, results);
  }

  /// An ONNX Split of the projection along the last axis.
  void raiseSplitOps(LinearOp linear) {
    Value x = linear.getResult();
    int64_t n = linear.getOutFeatures();
    for (Operation *user : llvm::make_early_inc_range(x.getUsers())) {
      auto split = dyn_cast<OnnxNodeOp>(user);
      if (!split || !split.is("Split") || split.getInputs()[0] != x ||
          !isLastAxis(double(split.getIntAttr("axis", 0)), x))
        continue;
      SmallVector<int64_t> sizes;
      if (split.getInputs().size() > 1 && !isa<NoneType>(split.getInputs()[1].getType())) {
        auto v = constantValues(split.getInputs()[1]);
        if (!v)
          continue;
        for (double s : *v) {
          if (!(s >= 1 && s <= double(n)))
            break;
          sizes.push_back(int64_t(s));
        }
      } else if (auto a = dyn_cast_or_null<DenseI64ArrayAttr>(split.getAttrs().get("split"))) {
        sizes.assign(a.asArrayRef().begin(), a.asArrayRef().end());
      } else {
        int64_t parts = int64_t(split.getNumResults());
        if (n % parts)
          continue;
        sizes.assign(size_t(parts), n / parts);
      }
      int64_t total = 0;
      for (int64_t s : sizes)
        total += s;
      if (total != n || sizes.size() != split.getNumResults())
        continue;
      emitSplit(linear, sizes, SmallVector<Value>(split.getResults()));
    }
  }

  void emitSplit(LinearOp linear, ArrayRef<int64_t> sizes, ArrayRef<Value> replaced) {
    SplitOp split = splitProjection(linear, sizes);
    for (auto [old, now] : llvm::zip(replaced, split.getResults()))
      replaceValue(old, now);
  }
};
} // namespace
