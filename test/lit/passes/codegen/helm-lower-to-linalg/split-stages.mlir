// RUN: helm-opt %s --helm-lower-to-linalg --cse | FileCheck %s

// The two stages of a split plan. The CPU stage ends in the transfer of the boundary activation:
// its result is the activation itself, written in the model's dtype to the caller's [B, S, H]
// buffer (the runtime moves those bytes across the link). The GPU stage reads that activation as
// its input view and returns the logits as f32 [B, V].
// Each stage records what it reads and writes per token (record version, input width with 0 for
// token ids, output width, activation element bytes) for the runtime to check against the manifest.
// CHECK: llvm.mlir.global external constant @helm_cpu_stage_abi(dense<[1, 0, 16, 2]> : tensor<4xi64>)
// CHECK-LABEL: func.func @helm_cpu_stage
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[B:.*]]: i64, %[[S:.*]]: i64)
// CHECK-NOT: helm.transfer
// CHECK: llvm.insertvalue %[[OUT]]
// CHECK: llvm.insertvalue %[[B]], %{{.*}}[3, 0]
// CHECK: llvm.insertvalue %[[S]], %{{.*}}[3, 1]
// CHECK: bufferization.materialize_in_destination %{{.*}} : (tensor<?x?x16xf16>, memref<?x?x16xf16>) -> ()
// CHECK: llvm.mlir.global external constant @helm_gpu_stage_abi(dense<[1, 16, 32, 2]> : tensor<4xi64>)
// CHECK-LABEL: func.func @helm_gpu_stage
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %[[IN:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: llvm.insertvalue %[[IN]]
// CHECK: builtin.unrealized_conversion_cast %{{.*}} to memref<?x?x16xf16>
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: bufferization.materialize_in_destination %{{.*}} : (tensor<?x1x32xf32>, memref<?x1x32xf32>) -> ()
module {
  helm.weight_decl @embed : tensor<32x16xf16> {length = 1024 : i64, location = "", offset = -1 : i64, onnx_name = "embed"}
  func.func @helm_cpu_stage(%ctx: !llvm.ptr, %ids: tensor<?x?xi64>, %pos: tensor<?x?xi64>) -> tensor<?x?x16xf16> attributes {helm.stage = "cpu"} {
    %t = helm.weight @embed : tensor<32x16xf16>
    %h = helm.embed %ids, %t : (tensor<?x?xi64>, tensor<32x16xf16>) -> tensor<?x?x16xf16>
    %x = helm.transfer %h cpu -> gpu : tensor<?x?x16xf16>
    return %x : tensor<?x?x16xf16>
  }
  func.func @helm_gpu_stage(%ctx: !llvm.ptr, %x: tensor<?x?x16xf16>, %pos: tensor<?x?xi64>) -> tensor<?x1x32xf16> attributes {helm.stage = "gpu"} {
    %t = helm.weight @embed : tensor<32x16xf16>
    %c1 = arith.constant 1 : index
    %bsz = tensor.dim %x, %c1 : tensor<?x?x16xf16>
    %last = tensor.extract_slice %x[0, 0, 0] [%bsz, 1, 16] [1, 1, 1] : tensor<?x?x16xf16> to tensor<?x1x16xf16>
    %l = helm.lm_head %last, %t {tied = true, transpose_weight = true} : (tensor<?x1x16xf16>, tensor<32x16xf16>) -> tensor<?x1x32xf16>
    return %l : tensor<?x1x32xf16>
  }
}
