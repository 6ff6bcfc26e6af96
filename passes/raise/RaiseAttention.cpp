//===- RaiseAttention.cpp - decomposed causal GQA attention to helm.attention ----===//
#include "passes/raise/OnnxMatchers.h"
#include "passes/raise/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace helm {
#define GEN_PASS_DEF_RAISEATTENTION
#include "passes/raise/Passes.h.inc"
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

/// A scalar factor of an attention score: a constant, or NaN (unknown) for a one-element weight whose
/// value lives in unread weight data (shape-only import). nullopt when `v` is neither.
std::optional<double> scalarFactor(Value v) {
  if (auto c = constantScalar(v))
    return c;
  WeightOp w = traceWeight(v);
  if (w && cast<ShapedType>(w.getType()).getNumElements() == 1)
    return std::nan("");
  return std::nullopt;
}

/// Peels layout ops and scalar Mul/Div, recording the factor (NaN once any factor is unknown).
Value peel(Value v, double &scale) {
  while (true) {
    v = skipLayout(v);
    OnnxNodeOp op = anyProducer(v);
    if (op && (op.is("Mul") || op.is("Div"))) {
      auto f = scalarFactor(op.getInputs()[1]);
      if (f && *f != 0) {
        scale *= op.is("Mul") ? *f : 1.0 / *f;
        v = op.getInputs()[0];
        continue;
      }
      if (op.is("Mul"))
        if (auto f0 = scalarFactor(op.getInputs()[0])) {
          scale *= *f0;
          v = op.getInputs()[1];
          continue;
        }
    }
    return v;
  }
}

/// The sliding window a mask subgraph applies, if any: `kv > q - W` (Greater(kv, Sub(q, W))) or
/// `q - kv < W` (Less(Sub(q, kv), W)) with a constant W > 0. The rest of the mask is causal and
/// padding, which helm.attention implies.
std::optional<int64_t> slidingWindowOf(Value mask) {
  if (!mask)
    return std::nullopt;
  SmallVector<Value> stack{mask};
  llvm::SmallPtrSet<Operation *, 32> seen;
  int budget = 256;
  while (!stack.empty() && budget-- > 0) {
    OnnxNodeOp op = anyProducer(stack.pop_back_val());
    if (!op || !seen.insert(op).second)
      continue;
    if (op.is("Greater"))
      if (OnnxNodeOp sub = producer(op.getInputs()[1], "Sub"))
        if (auto w = constantScalar(sub.getInputs()[1]); w && *w >= 1 && *w < 1e9)
          return int64_t(*w);
    if (op.is("Less"))
      if (producer(op.getInputs()[0], "Sub"))
        if (auto w = constantScalar(op.getInputs()[1]); w && *w >= 1 && *w < 1e9)
          return int64_t(*w);
    for (Value in : op.getInputs())
      stack.push_back(in);
  }
  return std::nullopt;
}

/// What every attention form reduces to before the common rebuild.
struct Core {
  Operation *anchor = nullptr;       // for diagnostics and the insertion point search
  Value q, k, v;                     // operands to trace
  double scale = 1.0;                // factors met on the score path
  std::optional<double> explicitScale; // a fused op's scale attribute
  Value out;                         // attention output (3-D or 4-D, before o_proj's layout ops)
  Value mask;                        // the additive/boolean mask operand, if any
  std::optional<int64_t> window;     // sliding window from a fused op's attribute
  Value pastKey, pastValue;          // cache inputs of a fused op
  Value presentKey, presentValue;    // cache outputs of a fused op
  int64_t heads = 0, kvHeads = 0;    // from a fused op's attributes
  bool cacheByConcat = true;         // decomposed: past appended with Concat
  // GQA's internal rotary embedding (do_rotary = 1).
  bool rotary = false;
  std::optional<double> rotaryTheta;
  int64_t rotaryHalf = 0;
  RopeStyle rotaryStyle = RopeStyle::half;
};

struct RaiseAttentionPass : helm::impl::RaiseAttentionBase<RaiseAttentionPass> {
  void runOnOperation() override {
    SmallVector<OnnxNodeOp> anchors;
    getOperation().walk([&](OnnxNodeOp op) {
      if (op.is("Softmax") || op.is("Attention") || op.is("GroupQueryAttention", "com.microsoft") ||
          op.is("MultiHeadAttention", "com.microsoft"))
        anchors.push_back(op);
    });
    for (OnnxNodeOp anchor : anchors) {
      Core core;
      LogicalResult matched = anchor.is("Softmax") ? matchDecomposed(anchor, core)
                              : anchor.is("Attention") ? matchOnnx23(anchor, core)
                                                       : matchContrib(anchor, core);
      if (failed(matched))
        return signalPassFailure();
      if (core.anchor && failed(rebuild(core)))
        return signalPassFailure();
    }
  }

  bool trace(Value v, Operand &out, bool allowCache) {
    v = peel(v, out.scale);
    if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.getRank() == 4 && !t.isDynamicDim(3))
      out.headDim = t.getDimSize(3);
    if (allowCache)
      if (OnnxNodeOp concat = producer(v, "Concat"); concat && concat.getInputs().size() == 2) {
        Value past = skipLayout(concat.getInputs()[0]);
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
  Value rebuildChain(OpBuilder &b, const Operand &o, int64_t headDim, const Core &core, bool rotate) {
    Value x = o.projection;
    for (Operation *op : o.chain) {
      if (auto norm = dyn_cast<RmsNormOp>(op))
        x = RmsNormOp::create(b, norm.getLoc(), x.getType(), x, norm.getGamma(), norm.getEpsilonAttr());
      else if (auto rope = dyn_cast<RopeOp>(op))
        x = RopeOp::create(b, rope.getLoc(), x.getType(), x, rope.getPositions(),
                             b.getI64IntegerAttr(headDim), rope.getRotaryDimAttr(),
                             rope.getThetaAttr(), rope.getStyleAttr(), rope.getFreqFactorsAttr());
    }
    if (rotate && core.rotary)
      x = RopeOp::create(b, core.anchor->getLoc(), x.getType(), x, Value(),
                           b.getI64IntegerAttr(headDim), b.getI64IntegerAttr(2 * core.rotaryHalf),
                           core.rotaryTheta ? b.getF64FloatAttr(*core.rotaryTheta) : FloatAttr(),
                           RopeStyleAttr::get(b.getContext(), core.rotaryStyle), DenseF32ArrayAttr());
    return x;
  }

  /// Softmax(QK^T * scale + mask) V, decomposed.
  LogicalResult matchDecomposed(OnnxNodeOp softmax, Core &core) {
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
        for (Value in : op.getInputs())
          if (in != next)
            core.mask = in;
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
    core.anchor = scores;
    core.q = scores.getInputs()[0];
    core.k = scores.getInputs()[1];
    core.v = pv.getInputs()[1];
    core.scale = scale;
    core.out = pv.getResult(0);
    return success();
  }

  /// ONNX 23 Attention(Q, K, V, mask, past_key, past_value).
  LogicalResult matchOnnx23(OnnxNodeOp op, Core &core) {
    auto in = op.getInputs();
    if (in.size() < 3)
      return nodeError(op, "Attention needs Q, K and V");
    if (op.getFloatAttr("softcap", 0.0) != 0.0 || op.getIntAttr("qk_matmul_output_mode", 0) != 0)
      return nodeError(op, "Attention with softcap or a qk output mode is not supported");
    core.anchor = op;
    core.q = in[0];
    core.k = in[1];
    core.v = in[2];
    if (in.size() > 3 && !isa<NoneType>(in[3].getType()))
      core.mask = in[3];
    if (auto s = op.getAttrs().get("scale"))
      core.explicitScale = cast<FloatAttr>(s).getValueAsDouble();
    core.heads = op.getIntAttr("q_num_heads", 0);
    core.kvHeads = op.getIntAttr("kv_num_heads", 0);
    return takeCache(op, 4, core);
  }

  /// com.microsoft GroupQueryAttention and MultiHeadAttention.
  LogicalResult matchContrib(OnnxNodeOp op, Core &core) {
    auto in = op.getInputs();
    bool gqa = op.getOpType() == "GroupQueryAttention";
    auto present = [](Value v) { return v && !isa<NoneType>(v.getType()); };
    core.heads = op.getIntAttr("num_heads", 0);
    core.kvHeads = gqa ? op.getIntAttr("kv_num_heads", 0) : core.heads;
    if (in.empty())
      return nodeError(op, "attention needs a query input");
    if (in.size() < 3 || !present(in[1]) || !present(in[2])) {
      // Packed QKV (ONNX Runtime GenAI's builder: one projection for q, k and v, GQA given only
      // the query input): cut that projection's output into the three, as a fused qkv_proj is.
      if (!gqa)
        return nodeError(op, "MultiHeadAttention with packed query, key and value is not supported");
      if ((in.size() > 1 && present(in[1])) || (in.size() > 2 && present(in[2])))
        return nodeError(op, "query, key and value must be given separately or all packed in the query");
      FailureOr<SplitOp> split = splitPackedQkv(op, in[0], core.heads, core.kvHeads);
      if (failed(split))
        return failure();
      core.q = split->getResult(0);
      core.k = split->getResult(1);
      core.v = split->getResult(2);
    } else {
      core.q = in[0];
      core.k = in[1];
      core.v = in[2];
    }
    core.anchor = op;
    if (double s = op.getFloatAttr("scale", 0.0); s != 0.0)
      core.explicitScale = s;
    if (op.getFloatAttr("softcap", 0.0) != 0.0)
      return nodeError(op, "attention softcap is not supported");
    unsigned pastAt = gqa ? 3 : 6;
    if (gqa) {
      // local_window_size L: a query attends to itself and the L tokens before it.
      if (int64_t left = op.getIntAttr("local_window_size", -1); left >= 0) {
        if (left >= (int64_t(1) << 40))
          return nodeError(op, "local_window_size " + llvm::Twine(left) + " is out of range");
        core.window = left + 1;
      }
      if (op.getIntAttr("do_rotary", 0)) {
        // Rotary inside the op: cos/sin caches [max_position, rotary_dim / 2] at inputs 7 and 8;
        // positions follow the cached length, which is helm.rope's implicit position.
        if (in.size() < 9 || !present(in[7]) || !present(in[8]))
          return nodeError(op, "do_rotary needs cos_cache and sin_cache inputs");
        auto cacheShape = shapeOf(skipCasts(in[7]));
        if (cacheShape.size() != 2 || ShapedType::isDynamic(cacheShape[1]))
          return nodeError(op, "rotary cos_cache must be a 2-D [positions, rotary_dim / 2] tensor");
        int64_t half = cacheShape[1];
        auto c = cacheValues(in[7], 3 * half), s = cacheValues(in[8], 3 * half);
        std::optional<double> theta = c && s ? thetaFromCaches(*c, *s, half, mantissaBits(in[7])) : std::nullopt;
        // Unreadable weight caches (shape-only import) leave theta unknown.
        bool shapeOnly = (!c || !s) && traceWeight(in[7]) && traceWeight(in[8]);
        if (!theta && !shapeOnly)
          return nodeError(op, "cannot recover a standard rotary base from the cos/sin caches");
        core.rotary = true;
        core.rotaryTheta = theta;
        core.rotaryHalf = half;
        core.rotaryStyle = op.getIntAttr("rotary_interleaved", 0) ? RopeStyle::interleaved
                                                                   : RopeStyle::half;
      }
    } else {
      if (in.size() > 3 && present(in[3]))
        return nodeError(op, "MultiHeadAttention with a packed bias input is not supported");
      if (!op.getIntAttr("unidirectional", 0))
        return nodeError(op, "MultiHeadAttention must be unidirectional (causal) in a decoder");
    }
    return takeCache(op, pastAt, core);
  }

  /// The projection behind a packed [B, S, (heads + 2 kv_heads) * head_dim] query input, cut along its
  /// last axis into q, k and v by a helm.split right after it.
  FailureOr<SplitOp> splitPackedQkv(OnnxNodeOp op, Value packed, int64_t heads, int64_t kvHeads) {
    auto linear = skipCasts(packed).getDefiningOp<LinearOp>();
    if (!linear)
      return nodeError(op, "packed QKV input does not come from a projection");
    int64_t width = linear.getOutFeatures();
    // Head counts past the width are refused before heads + 2 kv_heads can overflow.
    if (heads <= 0 || kvHeads <= 0 || heads % kvHeads || ShapedType::isDynamic(width) || heads > width ||
        kvHeads > width || width % (heads + 2 * kvHeads))
      return nodeError(op, "packed QKV width " + llvm::Twine(width) + " does not divide into " +
                               llvm::Twine(heads) + " query and 2 x " + llvm::Twine(kvHeads) + " kv heads");
    int64_t headDim = width / (heads + 2 * kvHeads);
    return splitProjection(linear, {heads * headDim, kvHeads * headDim, kvHeads * headDim});
  }

  /// A fused op's own KV cache: past key/value at inputs `pastAt`, `pastAt + 1`, present key/value as
  /// results 1 and 2. Also records the op's output.
  LogicalResult takeCache(OnnxNodeOp op, unsigned pastAt, Core &core) {
    auto in = op.getInputs();
    auto present = [](Value v) { return v && !isa<NoneType>(v.getType()); };
    if (in.size() > pastAt + 1 && present(in[pastAt]) && present(in[pastAt + 1])) {
      if (op.getNumResults() < 3)
        return nodeError(op, "attention with a past cache must return the present cache");
      core.pastKey = in[pastAt];
      core.pastValue = in[pastAt + 1];
      core.cacheByConcat = false;
      core.presentKey = op.getResult(1);
      core.presentValue = op.getResult(2);
    }
    core.out = op.getResult(0);
    return success();
  }

  LogicalResult rebuild(Core &core) {
    auto anchor = cast<OnnxNodeOp>(core.anchor);
    Operand q, k, v;
    if (!trace(core.q, q, false) || !trace(core.k, k, core.cacheByConcat) ||
        !trace(core.v, v, core.cacheByConcat))
      return nodeError(anchor, "cannot trace the attention's q, k and v back to projections");
    if (static_cast<bool>(k.past) != static_cast<bool>(v.past))
      return nodeError(anchor, "KV cache on only one of key and value");
    Value pastKey = core.cacheByConcat ? k.past : core.pastKey;
    Value pastValue = core.cacheByConcat ? v.past : core.pastValue;

    // Head geometry: from the op's attributes, the 4-D types at the core, or the rotary/norm ops.
    auto width = [](Value p) { return shapeOf(p).empty() ? int64_t(0) : shapeOf(p).back(); };
    int64_t headDim = q.headDim ? q.headDim : k.headDim ? k.headDim : v.headDim;
    if (!headDim && core.heads > 0 && width(q.projection) % core.heads == 0)
      headDim = width(q.projection) / core.heads;
    for (Operation *op : q.chain) {
      if (auto norm = dyn_cast<RmsNormOp>(op); norm && !headDim)
        headDim = shapeOf(norm.getGamma())[0];
      if (auto rope = dyn_cast<RopeOp>(op); rope && !headDim)
        headDim = rope.getHeadDim();
    }
    if (!headDim || width(q.projection) % headDim || width(k.projection) % headDim ||
        width(k.projection) != width(v.projection))
      return nodeError(anchor, "cannot determine the head dimension of the attention");
    int64_t heads = width(q.projection) / headDim, kvHeads = width(k.projection) / headDim;
    if ((core.heads && core.heads != heads) || (core.kvHeads && core.kvHeads != kvHeads))
      return nodeError(anchor, "head counts " + llvm::Twine(core.heads) + "/" +
                                   llvm::Twine(core.kvHeads) + " disagree with the projections (" +
                                   llvm::Twine(heads) + "/" + llvm::Twine(kvHeads) + ")");
    // A decomposed core's scale is what its graph multiplies by; fused ops default to 1/sqrt(d).
    double scale = core.explicitScale ? *core.explicitScale
                   : anchor.is("MatMul") ? 1.0
                                         : 1.0 / std::sqrt(double(headDim));
    double totalScale = scale * core.scale * q.scale * k.scale;

    // The output projection reads the attention result through Transpose/Reshape.
    LinearOp outProj;
    for (Operation *user : core.out.getUsers()) {
      SmallVector<Operation *> work{user};
      while (!work.empty() && !outProj) {
        Operation *op = work.pop_back_val();
        if (auto l = dyn_cast<LinearOp>(op))
          outProj = skipLayout(l.getInput()) == core.out ? l : LinearOp();
        else if (auto n = dyn_cast<OnnxNodeOp>(op); n && skipLayout(n.getResult(0)) == core.out)
          for (Operation *u : n.getResult(0).getUsers())
            work.push_back(u);
      }
    }
    if (!outProj)
      return nodeError(anchor, "attention output does not reach an output projection");

    OpBuilder b(outProj);
    Value q3 = rebuildChain(b, q, headDim, core, true), k3 = rebuildChain(b, k, headDim, core, true),
          v3 = rebuildChain(b, v, headDim, core, false);
    if (!elementTypeOf(q3))
      return nodeError(anchor, "the query is not a tensor");
    Type resultType = activationType(elementTypeOf(q3), heads * headDim);
    SmallVector<Type> presentTypes;
    if (pastKey) {
      for (Value past : {pastKey, pastValue}) {
        auto t = dyn_cast<RankedTensorType>(past.getType());
        if (!t || t.getRank() != 4)
          return nodeError(anchor, "KV cache inputs must be 4-D [batch, kv_heads, seq, head_dim]");
        refineCacheInput(past, kvHeads, headDim);
        SmallVector<int64_t> shape(cast<RankedTensorType>(past.getType()).getShape());
        shape[2] = ShapedType::kDynamic;
        presentTypes.push_back(RankedTensorType::get(shape, t.getElementType()));
      }
    }
    std::optional<int64_t> window = core.window ? core.window : slidingWindowOf(core.mask);
    auto attention = AttentionOp::create(b, 
        anchor.getLoc(), resultType, presentTypes, q3, k3, v3, pastKey, pastValue,
        b.getI64IntegerAttr(heads), b.getI64IntegerAttr(kvHeads), b.getI64IntegerAttr(headDim),
        std::isnan(totalScale) ? FloatAttr() : b.getF64FloatAttr(totalScale),
        window ? b.getI64IntegerAttr(*window) : IntegerAttr(), FloatAttr());
    outProj.getInputMutable().assign(attention.getResult());
    if (pastKey) {
      replaceValue(core.cacheByConcat ? k.concat : core.presentKey, attention.getPresentKey(), attention);
      replaceValue(core.cacheByConcat ? v.concat : core.presentValue, attention.getPresentValue(),
                   attention);
    }
    return success();
  }

  /// A graph may leave a KV cache input's head count or head size symbolic (ONNX Runtime GenAI's
  /// builder names the head size `kv_cache_dim`); the attention fixes them, so the function argument
  /// takes the static sizes.
  static void refineCacheInput(Value past, int64_t kvHeads, int64_t headDim) {
    auto arg = dyn_cast<BlockArgument>(past);
    auto type = dyn_cast<RankedTensorType>(past.getType());
    auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
    if (!func || !type || type.getRank() != 4)
      return;
    SmallVector<int64_t> shape(type.getShape());
    if (ShapedType::isDynamic(shape[1]))
      shape[1] = kvHeads;
    if (ShapedType::isDynamic(shape[3]))
      shape[3] = headDim;
    if (ArrayRef<int64_t>(shape) == type.getShape())
      return;
    arg.setType(RankedTensorType::get(shape, type.getElementType()));
    SmallVector<Type> inputs(func.getArgumentTypes());
    inputs[arg.getArgNumber()] = arg.getType();
    func.setType(FunctionType::get(func.getContext(), inputs, func.getResultTypes()));
  }
};
} // namespace
