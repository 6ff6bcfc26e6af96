// RUN: helm-opt %s --split-input-file --helm-raise-attention --verify-diagnostics | FileCheck %s

// Packed QKV (ONNX Runtime GenAI's builder): GroupQueryAttention gets q, k and v as one [B, S, (4 +
// 2 x 2) x 8] input and no key or value. The projection is cut by a helm.split into 32 / 16 / 16, the
// attention reads the three pieces, and the caches' symbolic head size (`kv_cache_dim`) becomes 8 on
// the function's arguments and results.
helm.weight_decl @wqkv : tensor<32x64xf32> {onnx_name = "wqkv", location = "", offset = -1, length = 8192}
helm.weight_decl @w : tensor<32x32xf32> {onnx_name = "w", location = "", offset = -1, length = 4096}
// CHECK-LABEL: func.func @packed
// CHECK-SAME: %arg1: tensor<?x2x?x8xf32>, %arg2: tensor<?x2x?x8xf32>
// CHECK-SAME: -> (tensor<?x?x32xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>)
func.func @packed(%x: tensor<?x?x32xf32>, %pk: tensor<?x2x?x?xf32>, %pv: tensor<?x2x?x?xf32>, %lens: tensor<?xi32>, %total: tensor<i32>)
    -> (tensor<?x?x32xf32>, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>) {
  %wqkv = helm.weight @wqkv : tensor<32x64xf32>
  %w = helm.weight @w : tensor<32x32xf32>
  // CHECK: %[[QKV:.*]] = helm.linear
  // CHECK-NEXT: %[[S:.*]]:3 = helm.split %[[QKV]] {sizes = array<i64: 32, 16, 16>}
  // CHECK: helm.attention %[[S]]#0, %[[S]]#1, %[[S]]#2 cache(%arg1, %arg2) {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64
  // CHECK-SAME: -> (tensor<?x?x32xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>)
  %qkv = helm.linear %x, %wqkv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
  %none = helm.none
  %a:3 = helm.onnx "GroupQueryAttention"(%qkv, %none, %none, %pk, %pv, %lens, %total) {attrs = {num_heads = 4 : i64, kv_num_heads = 2 : i64}, domain = "com.microsoft", node = "gqa"}
      : (tensor<?x?x64xf32>, none, none, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>, tensor<?xi32>, tensor<i32>) -> (tensor<?x?x32xf32>, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>)
  %o = helm.linear %a#0, %w {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
  return %o, %a#1, %a#2 : tensor<?x?x32xf32>, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>
}

// -----

// A packed width that 4 query and 2 x 2 kv heads do not divide: refused, naming the node.
helm.weight_decl @wqkv : tensor<32x60xf32> {onnx_name = "wqkv", location = "", offset = -1, length = 7680}
func.func @bad_width(%x: tensor<?x?x32xf32>, %lens: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  %wqkv = helm.weight @wqkv : tensor<32x60xf32>
  %qkv = helm.linear %x, %wqkv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x60xf32>) -> tensor<?x?x60xf32>
  %none = helm.none
  // expected-error @+1 {{packed QKV width 60 does not divide into 4 query and 2 x 2 kv heads}}
  %a:3 = helm.onnx "GroupQueryAttention"(%qkv, %none, %none, %none, %none, %lens, %total) {attrs = {num_heads = 4 : i64, kv_num_heads = 2 : i64}, domain = "com.microsoft", node = "gqa"}
      : (tensor<?x?x60xf32>, none, none, none, none, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

// Only the key given: neither separate nor packed.
helm.weight_decl @w : tensor<32x32xf32> {onnx_name = "w", location = "", offset = -1, length = 4096}
func.func @half_packed(%x: tensor<?x?x32xf32>, %lens: tensor<?xi32>, %total: tensor<i32>) -> tensor<*xf32> {
  %w = helm.weight @w : tensor<32x32xf32>
  %q = helm.linear %x, %w {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
  %none = helm.none
  // expected-error @+1 {{query, key and value must be given separately or all packed in the query}}
  %a:3 = helm.onnx "GroupQueryAttention"(%q, %q, %none, %none, %none, %lens, %total) {attrs = {num_heads = 4 : i64, kv_num_heads = 2 : i64}, domain = "com.microsoft", node = "gqa"}
      : (tensor<?x?x32xf32>, tensor<?x?x32xf32>, none, none, none, tensor<?xi32>, tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %a#0 : tensor<*xf32>
}

// -----

// MultiHeadAttention's packed form (q, k and v in the query input) is not taken.
helm.weight_decl @wqkv : tensor<32x96xf32> {onnx_name = "wqkv", location = "", offset = -1, length = 12288}
func.func @mha_packed(%x: tensor<?x?x32xf32>) -> tensor<*xf32> {
  %wqkv = helm.weight @wqkv : tensor<32x96xf32>
  %qkv = helm.linear %x, %wqkv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x96xf32>) -> tensor<?x?x96xf32>
  %none = helm.none
  // expected-error @+1 {{MultiHeadAttention with packed query, key and value is not supported}}
  %a = helm.onnx "MultiHeadAttention"(%qkv, %none, %none) {attrs = {num_heads = 4 : i64, unidirectional = 1 : i64}, domain = "com.microsoft", node = "mha"}
      : (tensor<?x?x96xf32>, none, none) -> tensor<*xf32>
  return %a : tensor<*xf32>
}
