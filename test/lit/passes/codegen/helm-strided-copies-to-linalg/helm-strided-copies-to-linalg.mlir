// RUN: helm-opt %s --helm-strided-copies-to-linalg | FileCheck %s

// CHECK-LABEL: func.func @copies
// A copy out of a strided slice becomes linalg.copy; a contiguous one stays (it lowers to memcpy).
// CHECK: linalg.copy ins(%{{.*}} : memref<?x8xf32, strided<[24, 1], offset: 8>>) outs(%{{.*}} : memref<?x8xf32>)
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<?x8xf32> to memref<?x8xf32>
func.func @copies(%src: memref<?x24xf32>, %dst: memref<?x8xf32>, %dst2: memref<?x8xf32>, %n: index) {
  %s = memref.subview %src[0, 8] [%n, 8] [1, 1] : memref<?x24xf32> to memref<?x8xf32, strided<[24, 1], offset: 8>>
  memref.copy %s, %dst : memref<?x8xf32, strided<[24, 1], offset: 8>> to memref<?x8xf32>
  memref.copy %dst, %dst2 : memref<?x8xf32> to memref<?x8xf32>
  return
}
