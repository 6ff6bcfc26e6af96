// RUN: helm-opt %s --helm-raise-residual | FileCheck %s

helm.weight_decl @w : tensor<64x64xf32> {onnx_name = "w", location = "", offset = -1, length = 16384}
// CHECK-LABEL: func.func @residual
func.func @residual(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %w = helm.weight @w : tensor<64x64xf32>
  %n = helm.rms_norm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = helm.linear %n, %w {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: %[[A:.*]] = helm.add %{{.*}}, %{{.*}} : tensor<?x?x64xf32>
  %a = helm.onnx "Add"(%n, %l) {attrs = {}, domain = "", node = "res"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<*xf32>
  // Adding a function argument (not a raised value) is not a residual connection.
  // CHECK: %[[B:.*]] = helm.onnx "Add"{{.*}}node = "other"
  %b = helm.onnx "Add"(%x, %l) {attrs = {}, domain = "", node = "other"} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<*xf32>
  // CHECK: return %[[A]], %[[B]]
  return %a, %b : tensor<*xf32>, tensor<*xf32>
}
