// RUN: helm-opt %s --helm-raise-linear --split-input-file | FileCheck %s

helm.weight_decl @w : tensor<64x32xf32> {onnx_name = "w", location = "", offset = -1, length = 8192}
helm.weight_decl @b : tensor<32xf32> {onnx_name = "b", location = "", offset = -1, length = 128}
// CHECK-LABEL: func.func @matmul_bias
func.func @matmul_bias(%x: tensor<?x?x64xf32>) -> tensor<*xf32> {
  %w = helm.weight @w : tensor<64x32xf32>
  %b = helm.weight @b : tensor<32xf32>
  // CHECK: %[[L:.*]] = helm.linear %arg0, %{{.*}} bias %{{.*}} {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %y = helm.onnx "MatMul"(%x, %w) {attrs = {}, domain = "", node = "mm"} : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<*xf32>
  %z = helm.onnx "Add"(%y, %b) {attrs = {}, domain = "", node = "bias"} : (tensor<*xf32>, tensor<32xf32>) -> tensor<*xf32>
  // CHECK: return %[[L]]
  return %z : tensor<*xf32>
}

// -----

helm.weight_decl @w : tensor<32x64xf32> {onnx_name = "w", location = "", offset = -1, length = 8192}
// A transposed weight ([out, in], Hugging Face layout).
// CHECK-LABEL: func.func @transposed
func.func @transposed(%x: tensor<?x?x64xf32>) -> tensor<*xf32> {
  %w = helm.weight @w : tensor<32x64xf32>
  %t = helm.onnx "Transpose"(%w) {attrs = {perm = array<i64: 1, 0>}, domain = "", node = "t"} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  // CHECK: helm.linear %arg0, %{{.*}} {transpose_weight = true} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %y = helm.onnx "MatMul"(%x, %t) {attrs = {}, domain = "", node = "mm"} : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

helm.weight_decl @w : tensor<32x64xf32> {onnx_name = "w", location = "", offset = -1, length = 8192}
// Gemm with transB and a bias input.
// CHECK-LABEL: func.func @gemm
func.func @gemm(%x: tensor<?x64xf32>, %b: tensor<32xf32>) -> tensor<*xf32> {
  %w = helm.weight @w : tensor<32x64xf32>
  %c = helm.constant dense<1.0> : tensor<32xf32>
  // CHECK: helm.linear %arg0, %{{.*}} bias %{{.*}} {transpose_weight = true} : (tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %y = helm.onnx "Gemm"(%x, %w, %c) {attrs = {transB = 1 : i64}, domain = "", node = "gemm"} : (tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// A MatMul of two activations is not a projection and stays.
// CHECK-LABEL: func.func @activations
func.func @activations(%x: tensor<?x4x?x16xf32>, %y: tensor<?x4x16x?xf32>) -> tensor<*xf32> {
  // CHECK: helm.onnx "MatMul"
  // CHECK-NOT: helm.linear
  %s = helm.onnx "MatMul"(%x, %y) {attrs = {}, domain = "", node = "qk"} : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<*xf32>
  return %s : tensor<*xf32>
}
