// Block units that are the same but for their weights share one function; a unit no other unit
// of its stage shares stays inline. Blocks 1-3 are equal (their output projections in q8_0
// blocks); block 4 differs (its output projection is f32).
// RUN: helm-opt %s --helm-stage-split | FileCheck %s
// RUN: helm-opt %s --helm-annotate-costs --helm-partition=force-split=3 --helm-stage-split | FileCheck %s --check-prefix=SPLIT
// RUN: helm-opt %s --helm-stage-split=share-unit-code=false | FileCheck %s --check-prefix=OFF

// The shared code: context, positions, first KV layer, the unit's input, then its weights; a
// weight in blocks says its format. The attention's layer counts from the first-layer argument.
// CHECK-LABEL: func.func private @helm_cpu_stage_unit0(
// CHECK-SAME: %[[CTX:[a-z0-9]+]]: !llvm.ptr, %[[POS:[a-z0-9]+]]: tensor<?x?xi64>, %{{[a-z0-9]+}}: i64 {helm.kv_layer_base}, %[[X:[a-z0-9]+]]: tensor<?x?x32xf32>,
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<32x32xf32> {helm.weight_blocks = #helm.blocks<format = q8_0, row_dim = 1>}) -> tensor<?x?x32xf32>
// CHECK-SAME: attributes {helm.unit_function, no_inline}
// CHECK: helm.rms_norm %[[X]]
// CHECK: helm.rope %{{.*}} positions %[[POS]]
// CHECK: helm.attention {{.*}}helm.kv_layer = 0 : i64
// CHECK-NOT: cache(
// CHECK: %[[R:.*]] = helm.add %[[X]], %{{.*}}
// CHECK: return %[[R]] : tensor<?x?x32xf32>
// CHECK-NOT: func.func private @helm_cpu_stage_unit1
// The stage calls it for blocks 1-3 with their own weights and layers 0, 1 and 2; block 4 is
// inline at layer 3.
// CHECK-LABEL: func.func @helm_cpu_stage(
// CHECK-SAME: %[[SCTX:[a-z0-9]+]]: !llvm.ptr {helm.name = "context"}, %{{[a-z0-9]+}}: tensor<?x?xi64> {helm.name = "input_ids"}, %[[SPOS:[a-z0-9]+]]: tensor<?x?xi64> {helm.name = "positions"})
// CHECK-SAME: helm.kv_layers = 4 : i64
// CHECK: %[[E:.*]] = helm.embed
// CHECK: %[[L0:.*]] = arith.constant 0 : i64
// CHECK: helm.weight @wo1
// CHECK: %[[B1:.*]] = call @helm_cpu_stage_unit0(%[[SCTX]], %[[SPOS]], %[[L0]], %[[E]],
// CHECK: %[[L1:.*]] = arith.constant 1 : i64
// CHECK: %[[B2:.*]] = call @helm_cpu_stage_unit0(%[[SCTX]], %[[SPOS]], %[[L1]], %[[B1]],
// CHECK: %[[L2:.*]] = arith.constant 2 : i64
// CHECK: helm.weight @wq3
// CHECK: %[[B3:.*]] = call @helm_cpu_stage_unit0(%[[SCTX]], %[[SPOS]], %[[L2]], %[[B2]],
// CHECK: helm.rms_norm %[[B3]]
// CHECK: helm.attention {{.*}}helm.kv_layer = 3 : i64
// CHECK: helm.lm_head

// Split after block 2: the CPU stage shares its code for blocks 1 and 2; on the GPU, block 3 has
// no equal unit in its stage, so both of the GPU stage's blocks are inline.
// SPLIT: func.func private @helm_cpu_stage_unit0(
// SPLIT-LABEL: func.func @helm_cpu_stage(
// SPLIT-COUNT-2: call @helm_cpu_stage_unit0
// SPLIT: helm.transfer
// SPLIT-NOT: func.func private
// SPLIT-LABEL: func.func @helm_gpu_stage(
// SPLIT-NOT: call
// SPLIT: helm.attention {{.*}}helm.kv_layer = 0 : i64
// SPLIT: helm.attention {{.*}}helm.kv_layer = 1 : i64
// SPLIT: helm.lm_head

// OFF-NOT: func.func private
// OFF-NOT: call
// OFF-COUNT-4: helm.attention
// OFF-NOT: call

module attributes {
  helm.target = #helm.target<name = "big",
      cpu = #helm.cpu<dram_bw_gbs = 10.0, l3_bytes = 0.0, l3_bw_gbs = 10.0, p_dec_gflops = 10.0, p_pre_gflops = 10.0,
                      ram_bytes = 1.0e9, overhead_ms_per_block = 0.0>,
      gpu = #helm.gpu<backend = cuda, vram_bytes = 1.0e9, reserved_bytes = 0.0, mem_bw_gbs = 100.0, p_dec_gflops = 100.0,
                      p_pre_gflops = 100.0, overhead_ms_per_block = 0.0>,
      link = #helm.link<bw_gbs = 16.0, latency_us = 0.0>>
} {
  helm.weight_decl @embed : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @norm : tensor<32xf32> {length = 128 : i64, location = "", offset = -1 : i64, onnx_name = "norm"}
  helm.weight_decl @norm1 : tensor<32xf32> {length = 128 : i64, location = "", offset = -1 : i64, onnx_name = "norm1"}
  helm.weight_decl @wq1 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wq1"}
  helm.weight_decl @wk1 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wk1"}
  helm.weight_decl @wv1 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wv1"}
  helm.weight_decl @wo1 : tensor<32x32xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 1>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wo1"}
  helm.weight_decl @norm2 : tensor<32xf32> {length = 128 : i64, location = "", offset = -1 : i64, onnx_name = "norm2"}
  helm.weight_decl @wq2 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wq2"}
  helm.weight_decl @wk2 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wk2"}
  helm.weight_decl @wv2 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wv2"}
  helm.weight_decl @wo2 : tensor<32x32xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 1>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wo2"}
  helm.weight_decl @norm3 : tensor<32xf32> {length = 128 : i64, location = "", offset = -1 : i64, onnx_name = "norm3"}
  helm.weight_decl @wq3 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wq3"}
  helm.weight_decl @wk3 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wk3"}
  helm.weight_decl @wv3 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wv3"}
  helm.weight_decl @wo3 : tensor<32x32xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 1>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wo3"}
  helm.weight_decl @norm4 : tensor<32xf32> {length = 128 : i64, location = "", offset = -1 : i64, onnx_name = "norm4"}
  helm.weight_decl @wq4 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wq4"}
  helm.weight_decl @wk4 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wk4"}
  helm.weight_decl @wv4 : tensor<32x8xf32> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "wv4"}
  helm.weight_decl @wo4 : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wo4"}
  func.func @main(%ids: tensor<?x?xi64> {helm.name = "input_ids"}, %pos: tensor<?x?xi64> {helm.name = "position_ids"},
                  %pk: tensor<?x1x?x8xf32> {helm.name = "past_key_values.0.key"}, %pv: tensor<?x1x?x8xf32> {helm.name = "past_key_values.0.value"})
      -> tensor<?x?x32xf32> {
    %0 = helm.unit embedding[0] : tensor<?x?x32xf32> {
      %t = helm.weight @embed : tensor<32x32xf32>
      %e = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      helm.yield %e : tensor<?x?x32xf32>
    }
    %1:3 = helm.unit block[1] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32> {
      %g = helm.weight @norm1 : tensor<32xf32>
      %wq = helm.weight @wq1 : tensor<32x32xf32>
      %wk = helm.weight @wk1 : tensor<32x8xf32>
      %wv = helm.weight @wv1 : tensor<32x8xf32>
      %wo = helm.weight @wo1 : tensor<32x32xf32>
      %n = helm.rms_norm %0, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk, %pv) {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x32xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %0, %o : tensor<?x?x32xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32>
    }
    %2:3 = helm.unit block[2] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32> {
      %g = helm.weight @norm2 : tensor<32xf32>
      %wq = helm.weight @wq2 : tensor<32x32xf32>
      %wk = helm.weight @wk2 : tensor<32x8xf32>
      %wv = helm.weight @wv2 : tensor<32x8xf32>
      %wo = helm.weight @wo2 : tensor<32x32xf32>
      %n = helm.rms_norm %1#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk, %pv) {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x32xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %1#2, %o : tensor<?x?x32xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32>
    }
    %3:3 = helm.unit block[3] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32> {
      %g = helm.weight @norm3 : tensor<32xf32>
      %wq = helm.weight @wq3 : tensor<32x32xf32>
      %wk = helm.weight @wk3 : tensor<32x8xf32>
      %wv = helm.weight @wv3 : tensor<32x8xf32>
      %wo = helm.weight @wo3 : tensor<32x32xf32>
      %n = helm.rms_norm %2#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk, %pv) {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x32xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %2#2, %o : tensor<?x?x32xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32>
    }
    %4:3 = helm.unit block[4] : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32> {
      %g = helm.weight @norm4 : tensor<32xf32>
      %wq = helm.weight @wq4 : tensor<32x32xf32>
      %wk = helm.weight @wk4 : tensor<32x8xf32>
      %wv = helm.weight @wv4 : tensor<32x8xf32>
      %wo = helm.weight @wo4 : tensor<32x32xf32>
      %n = helm.rms_norm %3#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %q = helm.linear %n, %wq {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %k = helm.linear %n, %wk {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %v = helm.linear %n, %wv {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
      %qr = helm.rope %q positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
      %kr = helm.rope %k positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
      %a, %p:2 = helm.attention %qr, %kr, %v cache(%pk, %pv) {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x32xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>) -> (tensor<?x?x32xf32>, tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>)
      %o = helm.linear %a, %wo {transpose_weight = false} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      %r = helm.add %3#2, %o : tensor<?x?x32xf32>
      helm.yield %p#0, %p#1, %r : tensor<?x1x?x8xf32>, tensor<?x1x?x8xf32>, tensor<?x?x32xf32>
    }
    %5 = helm.unit head[5] : tensor<?x?x32xf32> {
      %g = helm.weight @norm : tensor<32xf32>
      %t = helm.weight @embed : tensor<32x32xf32>
      %n = helm.rms_norm %4#2, %g {epsilon = 1.0e-06 : f64} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
      %l = helm.lm_head %n, %t {tied = true, transpose_weight = true} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
      helm.yield %l : tensor<?x?x32xf32>
    }
    return %5 : tensor<?x?x32xf32>
  }
}
