// RUN: helm-opt %s --helm-raise-attention | FileCheck %s

// com.microsoft GroupQueryAttention with its own rotary (do_rotary = 1): theta comes from the cos/sin
// caches (built here for theta = 10000, rotary_dim 8), the rope lands on q and k, not on v.
helm.weight_decl @w : tensor<32x32xf32> {onnx_name = "w", location = "", offset = -1, length = 4096}
helm.weight_decl @wkv : tensor<32x16xf32> {onnx_name = "wkv", location = "", offset = -1, length = 2048}
// CHECK-LABEL: func.func @gqa_rotary
func.func @gqa_rotary(%x: tensor<?x?x32xf32>, %pk: tensor<?x2x?x8xf32>, %pv: tensor<?x2x?x8xf32>, %lens: tensor<?xi32>, %total: tensor<i32>)
    -> (tensor<?x?x32xf32>, tensor<*xf32>, tensor<*xf32>) {
  %w = helm.weight @w : tensor<32x32xf32>
  %wkv = helm.weight @wkv : tensor<32x16xf32>
  %cos = helm.constant dense<[[1.000000000e+00, 1.000000000e+00, 1.000000000e+00, 1.000000000e+00], [5.403023059e-01, 9.950041653e-01, 9.999500004e-01, 9.999995000e-01], [-4.161468365e-01, 9.800665778e-01, 9.998000067e-01, 9.999980000e-01]]> : tensor<3x4xf32>
  %sin = helm.constant dense<[[0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00], [8.414709848e-01, 9.983341665e-02, 9.999833334e-03, 9.999998333e-04], [9.092974268e-01, 1.986693308e-01, 1.999866669e-02, 1.999998667e-03]]> : tensor<3x4xf32>
  %q = helm.linear %x, %w {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
  %k = helm.linear %x, %wkv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
  %v = helm.linear %x, %wkv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: %[[Q:.*]] = helm.rope %{{.*}} {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.000000e+04 : f64}
  // CHECK: %[[K:.*]] = helm.rope %{{.*}} {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.000000e+04 : f64}
  // CHECK-NOT: helm.rope
  // CHECK: helm.attention %[[Q]], %[[K]], %{{.*}} cache(%arg1, %arg2) {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64
  %a:3 = helm.onnx "GroupQueryAttention"(%q, %k, %v, %pk, %pv, %lens, %total, %cos, %sin) {attrs = {num_heads = 4 : i64, kv_num_heads = 2 : i64, do_rotary = 1 : i64}, domain = "com.microsoft", node = "gqa"}
      : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?xi32>, tensor<i32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  %o = helm.linear %a#0, %w {transpose_weight = false} : (tensor<*xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
  return %o, %a#1, %a#2 : tensor<?x?x32xf32>, tensor<*xf32>, tensor<*xf32>
}
