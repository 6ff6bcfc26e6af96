//===- Passes.td - HELM raise passes -*- tablegen -*-===//
//
// The raising: generic helm.onnx ops to block-level ops grouped in partition units phase, in pipeline order (buildRaisePipeline in Passes.cpp).
//
#ifndef HELM_PASSES_RAISE_PASSES_TD
#define HELM_PASSES_RAISE_PASSES_TD

include "mlir/Pass/PassBase.td"

def RaiseLinear : Pass<"helm-raise-linear", "mlir::ModuleOp"> {
  let summary = "MatMul/Gemm with a weight operand (+ bias Add) and MatMulNBits to helm.linear";
  let description = [{
    Recognises `MatMul(x, W)`, `MatMul(x, Transpose(W))` and `Gemm(x, W, b)` where `W` is a declared
    weight (through Cast/Identity), and folds a following `Add(y, bias)` whose other operand is a
    1-D weight or constant of the output width.

    `com.microsoft::MatMulNBits` (4- or 8-bit codes in blocks of 32 or more, f32 or f16 scales, with
    or without zero points) becomes a `helm.linear` on a new `[N, K]` weight declaration that
    names the codes, scales and zero-point initializers in `onnx_blocks` and is stored in the block
    format with the same codes (`blocks`: q4_0, q4_1 or q8_0); nothing is dequantized, except a
    weight whose K is not a multiple of 32 (ONNX Runtime's quantizer pads the last block of such a
    row; no block format holds it): declared without `blocks`, the package stores it dequantized
    in the scales' type. A module pass because it adds declarations. g_idx, blocks of 16, 8-bit
    zero points and malformed inputs are refused naming the node.

    Before: `%y = helm.onnx "MatMul"(%x, %w)`, `%z = helm.onnx "Add"(%y, %b)`.
    After:  `%z = helm.linear %x, %w bias %b {transpose_weight = false}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseQuantizedGather : Pass<"helm-raise-quantized-gather", "mlir::ModuleOp"> {
  let summary = "GatherBlockQuantized (a quantized embedding table) to helm.embed on its blocks";
  let description = [{
    `com.microsoft::GatherBlockQuantized(data, ids, scales, zero_points?)` with gather_axis 0 and
    quantize_axis 1 (rows of a [vocab, hidden] table in blocks along each row; uint8, int4 or uint4
    data) becomes `helm.embed %ids, %table` on a new `[vocab, hidden]` declaration with
    `onnx_blocks` and `blocks` (q4_0, q4_1 or q8_0 holding the same codes), as MatMulNBits in
    helm-raise-linear; nothing is dequantized. A module pass because it adds declarations. Other
    axes, blocks of 16, 8-bit zero points and malformed inputs are refused naming the node.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseSplit : Pass<"helm-raise-split", "mlir::func::FuncOp"> {
  let summary = "Slices/Split of a fused projection (qkv, gate_up) to helm.split";
  let description = [{
    Phi-3 style fused projections compute q, k and v (or gate and up) in one `helm.linear` and cut
    the result along the last axis with `Slice` ops or a `Split`. When the pieces tile the output
    exactly, they become one `helm.split` with the piece sizes.

    Before: `%q = Slice(%qkv, 0, 96, axis 2)`, `%k = Slice(%qkv, 96, 128, axis 2)`, ...
    After:  `%q, %k, %v = helm.split %qkv {sizes = array<i64: 96, 32, 32>}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseEmbedding : Pass<"helm-raise-embedding", "mlir::func::FuncOp"> {
  let summary = "Gather of token ids from a weight table to helm.embed";
  let description = [{
    Before: `%h = helm.onnx "Gather"(%table, %ids) {attrs = {axis = 0}}` with `%table` a [vocab, hidden]
    weight. After: `%h = helm.embed %ids, %table`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseFusedNorms : Pass<"helm-raise-fused-norms", "mlir::func::FuncOp"> {
  let summary = "Fused RMSNorm ops (ONNX 23, ONNX Runtime contrib) to helm.rms_norm / helm.add";
  let description = [{
    `RMSNormalization` (ONNX 23) and ONNX Runtime's `SimplifiedLayerNormalization` (written in the
    default or the `com.microsoft` domain) over the last axis become `helm.rms_norm`.
    `com.microsoft.SkipSimplifiedLayerNormalization(input, skip, gamma)` becomes a residual
    `helm.add(input, skip)` feeding `helm.rms_norm`; its fourth output (the sum) is the add.
    Runs after the projections are raised so that the skip operands are typed activations.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseRmsNorm : Pass<"helm-raise-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Decomposed RMSNorm (Pow/ReduceMean/Add/Sqrt/Div/Mul) to helm.rms_norm";
  let description = [{
    Matches `gamma * (x * 1/sqrt(mean(x^2, -1) + eps))` in the forms exporters emit: the square as
    Pow(x, 2) or Mul(x, x), the inverse root as Reciprocal(Sqrt), Div(1, Sqrt), Div(x, Sqrt) or
    Rsqrt-like Pow(., -0.5), with precision Casts anywhere on the way, and the ReduceMean axes as an
    attribute (opset < 18) or an input.

    After: `%y = helm.rms_norm %x, %gamma {epsilon = 1e-06}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseSwiglu : Pass<"helm-raise-swiglu", "mlir::func::FuncOp"> {
  let summary = "silu(gate) * up (Sigmoid/Mul) to helm.swiglu";
  let description = [{
    Before: `%s = Sigmoid(%g)`, `%a = Mul(%g, %s)`, `%y = Mul(%a, %u)`. After: `%y = helm.swiglu %g, %u`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseRope : Pass<"helm-raise-rope", "mlir::func::FuncOp"> {
  let summary = "Rotary embedding (Slice/Neg/Concat/Mul/Add) to helm.rope";
  let description = [{
    Matches `x * cos + rotate_half(x) * sin` with `rotate_half(x) = Concat(-x[..., d/2:], x[..., :d/2])`
    (in either operand order). The rotation base `theta` is recovered from the `inv_freq` constant
    that feeds cos/sin (`inv_freq[i] = theta^(-2i/d)`); frequencies that do not follow that law
    (scaled rotary variants) are reported. A graph input named `position_ids` that feeds cos/sin
    becomes the op's `positions` operand.

    After: `%r = helm.rope %x positions %pos {head_dim = 16, rotary_dim = 16, style = #helm.rope_style<half>, theta = 1.0e+04}`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseAttention : Pass<"helm-raise-attention", "mlir::func::FuncOp"> {
  let summary = "Softmax(QK^T * scale + mask) V with GQA and KV concat to helm.attention";
  let description = [{
    Anchored on Softmax: walks back through the mask Add/Where and scalar scaling to the scores
    MatMul, then traces q, k and v through layout ops (Reshape, Transpose, GQA Unsqueeze/Expand),
    rotary embedding, per-head RMSNorm and the `past_key_values` Concat to their projections. The
    chains are rebuilt on the [batch, seq, heads × head_dim] projections, the attention output feeds
    the output projection directly, and `present` outputs are replaced by the op's cache results.
    The mask subgraph is taken as causal (with padding); it dies with the pattern. Fused ops
    (ONNX 23 Attention, com.microsoft GroupQueryAttention / MultiHeadAttention) are taken as they
    are; a GroupQueryAttention given only a packed query (q, k and v from one projection, as
    ONNX Runtime GenAI's builder writes) gets a `helm.split` of that projection, and cache
    arguments whose head count or size the graph left symbolic take the attention's.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseResidual : Pass<"helm-raise-residual", "mlir::func::FuncOp"> {
  let summary = "Adds of two raised activations to helm.add";
  let description = [{
    After the projection and attention patterns are raised, an ONNX `Add` whose operands are both
    block-level HELM values of the same [batch, seq, hidden] type is a residual connection.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def RaiseLmHead : Pass<"helm-raise-lm-head", "mlir::func::FuncOp"> {
  let summary = "The projection that produces the returned logits to helm.lm_head";
  let description = [{
    The `helm.linear` whose result (through casts) is returned and whose output width is the
    vocabulary becomes `helm.lm_head`; `tied` is set when its weight is the embedding table.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def CheckRaised : Pass<"helm-check-raised", "mlir::func::FuncOp"> {
  let summary = "Erase dead ONNX nodes and reject any that raising left behind";
  let description = [{
    After raising, the only `helm.onnx` ops still alive are constructs HELM does not support. Dead
    ones (mask construction, shape arithmetic feeding raised patterns) are erased; a live one is
    reported as `unsupported ONNX node 'NAME' (OP, domain 'D')` and the pass fails.

    Before: `%m = helm.onnx "Trilu"(...)` with no users, `%t = helm.onnx "Tanh"(%x)` returned.
    After: the first is gone; the second is an error naming the node.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

def FormUnits : Pass<"helm-form-units", "mlir::func::FuncOp"> {
  let summary = "Group raised ops into partition units: embedding, one per block, output head";
  let description = [{
    A block is delimited by the residual stream: an op belongs to block floor(R / 2), where R counts
    the residual `helm.add`s on its longest path from the embedding; ops past the last block form
    the head. Weights and constants move into (or are cloned into) the units that use them. Every
    block must hold exactly one attention and two residual adds.

    After: `helm.unit embedding [0]`, `helm.unit block [1]`, ..., `helm.unit head [N+1]`.
  }];
  let dependentDialects = ["::helm::HelmDialect"];
}

#endif
