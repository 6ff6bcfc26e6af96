// RUN: helm-opt %s --helm-raise-lm-head --split-input-file | FileCheck %s

helm.weight_decl @table : tensor<256x64xf32> {onnx_name = "embed", location = "", offset = -1, length = 65536}
// The returned projection that reuses the embedding table is a tied LM head.
// CHECK-LABEL: func.func @tied
func.func @tied(%ids: tensor<?x?xi64>) -> tensor<?x?x256xf32> {
  %t = helm.weight @table : tensor<256x64xf32>
  %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
  %t2 = helm.weight @table : tensor<256x64xf32>
  // CHECK: helm.lm_head %{{.*}}, %{{.*}} {tied = true, transpose_weight = true}
  %l = helm.linear %e, %t2 {transpose_weight = true} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
  return %l : tensor<?x?x256xf32>
}

// -----

helm.weight_decl @table : tensor<256x64xf32> {onnx_name = "embed", location = "", offset = -1, length = 65536}
helm.weight_decl @head : tensor<64x256xf32> {onnx_name = "lm_head", location = "", offset = -1, length = 65536}
// CHECK-LABEL: func.func @untied
func.func @untied(%ids: tensor<?x?xi64>) -> tensor<?x?x256xf32> {
  %t = helm.weight @table : tensor<256x64xf32>
  %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
  %h = helm.weight @head : tensor<64x256xf32>
  // CHECK: helm.lm_head %{{.*}}, %{{.*}} {tied = false, transpose_weight = false}
  %l = helm.linear %e, %h {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
  return %l : tensor<?x?x256xf32>
}

// -----

// The TorchScript exporter stores a tied head as a transposed copy of the table; values decide.
// (Covered on a real export in tied-copy.test: inline weights need the importer's reader.)
