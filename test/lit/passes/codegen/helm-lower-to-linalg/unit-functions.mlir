// RUN: helm-opt %s --helm-lower-to-linalg --cse | FileCheck %s

// A unit function (helm-stage-split's shared code of equal units) keeps its tensor signature and
// gives up its argument attributes: the weight argument's block format becomes the format code its
// kernel call passes (q8_0 = 3), and each attention's layer is the first-layer argument plus its
// own helm.kv_layer. Its rope's cos/sin tables are two more arguments: the stage computes them
// once and passes them to every call. The stage fetches each call's weights by id.
// CHECK-LABEL: func.func private @helm_cpu_stage_unit0(
// CHECK-SAME: %[[CTX:[a-z0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: tensor<?x?xi64>, %[[BASE:[a-z0-9]+]]: i64, %{{[a-z0-9]+}}: tensor<?x?x32xf32>, %{{[a-z0-9]+}}: tensor<32x32xf32>, %[[COS:[a-z0-9]+]]: tensor<?x?x4xf32>, %[[SIN:[a-z0-9]+]]: tensor<?x?x4xf32>) -> tensor<?x?x32xf32>
// CHECK-SAME: attributes {helm.unit_function, no_inline}
// CHECK-NOT: math.cos
// CHECK: linalg.generic {{.*}} ins(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[COS]], %[[SIN]] :
// CHECK: linalg.generic {{.*}} ins(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[COS]], %[[SIN]] :
// CHECK: %[[LAYER:.*]] = arith.addi %[[BASE]], %c0_i64 : i64
// CHECK: call @helm_rt_attention(%[[CTX]], %[[LAYER]],
// CHECK: call @helm_k_linear(%{{.*}}, %{{.*}}, %{{.*}}, %c3_i32, %c1_i32,
// CHECK: return %{{.*}} : tensor<?x?x32xf32>
// CHECK-LABEL: func.func @helm_cpu_stage(
// CHECK: call @helm_rt_weight(%{{.*}}, %c1_i64)
// CHECK: %[[T:.*]]:2 = linalg.generic
// CHECK: math.cos
// CHECK: call @helm_cpu_stage_unit0({{.*}}, %[[T]]#0, %[[T]]#1)
// CHECK: call @helm_rt_weight(%{{.*}}, %c2_i64)
// CHECK-NOT: math.cos
// CHECK: call @helm_cpu_stage_unit0({{.*}}, %[[T]]#0, %[[T]]#1)
module {
  helm.weight_decl @embed : tensor<32x32xf32> {length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  helm.weight_decl @wo1 : tensor<32x32xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 0>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wo1"}
  helm.weight_decl @wo2 : tensor<32x32xf32> {blocks = #helm.blocks<format = q8_0, row_dim = 0>, length = 4096 : i64, location = "", offset = -1 : i64, onnx_name = "wo2"}
  func.func private @helm_cpu_stage_unit0(%ctx: !llvm.ptr, %pos: tensor<?x?xi64>, %layer: i64 {helm.kv_layer_base}, %x: tensor<?x?x32xf32>,
      %wo: tensor<32x32xf32> {helm.weight_blocks = #helm.blocks<format = q8_0, row_dim = 0>}) -> tensor<?x?x32xf32> attributes {helm.unit_function, no_inline} {
    %xr = helm.rope %x positions %pos {head_dim = 8 : i64, rotary_dim = 8 : i64, style = #helm.rope_style<half>, theta = 1.0e+04 : f64} : (tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
    %a = helm.attention %xr, %x, %x {head_dim = 8 : i64, helm.kv_layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.35355339059327373 : f64} : (tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
    %o = helm.linear %a, %wo {transpose_weight = true} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %r = helm.add %x, %o : tensor<?x?x32xf32>
    return %r : tensor<?x?x32xf32>
  }
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf32> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x32xf32>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %c0 = arith.constant 0 : i64
    %w1 = helm.weight @wo1 : tensor<32x32xf32>
    %b1 = call @helm_cpu_stage_unit0(%ctx, %pos, %c0, %h, %w1) : (!llvm.ptr, tensor<?x?xi64>, i64, tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %c1 = arith.constant 1 : i64
    %w2 = helm.weight @wo2 : tensor<32x32xf32>
    %b2 = call @helm_cpu_stage_unit0(%ctx, %pos, %c1, %b1, %w2) : (!llvm.ptr, tensor<?x?xi64>, i64, tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %l = helm.lm_head %b2, %t {tied = true, transpose_weight = true} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %c = tensor.cast %l : tensor<?x?x32xf32> to tensor<?x1x32xf32>
    return %c : tensor<?x1x32xf32>
  }
}
