// RUN: helm-opt %s --helm-raise-swiglu | FileCheck %s

// CHECK-LABEL: func.func @silu_mul
func.func @silu_mul(%g: tensor<?x?x128xf32>, %u: tensor<?x?x128xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %s = helm.onnx "Sigmoid"(%g) {attrs = {}, domain = "", node = "sig"} : (tensor<?x?x128xf32>) -> tensor<*xf32>
  %a = helm.onnx "Mul"(%g, %s) {attrs = {}, domain = "", node = "silu"} : (tensor<?x?x128xf32>, tensor<*xf32>) -> tensor<*xf32>
  %y = helm.onnx "Mul"(%a, %u) {attrs = {}, domain = "", node = "gate"} : (tensor<*xf32>, tensor<?x?x128xf32>) -> tensor<*xf32>
  // x * sigmoid(y) with x != y is not SiLU.
  %s2 = helm.onnx "Sigmoid"(%u) {attrs = {}, domain = "", node = "sig2"} : (tensor<?x?x128xf32>) -> tensor<*xf32>
  %b = helm.onnx "Mul"(%g, %s2) {attrs = {}, domain = "", node = "notsilu"} : (tensor<?x?x128xf32>, tensor<*xf32>) -> tensor<*xf32>
  %z = helm.onnx "Mul"(%b, %u) {attrs = {}, domain = "", node = "gate2"} : (tensor<*xf32>, tensor<?x?x128xf32>) -> tensor<*xf32>
  // CHECK: %[[S:.*]] = helm.swiglu %arg0, %arg1 : tensor<?x?x128xf32>
  // CHECK: %[[Z:.*]] = helm.onnx "Mul"{{.*}}node = "gate2"
  // CHECK: return %[[S]], %[[Z]]
  return %y, %z : tensor<*xf32>, tensor<*xf32>
}
