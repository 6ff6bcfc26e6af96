// RUN: helm-opt %s --split-input-file --helm-lower-to-linalg --cse | FileCheck %s

// Qwen3's per-head q norm (group = head_dim) feeding a rope: one sum-of-squares reduction, then
// the rotation, which normalises its two inputs itself. The separate normalise generic (and its
// [B, S, 16] result) is gone. A rotate-half rope over the whole head is two generics on x viewed as
// [B, S, heads, 2, half], one per half, reading both halves through identity maps: no gathers
// (tensor.extract), so helm-vectorize-glue can make it vector code.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] output_shape [%{{.*}}, %{{.*}}, 2, 8]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: math.cos
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3, 4]] output_shape [%{{.*}}, %{{.*}}, 2, 2, 4]
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-NOT: tensor.extract %
// CHECK: math.rsqrt
// CHECK: arith.negf
// CHECK: tensor.insert_slice %{{.*}}[0, 0, 0, 0, 0] [%{{.*}}, %{{.*}}, 2, 1, 4]
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-NOT: tensor.extract %
// CHECK: math.rsqrt
// CHECK-NOT: arith.negf
// CHECK: tensor.insert_slice %{{.*}}[0, 0, 0, 1, 0] [%{{.*}}, %{{.*}}, 2, 1, 4]
// CHECK: tensor.collapse_shape
// CHECK-NOT: linalg.generic
// CHECK: call @helm_rt_attention
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf32> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf32>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
    %g = helm.constant dense<1.0> : tensor<8xf32>
    %qn = helm.rms_norm %h, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
    %qr = helm.rope %qn positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %a = helm.attention %qr, %h, %h {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %c0 = arith.constant 0 : index
    %bsz = tensor.dim %a, %c0 : tensor<?x?x16xf32>
    %last = tensor.extract_slice %a[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    %logits = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf32>, tensor<32x16xf32>) -> tensor<?x1x32xf32>
    return %logits : tensor<?x1x32xf32>
  }
}

// -----

// A norm whose result has another user besides the rope is not fused: both generics stay.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: math.rsqrt
// CHECK: math.cos
// CHECK: linalg.generic
// CHECK-NOT: math.rsqrt
// CHECK: call @helm_rt_attention
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf32> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf32>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
    %g = helm.constant dense<1.0> : tensor<8xf32>
    %qn = helm.rms_norm %h, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
    %qr = helm.rope %qn positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %a = helm.attention %qr, %qn, %h {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %c0 = arith.constant 0 : index
    %bsz = tensor.dim %a, %c0 : tensor<?x?x16xf32>
    %last = tensor.extract_slice %a[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    %logits = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf32>, tensor<32x16xf32>) -> tensor<?x1x32xf32>
    return %logits : tensor<?x1x32xf32>
  }
}

// -----

// An interleaved rope (pairs of adjacent lanes) keeps the single rotation generic that fetches
// each element's partner with tensor.extract (scalar code), normalising self and partner.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: math.cos
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: tensor.extract %
// CHECK: math.rsqrt
// CHECK: tensor.extract %
// CHECK: math.rsqrt
// CHECK-NOT: linalg.generic
// CHECK: call @helm_rt_attention
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf32> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf32>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
    %g = helm.constant dense<1.0> : tensor<8xf32>
    %qn = helm.rms_norm %h, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<8xf32>) -> tensor<?x?x16xf32>
    %qr = helm.rope %qn positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<interleaved>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
    %a = helm.attention %qr, %h, %h {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    %c0 = arith.constant 0 : index
    %bsz = tensor.dim %a, %c0 : tensor<?x?x16xf32>
    %last = tensor.extract_slice %a[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf32> to tensor<?x1x16xf32>
    %logits = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf32>, tensor<32x16xf32>) -> tensor<?x1x32xf32>
    return %logits : tensor<?x1x32xf32>
  }
}
