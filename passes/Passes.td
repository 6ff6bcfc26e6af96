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
