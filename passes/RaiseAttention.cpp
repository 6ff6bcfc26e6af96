//===- RaiseAttention.cpp - decomposed causal GQA attention to helm.attention ----===//
#include "passes/OnnxMatchers.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace helm {
#define GEN_PASS_DEF_RAISEATTENTION
#include "passes/Passes.h.inc"
} // namespace helm

using namespace mlir;
using namespace helm;

namespace {

/// One of q, k, v traced from the attention core back to its projection.
struct Operand {
  Value projection;                  // [B, S, heads * head_dim] output of helm.linear / helm.split
  SmallVector<Operation *> chain;    // helm.rms_norm / helm.rope from the projection outwards
  Value past, concat;                // KV cache input and the Concat that appends to it
  double scale = 1.0;                // scalar factors met on the way
  int64_t headDim = 0;               // static last dim of the 4-D value at the core, if known
};

bool isProjection(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<LinearOp, SplitOp>(def);
}

/// Peels layout ops and scalar Mul/Div, recording the factor.
Value peel(Value v, double &scale) {
  while (true) {
    v = skipLayout(v);
    OnnxNodeOp op = anyProducer(v);
    if (op && (op.is("Mul") || op.is("Div"))) {
      auto c = constantScalar(op.getInputs()[1]);
      if (c && *c != 0) {
        scale *= op.is("Mul") ? *c : 1.0 / *c;
        v = op.getInputs()[0];
        continue;
      }
      if (op.is("Mul"))
        if (auto c0 = constantScalar(op.getInputs()[0])) {
          scale *= *c0;
          v = op.getInputs()[1];
          continue;
        }
    }
    return v;
  }
}

struct RaiseAttentionPass : helm::impl::RaiseAttentionBase<RaiseAttentionPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> softmaxes;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Softmax"))
        softmaxes.push_back(op);
    });
    for (OnnxNodeOp softmax : softmaxes)
      if (failed(raise(softmax)))
        return signalPassFailure();
  }

  bool trace(Value v, Operand &out, bool allowCache) {
    v = peel(v, out.scale);
    if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.getRank() == 4 && !t.isDynamicDim(3))
      out.headDim = t.getDimSize(3);
    if (allowCache)
      if (OnnxNodeOp concat = producer(v, "Concat"); concat && concat.getInputs().size() == 2) {
        Value past = skipCasts(concat.getInputs()[0]);
        if (!isa<BlockArgument>(past))
          return false;
        out.past = past;
        out.concat = concat.getResult(0);
        v = peel(concat.getInputs()[1], out.scale);
      }
    while (!isProjection(v)) {
      Operation *def = v.getDefiningOp();
      if (auto rope = dyn_cast_or_null<RopeOp>(def)) {
        out.chain.push_back(rope);
        v = peel(rope.getInput(), out.scale);
      } else if (auto norm = dyn_cast_or_null<RmsNormOp>(def)) {
        out.chain.push_back(norm);
        v = peel(norm.getInput(), out.scale);
      } else {
        return false;
      }
    }
    std::reverse(out.chain.begin(), out.chain.end());
    out.projection = v;
    return true;
  }

  /// Rebuilds rms_norm/rope of a chain on the 3-D projection output.
  Value rebuild(OpBuilder &b, const Operand &o, int64_t headDim) {
    Value x = o.projection;
    for (Operation *op : o.chain) {
      if (auto norm = dyn_cast<RmsNormOp>(op))
        x = b.create<RmsNormOp>(norm.getLoc(), x.getType(), x, norm.getGamma(), norm.getEpsilonAttr());
      else if (auto rope = dyn_cast<RopeOp>(op))
        x = b.create<RopeOp>(rope.getLoc(), x.getType(), x, rope.getPositions(),
                             b.getI64IntegerAttr(headDim), rope.getRotaryDimAttr(),
                             rope.getThetaAttr(), rope.getStyleAttr());
    }
    return x;
  }

  LogicalResult raise(OnnxNodeOp softmax) {
    // Scores: (mask Add / Where) over (scale) over MatMul(q, k^T).
    double scale = 1.0;
    Value s = peel(skipCasts(softmax.getInputs()[0]), scale);
    OnnxNodeOp scores;
    for (int depth = 0; depth < 4 && !scores; ++depth) {
      OnnxNodeOp op = anyProducer(s);
      if (!op)
        break;
      if (op.is("MatMul")) {
        scores = op;
      } else if (op.is("Add") || op.is("Where")) {
        // Continue along the operand that leads to a MatMul; the other one is the mask.
        Value next;
        for (Value in : op.getInputs()) {
          double f = 1.0;
          Value p = peel(skipCasts(in), f);
          if (producer(p, "MatMul") || producer(p, "Add") || producer(p, "Where")) {
            next = in;
            break;
          }
        }
        if (!next)
          break;
        s = peel(skipCasts(next), scale);
      } else {
        break;
      }
    }
    if (!scores)
      return success(); // Not attention; an unrelated Softmax is reported later if it survives.

    // Probabilities (through NaN guards and casts) into MatMul(p, v).
    Value probs = softmax.getResult(0);
    OnnxNodeOp pv;
    for (int depth = 0; depth < 4 && !pv; ++depth) {
      OnnxNodeOp next;
      for (Operation *user : probs.getUsers())
        if (auto u = dyn_cast<OnnxNodeOp>(user)) {
          if (u.is("MatMul") && u.getInputs()[0] == probs)
            pv = u;
          else if (u.is("Cast") || (u.is("Where") && u.getInputs()[2] == probs))
            next = u;
        }
      if (!pv && next)
        probs = next.getResult(0);
      else
        break;
    }
    if (!pv)
      return nodeError(softmax, "attention softmax whose probabilities feed no MatMul with values");

    Operand q, k, v;
    if (!trace(scores.getInputs()[0], q, false) || !trace(scores.getInputs()[1], k, true) ||
        !trace(pv.getInputs()[1], v, true))
      return nodeError(scores, "cannot trace the attention's q, k and v back to projections");
    if (static_cast<bool>(k.past) != static_cast<bool>(v.past))
      return nodeError(scores, "KV cache on only one of key and value");

    // Head geometry: from the rotary/norm ops or the 4-D types at the core.
    int64_t headDim = q.headDim ? q.headDim : k.headDim ? k.headDim : v.headDim;
    for (Operation *op : q.chain)
      if (auto norm = dyn_cast<RmsNormOp>(op))
        headDim = headDim ? headDim : shapeOf(norm.getGamma())[0];
    auto width = [](Value p) { return shapeOf(p).empty() ? int64_t(0) : shapeOf(p).back(); };
    if (!headDim || width(q.projection) % headDim || width(k.projection) % headDim ||
        width(k.projection) != width(v.projection))
      return nodeError(scores, "cannot determine the head dimension of the attention");
    int64_t heads = width(q.projection) / headDim, kvHeads = width(k.projection) / headDim;
    double totalScale = scale * q.scale * k.scale;

    // The output projection reads the attention result through Transpose/Reshape.
    LinearOp outProj;
    for (Operation *user : pv.getResult(0).getUsers()) {
      SmallVector<Operation *> work{user};
      while (!work.empty() && !outProj) {
        Operation *op = work.pop_back_val();
        if (auto l = dyn_cast<LinearOp>(op))
          outProj = skipLayout(l.getInput()) == pv.getResult(0) ? l : LinearOp();
        else if (auto n = dyn_cast<OnnxNodeOp>(op); n && skipLayout(n.getResult(0)) == pv.getResult(0))
          for (Operation *u : n.getResult(0).getUsers())
            work.push_back(u);
      }
    }
    if (!outProj)
      return nodeError(pv, "attention output does not reach an output projection");

    OpBuilder b(outProj);
    Value q3 = rebuild(b, q, headDim), k3 = rebuild(b, k, headDim), v3 = rebuild(b, v, headDim);
    Type resultType = activationType(elementTypeOf(q3), heads * headDim);
    SmallVector<Type> presentTypes;
    if (k.past) {
      auto cacheType = [&](Value past) {
        auto t = cast<RankedTensorType>(past.getType());
        SmallVector<int64_t> shape(t.getShape());
        shape[2] = ShapedType::kDynamic;
        return RankedTensorType::get(shape, t.getElementType());
      };
      presentTypes = {cacheType(k.past), cacheType(v.past)};
    }
    auto attention = b.create<AttentionOp>(
        scores.getLoc(), resultType, presentTypes, q3, k3, v3, k.past, v.past,
        b.getI64IntegerAttr(heads), b.getI64IntegerAttr(kvHeads), b.getI64IntegerAttr(headDim),
        b.getF64FloatAttr(totalScale));
    outProj.getInputMutable().assign(attention.getResult());
    if (k.past) {
      replaceValue(k.concat, attention.getPresentKey(), attention);
      replaceValue(v.concat, attention.getPresentValue(), attention);
    }
    return success();
  }
};
} // namespace
