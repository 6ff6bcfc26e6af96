// RUN: helm-opt %s --helm-check-raised --split-input-file --verify-diagnostics | FileCheck %s

// Dead ONNX nodes (mask construction left behind by raising) are erased.
// CHECK-LABEL: func.func @dead
func.func @dead(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> tensor<?x?x64xf32> {
  // CHECK-NOT: helm.onnx
  %m = helm.onnx "Trilu"(%x) {attrs = {}, domain = "", node = "mask"} : (tensor<?x?x64xf32>) -> tensor<*xf32>
  %n = helm.rms_norm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // CHECK: return
  return %n : tensor<?x?x64xf32>
}

// -----

func.func @live(%x: tensor<?x?x64xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{unsupported ONNX node 'act' (Tanh, domain 'ai.onnx'): no HELM pattern covers it}}
  %t = helm.onnx "Tanh"(%x) {attrs = {}, domain = "", node = "act"} : (tensor<?x?x64xf32>) -> tensor<*xf32>
  return %t : tensor<*xf32>
}
