// RUN: helm-opt %s --split-input-file --helm-vectorize-glue --cse | FileCheck %s
// RUN: helm-opt %s --split-input-file --helm-vectorize-glue=vector-width=8 --cse | FileCheck %s --check-prefix=W8

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// An elementwise op over [B, S, 96]: rows of 96 = 6 x 16 lanes (12 x 8 with vector-width=8), unmasked.
// CHECK-LABEL: func.func @elementwise
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %c0 to %c96 step %c16
// CHECK: vector.transfer_read {{.*}} : tensor<1x1x16xf32>, vector<1x1x16xf32>
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<1x1x16xf32>
// CHECK: vector.transfer_write
// CHECK-NOT: linalg.generic
// W8-LABEL: func.func @elementwise
// W8: scf.for %{{.*}} = %c0 to %c96 step %c8
// W8: arith.addf %{{.*}}, %{{.*}} : vector<1x1x8xf32>
func.func @elementwise(%a: tensor<?x?x96xf32>, %b: tensor<?x?x96xf32>) -> tensor<?x?x96xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %a, %c0 : tensor<?x?x96xf32>
  %d1 = tensor.dim %a, %c1 : tensor<?x?x96xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x96xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<?x?x96xf32>, tensor<?x?x96xf32>) outs(%e : tensor<?x?x96xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<?x?x96xf32>
  return %r : tensor<?x?x96xf32>
}

// -----

// A row length that 16 does not divide (36 = 3 x 12): the widest divisor, still unmasked.
// CHECK-LABEL: func.func @odd_row
// CHECK: scf.for %{{.*}} = %c0 to %c36 step %c12
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<1x12xf32>
// CHECK-NOT: vector.mask
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @odd_row(%a: tensor<?x36xf32>) -> tensor<?x36xf32> {
  %c0 = arith.constant 0 : index
  %d0 = tensor.dim %a, %c0 : tensor<?x36xf32>
  %e = tensor.empty(%d0) : tensor<?x36xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x36xf32>) outs(%e : tensor<?x36xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.mulf %x, %x : f32
    linalg.yield %s : f32
  } -> tensor<?x36xf32>
  return %r : tensor<?x36xf32>
}

// -----

// A reduction over a static group (RMSNorm's sum of squares): the group is one vector.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK: vector.transfer_read {{.*}} vector<1x64xf32>
// CHECK: vector.multi_reduction <add>, %{{.*}}, %{{.*}} [1] : vector<1x64xf32> to vector<1xf32>
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @sum_of_squares(%a: tensor<?x64xf32>, %init: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x64xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// A dynamic innermost loop stays scalar (no masks).
// CHECK-LABEL: func.func @dynamic_row
// CHECK-NOT: vector.
// CHECK: linalg.generic
func.func @dynamic_row(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %d0 = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%d0) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.negf %x : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// A gather (tensor.extract in the body) stays a scalar linalg.generic.
// CHECK-LABEL: func.func @gather
// CHECK: linalg.generic
// CHECK: tensor.extract
func.func @gather(%ids: tensor<?xi64>, %table: tensor<32x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %d0 = tensor.dim %ids, %c0 : tensor<?xi64>
  %e = tensor.empty(%d0) : tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<?xi64>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%id: i64, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%i, %j] : tensor<32x16xf32>
    linalg.yield %v : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}

// -----

// On buffers (where the CPU pipeline runs it, after bufferization): the same tiling, on subviews.
// CHECK-LABEL: func.func @on_buffers
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c16
// CHECK: vector.transfer_read {{.*}} : memref<1x16xf32, strided<[64, 1], offset: ?>>, vector<1x16xf32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<1x16xf32>
// CHECK: vector.transfer_write
// CHECK-NOT: linalg.generic
func.func @on_buffers(%a: memref<?x64xf32>, %o: memref<?x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<?x64xf32>) outs(%o : memref<?x64xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.mulf %x, %x : f32
    linalg.yield %s : f32
  }
  return
}
