// RUN: helm-opt %s --helm-raise-attention --split-input-file --verify-diagnostics | FileCheck %s

// com.microsoft MultiHeadAttention (causal, own KV cache) on 3-D projections: 4 heads of 16.
helm.weight_decl @wq : tensor<64x64xf32> {onnx_name = "q", location = "", offset = -1, length = 16384}
helm.weight_decl @wo : tensor<64x64xf32> {onnx_name = "o", location = "", offset = -1, length = 16384}
// CHECK-LABEL: func.func @mha
func.func @mha(%x: tensor<?x?x64xf32>, %pk: tensor<?x4x?x16xf32>, %pv: tensor<?x4x?x16xf32>)
    -> (tensor<?x?x64xf32>, tensor<*xf32>, tensor<*xf32>) {
  %wq = helm.weight @wq : tensor<64x64xf32>
  %wo = helm.weight @wo : tensor<64x64xf32>
  %q = helm.linear %x, %wq {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = helm.linear %x, %wq {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = helm.linear %x, %wq {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %n = helm.none
  %a:3 = helm.onnx "MultiHeadAttention"(%q, %k, %v, %n, %n, %n, %pk, %pv) {attrs = {num_heads = 4 : i64, unidirectional = 1 : i64}, domain = "com.microsoft", node = "mha"}
      : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, none, none, none, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  // CHECK: %[[R:.*]], %[[P:.*]]:2 = helm.attention %{{.*}}, %{{.*}}, %{{.*}} cache(%arg1, %arg2) {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f64}
  // CHECK: helm.linear %[[R]]
  %o = helm.linear %a#0, %wo {transpose_weight = false} : (tensor<*xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: return %{{.*}}, %[[P]]#0, %[[P]]#1
  return %o, %a#1, %a#2 : tensor<?x?x64xf32>, tensor<*xf32>, tensor<*xf32>
}

// -----

helm.weight_decl @wq : tensor<64x64xf32> {onnx_name = "q", location = "", offset = -1, length = 16384}
func.func @bidirectional(%x: tensor<?x?x64xf32>) -> tensor<*xf32> {
  %wq = helm.weight @wq : tensor<64x64xf32>
  %q = helm.linear %x, %wq {transpose_weight = false} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  // expected-error @+1 {{node 'enc' (MultiHeadAttention): MultiHeadAttention must be unidirectional (causal) in a decoder}}
  %a = helm.onnx "MultiHeadAttention"(%q, %q, %q) {attrs = {num_heads = 4 : i64}, domain = "com.microsoft", node = "enc"}
      : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<*xf32>
  return %a : tensor<*xf32>
}
