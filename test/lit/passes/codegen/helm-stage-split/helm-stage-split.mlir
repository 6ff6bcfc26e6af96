// RUN: helm-opt %s --split-input-file --helm-stage-split | FileCheck %s

// A whole (tiny) model: embedding, one block with its own KV cache, head.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr {helm.name = "context"}, %[[IDS:.*]]: tensor<?x?xi64> {helm.name = "input_ids"}, %[[POS:.*]]: tensor<?x?xi64> {helm.name = "positions"}) -> tensor<?x1x32xf32>
// CHECK-SAME: helm.kv_layers = 1 : i64, helm.stage = "cpu", helm.units = array<i64: 0, 2>
// CHECK: %[[TABLE:.*]] = helm.weight @embed : tensor<32x16xf32>
// CHECK: %[[H:.*]] = helm.embed %[[IDS]], %[[TABLE]]
// CHECK: helm.rope %{{.*}} positions %[[POS]]
// CHECK: helm.rope %{{.*}} positions %[[POS]]
// The model's own cache operands are gone; the attention reads the runtime's cache by layer.
// CHECK: helm.attention %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 8 : i64, helm.kv_layer = 0 : i64
// CHECK-NOT: cache(
// CHECK: %[[R:.*]] = helm.add %[[H]], %{{.*}} : tensor<?x?x16xf32>
// Only the last position reaches the head.
// CHECK: %[[S:.*]] = tensor.dim %[[R]], %c1
// CHECK: %[[LAST:.*]] = arith.subi %[[S]], %c1
// CHECK: tensor.extract_slice %[[R]][0, %[[LAST]], 0] [%{{.*}}, 1, 16] [1, 1, 1]
// CHECK: helm.lm_head
// CHECK: return %{{.*}} : tensor<?x1x32xf32>
// CHECK-NOT: func.func @main
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @wq : tensor<16x16xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wq"}
  helm.weight_decl @wk : tensor<16x8xf32> {length = 512 : i64, location = "", offset = -1 : i64, onnx_name = "wk"}
  helm.weight_decl @wv : tensor<16x8xf32> {length = 512 : i64, location = "", offset = -1 : i64, onnx_name = "wv"}
  helm.weight_decl @wo : tensor<16x16xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wo"}
  helm.weight_decl @norm : tensor<16xf32> {length = 64 : i64, location = "", offset = -1 : i64, onnx_name = "norm"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}, %mask: tensor<?x?xi64> {helm.name = "attention_mask"},
                  %pos: tensor<?x?xi64> {helm.name = "position_ids"},
                  %pk: tensor<?x1x?x8xf32> {helm.name = "past_key_values.0.key"}, %pv: tensor<?x1x?x8xf32> {helm.name = "past_key_values.0.value"})
      -> (tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) {
    %0 = helm.unit embedding[0] : tensor<?x?x16xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      helm.yield %e : tensor<?x?x16xf32>
    }
    %1:3 = helm.unit block[1] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x16xf32> {
      %g = helm.weight @norm : tensor<16xf32>
      %wq = helm.weight @wq : tensor<16x16xf32>
      %wk = helm.weight @wk : tensor<16x8xf32>
      %wv = helm.weight @wv : tensor<16x8xf32>
      %wo = helm.weight @wo : tensor<16x16xf32>
      %n = helm.rms_norm %0, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk, %pv) {head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x16xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x16xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
      %r = helm.add %0, %o : tensor<?x?x16xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x16xf32>
    }
    %2 = helm.unit head[2] : tensor<?x?x32xf32> {
      %g = helm.weight @norm : tensor<16xf32>
      %t = helm.weight @embed : tensor<32x16xf32>
      %n = helm.rms_norm %1#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
      %l = helm.lm_head %n, %t {tied = true, transpose_weight = true} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    }
    return %2, %1#0, %1#1 : tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>
  }
}

// -----

// Positions the graph computes itself (outside the units) are replaced by the stage's positions,
// like the model's own cache: no error, and the computation is gone.
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<?x?xi64> {helm.name = "positions"}
// CHECK-NOT: helm.onnx
// CHECK: helm.rope %{{.*}} positions %[[POS]]
module {
  helm.weight_decl @embed : tensor<32x16xf32> {length = 2048 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}, %mask: tensor<?x?xi64> {helm.name = "attention_mask"}) -> tensor<?x?x32xf32> {
    %pos = helm.onnx "CumSum"(%mask) {attrs = {}, domain = "", node = "positions"} : (tensor<?x?xi64>) -> tensor<?x?xi64>
    %0 = helm.unit embedding[0] : tensor<?x?x16xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
      %r = helm.rope %e positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x16xf32>, tensor<?x?xi64>) -> tensor<?x?x16xf32>
      helm.yield %r : tensor<?x?x16xf32>
    }
    %1 = helm.unit head[1] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x16xf32>
      %l = helm.lm_head %0, %t {tied = true, transpose_weight = true} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    }
    return %1 : tensor<?x?x32xf32>
  }
}
