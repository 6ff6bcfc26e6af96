// RUN: helm-opt %s --split-input-file --helm-free-buffers | FileCheck %s

// Each buffer is freed right after the last use of it or of any view of it; uses inside regions
// and through pointer extraction count.
// CHECK-LABEL: func.func @straight_line
// CHECK: %[[A:.*]] = memref.alloc(%{{.*}}) : memref<?x16xf32>
// CHECK: %[[B:.*]] = memref.alloc(%{{.*}}) : memref<?x16xf32>
// CHECK: linalg.copy ins(%[[A]] : memref<?x16xf32>) outs(%[[B]] : memref<?x16xf32>)
// CHECK: %[[V:.*]] = memref.expand_shape %[[A]]
// CHECK: memref.extract_aligned_pointer_as_index %[[V]]
// CHECK: call @kernel
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: scf.for
// CHECK: memref.load %[[B]]
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK: return
func.func private @kernel(!llvm.ptr)
func.func @straight_line(%n: index, %out: memref<f32>) {
  %a = memref.alloc(%n) : memref<?x16xf32>
  %b = memref.alloc(%n) : memref<?x16xf32>
  linalg.copy ins(%a : memref<?x16xf32>) outs(%b : memref<?x16xf32>)
  %v = memref.expand_shape %a [[0], [1, 2]] output_shape [%n, 4, 4] : memref<?x16xf32> into memref<?x4x4xf32>
  %i = memref.extract_aligned_pointer_as_index %v : memref<?x4x4xf32> -> index
  %i64 = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %i64 : i64 to !llvm.ptr
  call @kernel(%p) : (!llvm.ptr) -> ()
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %k = %c0 to %n step %c1 {
    %x = memref.load %b[%k, %c0] : memref<?x16xf32>
    memref.store %x, %out[] : memref<f32>
  }
  return
}

// -----

// A returned buffer (or one already freed) is left alone.
// CHECK-LABEL: func.func @escapes
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @escapes(%n: index) -> memref<?xf32> {
  %a = memref.alloc(%n) : memref<?xf32>
  %c = memref.cast %a : memref<?xf32> to memref<?xf32>
  return %c : memref<?xf32>
}

// -----

// CHECK-LABEL: func.func @unused
// CHECK: %[[A:.*]] = memref.alloc
// CHECK-NEXT: memref.dealloc %[[A]]
func.func @unused(%n: index) {
  %a = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

// A unit function's result that it allocated belongs to the caller, which frees it after its last
// use; the result is a new buffer, so the call's argument is free right after the call. A result
// that is one of the callee's arguments (@passes_through) is not the caller's to free.
// CHECK-LABEL: func.func private @fresh
// CHECK: %[[R:.*]] = memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: return %[[R]]
// CHECK-LABEL: func.func @caller
// CHECK: %[[X:.*]] = memref.alloc
// CHECK-NEXT: %[[Y:.*]] = call @fresh(%[[X]])
// CHECK-NEXT: memref.dealloc %[[X]]
// CHECK-NEXT: %[[Z:.*]] = call @fresh(%[[Y]])
// CHECK-NEXT: memref.dealloc %[[Y]]
// CHECK-NEXT: %[[P:.*]] = call @passes_through(%[[Z]])
// CHECK-NEXT: memref.copy %[[P]], %{{.*}}
// CHECK-NEXT: memref.dealloc %[[Z]]
// CHECK-NEXT: return
func.func private @fresh(%x: memref<?xf32>) -> memref<?xf32> attributes {helm.unit_function} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %r = memref.alloc(%n) : memref<?xf32>
  memref.copy %x, %r : memref<?xf32> to memref<?xf32>
  return %r : memref<?xf32>
}
func.func private @passes_through(%x: memref<?xf32>) -> memref<?xf32> attributes {helm.unit_function} {
  return %x : memref<?xf32>
}
func.func @caller(%n: index, %out: memref<?xf32>) {
  %x = memref.alloc(%n) : memref<?xf32>
  %y = call @fresh(%x) : (memref<?xf32>) -> memref<?xf32>
  %z = call @fresh(%y) : (memref<?xf32>) -> memref<?xf32>
  %p = call @passes_through(%z) : (memref<?xf32>) -> memref<?xf32>
  memref.copy %p, %out : memref<?xf32> to memref<?xf32>
  return
}

// -----

// A buffer's sizes are not its address: the next buffers are sized like this one (memref.dim, or
// the sizes of memref.extract_strided_metadata), and neither they nor a view of the returned
// buffer cut to that size are its aliases, so it is freed after its own last use even though the
// buffer sized like it is returned. (Followed, the sizes made every later buffer of a layer an
// alias of its first ones, and the returned one leaked them: 8 buffers per decode step.)
// CHECK-LABEL: func.func @sized_like
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: %[[D:.*]] = memref.dim %[[A]]
// CHECK-NEXT: %[[B:.*]] = memref.alloc(%[[D]])
// CHECK-NEXT: linalg.copy ins(%[[A]] : memref<?xf32>) outs(%[[B]] : memref<?xf32>)
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: %[[C:.*]] = memref.alloc(%[[D]])
// CHECK-NEXT: linalg.copy ins(%[[B]] : memref<?xf32>) outs(%[[C]] : memref<?xf32>)
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return %[[C]]
func.func @sized_like(%n: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %a = memref.alloc(%n) : memref<?xf32>
  %d = memref.dim %a, %c0 : memref<?xf32>
  %b = memref.alloc(%d) : memref<?xf32>
  linalg.copy ins(%a : memref<?xf32>) outs(%b : memref<?xf32>)
  %c = memref.alloc(%d) : memref<?xf32>
  linalg.copy ins(%b : memref<?xf32>) outs(%c : memref<?xf32>)
  return %c : memref<?xf32>
}

// -----

// CHECK-LABEL: func.func @metadata_sizes
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: memref.extract_strided_metadata %[[A]]
// CHECK-NEXT: %[[V:.*]] = memref.subview %[[OUT:.*]][0] [%{{.*}}] [1]
// CHECK-NEXT: linalg.copy ins(%[[A]] : memref<?xf32>) outs(%[[V]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return %[[OUT]]
func.func @metadata_sizes(%n: index, %out: memref<?xf32>) -> memref<?xf32> {
  %a = memref.alloc(%n) : memref<?xf32>
  %base, %offset, %size, %stride = memref.extract_strided_metadata %a : memref<?xf32> -> memref<f32>, index, index, index
  %v = memref.subview %out[0] [%size] [1] : memref<?xf32> to memref<?xf32, strided<[1]>>
  linalg.copy ins(%a : memref<?xf32>) outs(%v : memref<?xf32, strided<[1]>>)
  return %out : memref<?xf32>
}

// -----

// A buffer allocated with a size loaded from another buffer is a new buffer, not a view of it.
// CHECK-LABEL: func.func @sized_by_contents
// CHECK: %[[A:.*]] = memref.alloc() : memref<index>
// CHECK-NEXT: %[[K:.*]] = memref.load %[[A]][]
// CHECK-NEXT: %[[B:.*]] = memref.alloc(%[[K]])
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return %[[B]]
func.func @sized_by_contents() -> memref<?xf32> {
  %a = memref.alloc() : memref<index>
  %k = memref.load %a[] : memref<index>
  %b = memref.alloc(%k) : memref<?xf32>
  return %b : memref<?xf32>
}
