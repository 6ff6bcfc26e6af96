//===- Passes.td - HELM passes ----------------------------------*- tablegen -*-===//
#ifndef HELM_PASSES_TD
#define HELM_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif

def RaiseLinear : Pass<"helm-raise-linear", "mlir::func::FuncOp"> {
  let summary = "MatMul/Gemm with a weight operand (+ bias Add) to helm.linear";
  let description = [{
    Recognises `MatMul(x, W)`, `MatMul(x, Transpose(W))` and `Gemm(x, W, b)` where `W` is a declared
    weight (through Cast/Identity), and folds a following `Add(y, bias)` whose other operand is a
    1-D weight or constant of the output width.

    Before: `%y = helm.onnx "MatMul"(%x, %w)`, `%z = helm.onnx "Add"(%y, %b)`.
    After:  `%z = helm.linear %x, %w bias %b {transpose_weight = false}`.
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
