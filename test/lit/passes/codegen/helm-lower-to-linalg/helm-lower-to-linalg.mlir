// RUN: helm-opt %s --split-input-file --helm-lower-to-linalg --cse | FileCheck %s

// Stage signature, weights, embedding, norm, kernels, attention, head.
// CHECK-DAG: func.func private @helm_rt_weight(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-DAG: func.func private @helm_k_linear(!llvm.ptr, i32, !llvm.ptr, i32, i32, !llvm.ptr, i32, i64, i64, i64)
// CHECK-DAG: func.func private @helm_rt_attention(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64, i64, i64, i64, i64, f32, i64)
// CHECK: helm.weight_decl @embed {{.*}}helm.tensor_id = 0 : i64
// CHECK: helm.weight_decl @wqkv {{.*}}helm.tensor_id = 1 : i64
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr, %[[IDSP:.*]]: !llvm.ptr, %[[POSP:.*]]: !llvm.ptr, %[[OUTP:.*]]: !llvm.ptr, %[[B:.*]]: i64, %[[S:.*]]: i64)
// CHECK-NOT: -> tensor
// Token ids are a view of the runtime's buffer.
// CHECK: llvm.insertvalue %[[IDSP]]
// CHECK: bufferization.to_tensor %{{.*}} restrict : memref<?x?xi64>
// Weights come from the runtime's table by id.
// CHECK: %[[W0:.*]] = call @helm_rt_weight(%[[CTX]], %c0_i64)
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<32x16xf32>
// Embedding: a gather with the id clamped into the table.
// CHECK: linalg.generic
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: tensor.extract
// RMSNorm: sum of squares (reduction), then scale.
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] output_shape [%{{.*}}, %{{.*}}, 1, 16]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: math.rsqrt
// Linear: raw pointers into the kernel ABI; fp32 activations and weights (codes 0), [K, N] layout.
// CHECK: bufferization.to_buffer %{{.*}} read_only
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: %[[Y:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {alignment = 64 : i64} : memref<?x?x32xf32>
// CHECK: call @helm_k_linear(%{{.*}}, %c0_i32, %{{.*}}, %c0_i32, %c0_i32, %{{.*}}, %c0_i32, %{{.*}}, %c16_i64, %c32_i64)
// CHECK: bufferization.to_tensor %[[Y]] restrict writable
// Split of the fused projection: slices, copied before they reach a kernel.
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [%{{.*}}, %{{.*}}, 16] [1, 1, 1]
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 16] [%{{.*}}, %{{.*}}, 8] [1, 1, 1]
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 24] [%{{.*}}, %{{.*}}, 8] [1, 1, 1]
// Rope: cos/sin tables from positions, then the rotation. q and k share one pair of tables
// (same positions, theta and rotary size): cos and sin are computed once.
// CHECK: arith.sitofp
// CHECK: math.cos
// CHECK: math.sin
// CHECK-NOT: math.cos
// CHECK-NOT: math.sin
// Attention: the runtime's kernel with the layer, heads, scale and window.
// CHECK: bufferization.alloc_tensor() copy(
// CHECK: call @helm_rt_attention(%[[CTX]], %c0_i64, {{.*}}, %c0_i32, {{.*}}, %c2_i64, %c1_i64, %c8_i64, %{{.*}}, %c0_i64)
// SwiGLU: silu(gate) * up.
// CHECK: math.exp
// CHECK: arith.divf
// Down projection ([N, K] layout: code 1), residual add, then the head writes f32 logits into the
// caller's buffer.
// CHECK: call @helm_k_linear(%{{.*}}, %c0_i32, %{{.*}}, %c0_i32, %c1_i32, %{{.*}}, %c0_i32, %{{.*}}, %c32_i64, %c16_i64)
// CHECK: arith.addf
// CHECK: call @helm_k_linear(%{{.*}}, %c0_i32, %{{.*}}, %c0_i32, %c1_i32,
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %{{.*}} : (tensor<?x1x32xf32>, memref<?x1x32xf32>) -> ()
// CHECK: return
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @wqkv : tensor<16x32xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "wqkv"}
  helm.weight_decl @wup : tensor<16x64xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wup"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf32> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf32>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
    %g = helm.constant dense<1.0> : tensor<16xf32>
    %n = helm.rms_norm %h, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
    %w = helm.weight @wqkv : tensor<16x32xf32>
    %qkv = helm.linear %n, %w {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x32xf32>) -> tensor<?x?x32xf32>
    %q, %k, %v = helm.split %qkv {sizes = array<i64: 16, 8, 8>} : tensor<?x?x32xf32> -> tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
    %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = helm.attention %qr, %kr, %v {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
    %wu = helm.weight @wup : tensor<16x64xf32>
    %gu = helm.linear %a, %wu {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x64xf32>) -> tensor<?x?x64xf32>
    %gate, %up = helm.split %gu {sizes = array<i64: 32, 32>} : tensor<?x?x64xf32> -> tensor<?x?x32xf32>, tensor<?x?x32xf32>
    %act = helm.swiglu %gate, %up : tensor<?x?x32xf32>
    %d = helm.linear %act, %w {transpose_weight = true} : (tensor<?x?x32xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
    %r = helm.add %h, %d : tensor<?x?x16xf32>
    %c1 = arith.constant 1 : index
    %bsz = tensor.dim %r, %c1 : tensor<?x?x16xf32>
    %last = tensor.extract_slice %r[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    %l = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf32>, tensor<32x16xf32>) -> tensor<?x1x32xf32>
    return %l : tensor<?x1x32xf32>
  }
}

// -----

// fp16 activations: glue computes in f32 and rounds to f16 where the reference rounds; the kernel
// gets dtype code 1; logits are widened to f32 for the caller.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK: linalg.generic
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: math.rsqrt
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.mulf
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: call @helm_k_linear(%{{.*}}, %c1_i32, %{{.*}}, %c1_i32, %c1_i32, %{{.*}}, %c1_i32,
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: bufferization.materialize_in_destination %{{.*}} : (tensor<?x1x32xf32>, memref<?x1x32xf32>) -> ()
module {
  helm.weight_decl @embed : tensor<32x16xf16> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf16> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf16>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf16>) -> tensor<?x?x16xf16>
    %c1 = arith.constant 1 : index
    %bsz = tensor.dim %h, %c1 : tensor<?x?x16xf16>
    %last = tensor.extract_slice %h[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf16> to tensor<?x1x16xf16>
    %g = helm.constant dense<1.0> : tensor<16xf16>
    %n = helm.rms_norm %last, %g {epsilon = 1.0e-06 : f64} : (tensor<?x1x16xf16>, tensor<16xf16>) -> tensor<?x1x16xf16>
    %l = helm.lm_head %n, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf16>, tensor<32x16xf16>) -> tensor<?x1x32xf16>
    return %l : tensor<?x1x32xf16>
  }
}
